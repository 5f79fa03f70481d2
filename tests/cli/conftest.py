"""Fixtures of the ``raftconnect`` command line tests: a node started by the CLI itself from a worker
properties file, and a runner of the CLI as a subprocess (``python -m webapp.cli``, from outside the
checkout, with this checkout first on the path)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tools.launcher import REPO_ROOT, wait_for
from webapp.kafka.embedded import free_port

AUTH = ("admin", "cli-secret")


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout importable from any directory, development mode kept."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_") or k == "RAFTCONNECT_DEVELOPMENT"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class CliNode:
    """The node of these tests: ``url``, ``auth``, the properties file it was started with, its process."""

    url: str
    auth: tuple[str, str]
    properties: Path
    proc: subprocess.Popen
    log: Path


@pytest.fixture(scope="session")
def cli_node(tmp_path_factory):
    """A Raft-only node started as ``raftconnect node --config worker.properties --node-id cli-flag`` from an
    empty directory (no worker role: connectors stay UNASSIGNED, which is enough for the REST client).

    The file binds the REST API to 127.0.0.1 (``listeners``) and advertises it as ``localhost``, names the
    node ``cli-file`` (overridden by the flag) and holds an unknown key."""
    work = tmp_path_factory.mktemp("cli-node")
    rest, raft = free_port(), free_port()
    props = work / "worker.properties"
    props.write_text(
        "# written by tests/cli/conftest.py\n"
        "bootstrap.servers=127.0.0.1:9\n"
        f"listeners=http://127.0.0.1:{rest}\n"
        "rest.advertised.host.name=localhost\n"
        "raftconnect.node.id=cli-file\n"
        "raftconnect.roles=raft\n"
        f"raftconnect.raft.address=127.0.0.1:{raft}\n"
        f"raftconnect.data.dir={work / 'data'}\n"
        f"raftconnect.file.allowed.paths={tmp_path_factory.getbasetemp()}\n"  # the tests' input files
        "group.id=connect-cluster\n"
        "surely.unknown.key=1\n")
    log = work / "node.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "webapp.cli", "node", "--config", str(props),
                                 "--node-id", "cli-flag"], cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                env=cli_env(RAFTCONNECT_ADMIN_USER=AUTH[0], RAFTCONNECT_ADMIN_PASSWORD=AUTH[1]),
                                start_new_session=True)
    url = f"http://127.0.0.1:{rest}"

    def healthy():
        assert proc.poll() is None, f"node exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
        return requests.get(url + "/health", timeout=2).status_code == 200

    try:
        wait_for(healthy, 120, what="the CLI-started node to become healthy")
        yield CliNode(url=url, auth=AUTH, properties=props, proc=proc, log=log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(tmp_path):
    """``run_cli(*args, env=None, stdin=None)`` → :class:`CliResult` of ``python -m webapp.cli args`` run in
    an empty directory, with its contexts file in ``tmp_path``."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> CliResult:
        full_env = cli_env(RAFTCONNECT_CLI_CONFIG=str(tmp_path / "contexts.json"), **(env or {}))
        done = subprocess.run([sys.executable, "-m", "webapp.cli", *args], cwd=cwd, env=full_env, input=stdin,
                              capture_output=True, text=True, timeout=120)
        return CliResult(done.returncode, done.stdout, done.stderr)

    return run
