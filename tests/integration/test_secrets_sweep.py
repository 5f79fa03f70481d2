"""Secrets never leave a node (issue 19 item 3): one scenario touches every place a secret could show.

A real node (``runnode``, raft+worker, its agent, JSON logs) is given a cluster
secret, an admin password, a metadata store URL with a password (PostgreSQL
trusts any), a store URL with a password that cannot connect, JDBC connectors
with a ``connection.password`` (a PASSWORD key), a password in the user-info of
``connection.url`` and one as a ``?password=`` parameter (the databases there
refuse or do not answer, so their tasks fail with traces), a user with a
password and an API token. The scenario then reads every public REST resource,
the status traces, the store list, a store switch and its result (and a refused
switch to the broken store), ``/metrics``, ``/health``, the console and its API,
the Django admin pages (the store page included) and the OpenAPI pages, through
a basic login, the token and a browser session, and finally greps all of it and
every log line the node and its agent wrote for each secret, in the forms it
could take (as given, URL-quoted, JSON-escaped).

Left out on purpose: the one response that issues the token (it shows the key
once, by design), the internal endpoints (signed with the cluster secret; a
worker needs the resolved configs), and the backup export
(``GET /raftconnect/v1/backup``, admin only: a restore needs the connectors'
configs as written; see docs/OPERATIONS.md).
"""
from __future__ import annotations

import json
import re
import secrets
import urllib.parse
import uuid
from pathlib import Path

import pytest
import requests

from tests.storage.conftest import PG_URL, drop_database
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration

STORE = "/raftconnect/v1/metadata-store"
JDBC_SINK = "io.confluent.connect.jdbc.JdbcSinkConnector"
JDBC_SOURCE = "io.confluent.connect.jdbc.JdbcSourceConnector"


def _secret(label: str) -> str:
    # long enough for the log redactor (6+), distinctive enough that a hit is a leak, URL-safe
    return f"{label}-{secrets.token_hex(10)}"


def _forms(value: str) -> set[str]:
    return {value, urllib.parse.quote(value, safe=""), json.dumps(value)[1:-1]}


class Capture:
    """Everything the scenario saw: ``(where, text)`` pairs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def add(self, where: str, resp: requests.Response) -> requests.Response:
        headers = "\n".join(f"{k}: {v}" for k, v in resp.headers.items() if k.lower() != "set-cookie")
        self.seen.append((f"{resp.request.method} {where} -> {resp.status_code}", headers + "\n" + resp.text))
        return resp


@pytest.fixture
def scene(tmp_path, kafka_broker):
    db = f"raftconnect_sweep_{uuid.uuid4().hex[:8]}"
    s = {name: _secret(name) for name in ("cluster", "admin", "storepw", "brokenpw", "connpw", "urlpw", "querypw",
                                          "userpw")}
    env = {
        "RAFTCONNECT_CLUSTER_SECRET": s["cluster"],
        "RAFTCONNECT_STORE_PG": PG_URL.format(db=db).replace("postgres@", f"postgres:{s['storepw']}@"),
        "RAFTCONNECT_STORE_BROKEN": f"mysql://root:{s['brokenpw']}@127.0.0.1:1/nothing",
        "RAFTCONNECT_LOG_FORMAT": "json",
        "RAFTCONNECT_LOG_LEVEL": "DEBUG",
    }
    node = NodeProcess(node_id="sweep", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n"),
                       bootstrap_servers=kafka_broker.bootstrap_servers, env=env, auth=("admin", s["admin"]))
    node.start(timeout=120)
    try:
        yield node, s
    finally:
        node.stop()
        drop_database("postgresql", db)


def test_no_secret_in_any_response_page_log_or_metric(scene):
    node, s = scene
    cap = Capture()
    admin = requests.Session()
    admin.auth = node.auth

    def call(method: str, path: str, session: requests.Session = admin, **kw) -> requests.Response:
        return cap.add(path, session.request(method, node.url + path, timeout=60, **kw))

    # a user with a password, and a token (the one response that shows its key is not captured)
    assert call("POST", "/raftconnect/v1/users", json={"name": "vera", "password": s["userpw"],
                                                       "role": "operator"}).status_code == 201
    vera = requests.Session()
    vera.auth = ("vera", s["userpw"])
    issued = vera.post(node.url + "/raftconnect/v1/tokens", json={"name": "ci"}, timeout=60)
    assert issued.status_code == 201
    s["token"] = issued.json()["token"]
    bearer = requests.Session()
    bearer.headers["Authorization"] = f"Bearer {s['token']}"

    # connectors holding passwords: a PASSWORD key, a URL's user-info, a URL parameter; their tasks fail
    sink = {"connector.class": JDBC_SINK, "topics": "sweep-in", "tasks.max": "1",
            "connection.url": f"jdbc:postgresql://sweeper:{s['urlpw']}@127.0.0.1:1/nothing",
            "connection.user": "sweeper", "connection.password": s["connpw"]}
    source = {"connector.class": JDBC_SOURCE, "mode": "bulk", "topic.prefix": "sweep-", "tasks.max": "1",
              "table.whitelist": "t",
              "connection.url": f"jdbc:mysql://127.0.0.1:1/nothing?user=root&password={s['querypw']}"}
    assert call("POST", "/connectors", bearer, json={"name": "jsink", "config": sink}).status_code == 201
    assert call("PUT", "/connectors/jsource/config", vera, json=source).status_code == 201
    bad = dict(sink, **{"connection.url": f"jdbc:oracle://u:{s['urlpw']}@h/x"})
    assert call("POST", "/connectors", json={"name": "jbad", "config": bad}).status_code == 400
    call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", json=sink)
    call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", json=bad)

    def failed(name: str) -> bool:
        st = requests.get(f"{node.url}/connectors/{name}/status", auth=node.auth, timeout=30).json()
        return any(t.get("state") == "FAILED" and t.get("trace") for t in st.get("tasks", []))

    wait_for(lambda: failed("jsink") and failed("jsource"), 180, what="both JDBC tasks to fail with a trace")

    # a store switch to a store whose URL has a password, its result, and a refused one to a dead store
    assert call("POST", STORE + "/switch", json={"target": "pg"}).status_code == 202
    wait_for(lambda: (admin.get(node.url + STORE, timeout=30).json()["switch"] or {}).get("phase")
             in ("completed", "aborted"), 120, what="the switch to end")
    ended = call("GET", STORE).json()
    assert (ended["switch"]["phase"], ended["active"]) == ("completed", "pg"), ended
    call("POST", STORE + "/switch", json={"target": "broken"})
    call("POST", STORE + "/switch", json={"target": "nope"})

    # every public resource, as admin, operator (basic) and token
    paths = ["/", "/health", "/metrics", "/connectors", "/connectors?expand=info&expand=status", "/connector-plugins",
             "/connector-plugins/JdbcSinkConnector/config", "/admin/loggers", "/raftconnect/v1/cluster",
             "/raftconnect/v1/assignment", "/raftconnect/v1/raft", "/raftconnect/v1/raft/members",
             "/raftconnect/v1/tokens", "/raftconnect/v1/users", STORE, "/raftconnect/v1/openapi.json",
             "/raftconnect/v1/docs", "/raftconnect/v1/redoc", "/raftconnect/v1/whoami", "/raftconnect/v1/task-metrics",
             "/raftconnect/v1/console/connectors", "/raftconnect/v1/console/kafka", "/raftconnect/v1/console/history",
             "/console/", "/raftconnect/v1/backup?nothing"]
    for name in ("jsink", "jsource"):
        paths += [f"/connectors/{name}", f"/connectors/{name}/config", f"/connectors/{name}/status",
                  f"/connectors/{name}/tasks", f"/connectors/{name}/tasks/0/status", f"/connectors/{name}/offsets",
                  f"/connectors/{name}/topics", f"/raftconnect/v1/connectors/{name}/metrics",
                  f"/raftconnect/v1/console/connectors/{name}", f"/raftconnect/v1/console/connectors/{name}/offsets"]
    for session in (admin, vera, bearer):
        for path in paths:
            if path.startswith("/raftconnect/v1/backup"):
                continue  # the export carries configs as written, for restore (module docstring)
            call("GET", path, session)

    # the console and the Django admin through a browser session (login with CSRF)
    browser = requests.Session()
    login_page = call("GET", "/admin/login/", browser)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text).group(1)
    logged_in = call("POST", "/admin/login/?next=/admin/", browser,
                     data={"username": "admin", "password": s["admin"], "csrfmiddlewaretoken": token,
                           "next": "/admin/"}, headers={"Referer": node.url + "/admin/login/"})
    assert logged_in.status_code == 200 and "log out" in logged_in.text.lower(), logged_in.text[:500]
    admin_pages = ["/admin/", "/admin/metadata-store/", "/admin/auth/user/", "/admin/auth/group/",
                   "/admin/connect/", "/admin/storage/"]
    for link in set(re.findall(r'href="(/admin/[^"#?]*)"', "".join(cap.seen[-1][1:]))):
        admin_pages.append(link)
    for page in sorted(set(admin_pages)):
        if "logout" not in page:
            call("GET", page, browser)
    for path in ("/console/", "/raftconnect/v1/session", "/raftconnect/v1/console/connectors"):
        call("GET", path, browser)

    # everything the node and its agent logged
    logs = [(str(p), p.read_text(errors="replace")) for p in Path(node.data_dir).rglob("*.log")]
    assert logs and any('"message"' in text for _, text in logs)

    # the scenario reached what it means to check
    seen = {where: text for where, text in cap.seen}
    assert "[hidden]" in seen["GET /connectors/jsink/config -> 200"]
    assert "Cannot connect to jdbc:postgresql://sweeper:[hidden]@" in seen["GET /connectors/jsink/status -> 200"]
    assert "raftconnect_raft_term" in seen["GET /metrics -> 200"]
    assert any(w.startswith("GET /admin/metadata-store/ -> 200") for w in seen)
    assert any(w.startswith(f"POST {STORE}/switch -> ") and not w.endswith("202") for w in seen)

    leaks = []
    for label, value in s.items():
        for where, text in cap.seen + logs:
            for form in _forms(value):
                if form in text:
                    i = text.index(form)
                    leaks.append(f"{label} in {where}: ...{text[max(0, i - 160):i + 40]!r}")
                    break
    assert not leaks, "\n".join(leaks[:40])
