"""Logs as JSON lines (``RAFTCONNECT_LOG_FORMAT=json``) and masked credentials, through the real settings."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from webapp.logconfig import MASK, Redactor, logging_config

ROOT = Path(__file__).resolve().parents[1]
SECRET = 'cluster-"secret"-0123456789'
ADMIN_PASSWORD = "adm1n-pa55word"
STORE_PASSWORD = "pg-pa55/word"

# Logs through Django's LOGGING (webapp.settings): a URL with a password, the cluster secret,
# a multi-line message and an exception whose traceback holds the store URL.
SCRIPT = r"""
import logging, os, django
django.setup()
log = logging.getLogger("raftconnect.test")
log.info("store %s ready", os.environ["RAFTCONNECT_STORE_PG"])
log.warning("secret is %s and admin %s\nsecond line", os.environ["RAFTCONNECT_CLUSTER_SECRET"],
            os.environ["RAFTCONNECT_ADMIN_PASSWORD"])
log.info("broker mysql://bob:hunter22@db:3306/x")
try:
    raise ConnectionError("cannot reach " + os.environ["RAFTCONNECT_STORE_PG"])
except ConnectionError:
    log.exception("store failed")
"""


def run_logging(fmt: str, tmp_path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "webapp.settings", "RAFTCONNECT_DATA_DIR": str(tmp_path),
        "RAFTCONNECT_LOG_FORMAT": fmt, "RAFTCONNECT_CLUSTER_SECRET": SECRET,
        "RAFTCONNECT_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "RAFTCONNECT_STORE_PG": f"postgresql://rc:{STORE_PASSWORD.replace('/', '%2F')}@pg:5432/rc",
    })
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stderr.splitlines()


def assert_no_credentials(text: str) -> None:
    for secret in (SECRET, json.dumps(SECRET)[1:-1], ADMIN_PASSWORD, STORE_PASSWORD, "pg-pa55%2Fword", "hunter22"):
        assert secret not in text


def test_json_format_writes_one_object_per_line_without_credentials(tmp_path):
    lines = run_logging("json", tmp_path)
    records = [json.loads(line) for line in lines]  # every line is one whole JSON object
    assert [r["level"] for r in records] == ["INFO", "WARNING", "INFO", "ERROR"]
    assert {r["logger"] for r in records} == {"raftconnect.test"}
    assert all(r["time"] and r["process"] > 0 and r["thread"] for r in records)
    assert records[0]["message"] == f"store postgresql://rc:{MASK}@pg:5432/rc ready"
    assert records[1]["message"] == f"secret is {MASK} and admin {MASK}\nsecond line"
    assert "Traceback" in records[3]["exc_info"] and f"rc:{MASK}@pg" in records[3]["exc_info"]
    assert_no_credentials("\n".join(lines))


def test_plain_format_is_masked_too(tmp_path):
    text = "\n".join(run_logging("plain", tmp_path))
    assert "WARNING raftconnect.test: secret is ***" in text and "Traceback" in text
    assert_no_credentials(text)


def test_redactor_leaves_short_values_and_plain_urls_alone():
    redact = Redactor({"RAFTCONNECT_ADMIN_PASSWORD": "abc", "RAFTCONNECT_STORE_X": "redis://h:6379/0"})
    assert redact("abc redis://h:6379/0 http://user@host/") == "abc redis://h:6379/0 http://user@host/"


def test_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="plain or json"):
        logging_config("xml")


def test_waitress_queue_depth_warnings_pass_once_per_interval_with_the_count_held_back(caplog):
    import logging

    from webapp.logconfig import ThrottledLogger

    now = [100.0]
    throttled = ThrottledLogger(logging.getLogger("waitress.queue"), interval=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="waitress.queue"):
        throttled.warning("Task queue depth is %d", 1)
        now[0] = 105.0
        for depth in (2, 3, 4):
            throttled.warning("Task queue depth is %d", depth)
        now[0] = 111.0
        throttled.warning("Task queue depth is %d", 5)
    assert [r.getMessage() for r in caplog.records if r.name == "waitress.queue"] == [
        "Task queue depth is 1", "Task queue depth is 5 (3 more in the last 11 s)"]


def test_the_rest_server_throttles_waitress_queue_warnings():
    from webapp.connect.restserver import waitress_server
    from webapp.logconfig import ThrottledLogger

    server = waitress_server(lambda environ, start_response: [], host="127.0.0.1", port=0, threads=1,
                             connection_limit=10)
    try:
        assert isinstance(server.task_dispatcher.queue_logger, ThrottledLogger)
    finally:
        server.close()
