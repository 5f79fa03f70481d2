"""README's first steps run as written: its marked shell blocks are executed, in order, against the node
they start themselves.

A block is executed when the line before its ```` ```sh ```` fence is ``<!-- readme-test -->``
(:data:`MARKER`). They run as one bash script (``set -e``; the README's own background jobs
and shell functions carry over from block to block), unchanged: nothing is substituted. Only
the environment is prepared as the README's first unexecuted step leaves it: the virtualenv's
``bin`` first on ``PATH`` (this checkout importable through ``PYTHONPATH``), an empty working
directory standing for the clone (so ``var/`` starts empty), ``RAFTCONNECT_CLI_CONFIG`` (the
CLI's documented contexts-file variable) in that directory, and no other ``RAFTCONNECT_*``
variable.

The README uses the fixed ports 8083, 7001 and 9092. To never meet another test's node on
them, the script runs in its own network and PID namespaces (``unshare``, where the kernel
allows it; else directly when those ports are free): its loopback is private, and when the
script ends (or its time is up) every process it started is killed with the namespace's
first process. The README waits on conditions, so this test does too: no fixed sleeps.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.launcher import REPO_ROOT

pytestmark = pytest.mark.integration

README = REPO_ROOT / "README.md"
MARKER = "<!-- readme-test -->"
#: seconds for the whole script (it usually takes 30 to 45)
TIMEOUT_S = 150
_FENCE = re.compile(r"^```(?:sh|bash|shell)\s*$")
_DONE = "@@readme-block-done "


def marked_blocks(text: str) -> list[tuple[int, str]]:
    """``[(line number of the fence, block text)]`` of the shell blocks right after :data:`MARKER`."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines[:-1]):
        if line.strip() != MARKER or not _FENCE.match(lines[i + 1].strip()):
            continue
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        blocks.append((i + 2, "\n".join(lines[i + 2:end])))
    return blocks


def _script(blocks: list[tuple[int, str]]) -> str:
    parts = ["set -e"]
    for n, (line, body) in enumerate(blocks):
        parts += [f"# README.md line {line}", body, f'echo "{_DONE}{n}"']
    return "\n".join(parts) + "\n"


def _namespaces_work() -> bool:
    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    probe = subprocess.run(["unshare", "-rn", "--pid", "--fork", "--mount-proc", "--kill-child",
                            "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30)
    return probe.returncode == 0


def _ports_free(*ports: int) -> bool:
    for port in ports:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def _stop_group(pgid: int, grace_s: float = 30.0) -> None:
    """SIGTERM to the process group (the README's node and ``raftconnect kafka`` stop what they started),
    then SIGKILL to whatever is left after ``grace_s``."""
    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False

    if not alive():
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the group's end, not a fixed wait
    if alive():
        os.killpg(pgid, signal.SIGKILL)


def test_marked_blocks_are_found_in_order():
    blocks = marked_blocks(README.read_text())
    assert len(blocks) >= 4
    assert "raftconnect kafka" in blocks[0][1] and "raftconnect node" in blocks[0][1]
    assert [line for line, _ in blocks] == sorted(line for line, _ in blocks)
    assert marked_blocks(f"{MARKER}\n```sh\necho a\n```\n```sh\necho b\n```\n") == [(2, "echo a")]


def test_readme_first_steps_run_as_written(tmp_path):
    blocks = marked_blocks(README.read_text())
    script = tmp_path / "readme.sh"
    script.write_text(_script(blocks))
    work = tmp_path / "clone"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_")}
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1",
               RAFTCONNECT_CLI_CONFIG=str(tmp_path / "cli-config.json"))
    if _namespaces_work():
        command = ["unshare", "-rn", "--pid", "--fork", "--mount-proc", "--kill-child",
                   "bash", "-c", 'ip link set lo up && exec bash "$0"', str(script)]
    elif _ports_free(8083, 7001, 9092):
        command = ["bash", str(script)]
    else:
        pytest.skip("no network namespace here and README's ports 8083/7001/9092 are taken")
    proc = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop_group(proc.pid, grace_s=5)
        out, _ = proc.communicate()
    finally:
        _stop_group(proc.pid)  # without a namespace: the README's node and broker, still in the background
    done = len(re.findall(re.escape(_DONE) + r"\d+", out))
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((work / "var").glob("*.log")))
    where = f"README.md block at line {blocks[done][0]}" if done < len(blocks) else "after the last block"
    assert proc.returncode == 0 and done == len(blocks), f"failed in {where}:\n{out[-6000:]}\n{logs}"
    # what the README says each step shows
    assert re.search(r"^n1\s+raft,worker\s+127\.0\.0\.1:8083\s+127\.0\.0\.1:7001\s+\w+\s+LEADER", out, re.M), out
    assert re.search(r"^people-sink\s+sink\s+RUNNING\s+1/1", out, re.M), out
    assert re.search(r"^people-source\s+source\s+RUNNING\s+1/1", out, re.M), out
    assert "2 rows in var/n1/files/out" in out
    assert '"name":"people-copy"' in out and '"tasks.max":"2"' in out, out
    assert '"name":"alice","role":"viewer"' in out and '"name":"ci","created"' in out, out
    assert re.search(r'\["people-copy","people-sink","people-source"\]', out), out  # with alice's token
