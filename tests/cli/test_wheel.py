"""The wheel (issue 18 item 3): built from this checkout, it carries the templates and the built console,
refuses to build without the console, and, installed alone into a directory, runs a node from an empty
working directory (no checkout, no ``manage.py``) that serves ``/health`` and ``/console/``.

The wheel is built from a copy of the packaged sources (never in the checkout: setuptools' ``build/``
would keep files of earlier builds) with ``pip wheel --no-build-isolation``, i.e. with the test
environment's setuptools (``requirements-test.txt`` pins one with ``bdist_wheel``), so no package index is
needed. The installed copy is put first on ``PYTHONPATH``; the test checks that the node imports it and
not the checkout's editable install.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
import requests

from tools.launcher import REPO_ROOT, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration

CONSOLE_DIST = REPO_ROOT / "webapp" / "console" / "dist"
#: what `pip wheel .` reads: the packages, the project files and the build backend
SOURCES = ("webapp", "raftnode", "pyproject.toml", "README.md", "MANIFEST.in", "tools/wheel_backend.py")


def _copy_sources(dest: Path, with_console: bool = True) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
        if not with_console and Path(folder).resolve() == (REPO_ROOT / "webapp" / "console").resolve():
            skipped.add("dist")
        return skipped

    for name in SOURCES:
        src, dst = REPO_ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            shutil.copy2(src, dst)
    return dest


def _pip_wheel(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not (CONSOLE_DIST / "index.html").exists():
        pytest.fail("the console is not built: run make frontend")
    if tuple(int(p) for p in version("setuptools").split(".")[:2]) < (70, 1):
        pytest.fail(f"setuptools {version('setuptools')} cannot build a wheel without the `wheel` package: "
                    "run make setup (requirements-test.txt pins setuptools)")
    tmp = tmp_path_factory.mktemp("wheel")
    built = _pip_wheel(_copy_sources(tmp / "src"), tmp / "out")
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = (tmp / "out").glob("raftconnect-*.whl")
    return path


def test_the_wheel_carries_the_console_and_the_templates(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    built = {p.relative_to(REPO_ROOT).as_posix() for p in CONSOLE_DIST.rglob("*") if p.is_file()}
    assert "webapp/console/dist/index.html" in built and built <= names
    assert any(n.startswith("webapp/console/dist/assets/") and n.endswith(".js") for n in names)
    templates = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "webapp").rglob("templates/**/*.html")}
    assert templates and templates <= names
    assert not any(n.startswith(("tests/", "tools/", "frontend/")) or n == "manage.py" for n in names)


def test_a_wheel_is_not_built_without_the_console(tmp_path):
    built = _pip_wheel(_copy_sources(tmp_path / "src", with_console=False), tmp_path / "out")
    assert built.returncode != 0
    assert "webapp/console/dist/index.html is missing" in built.stdout + built.stderr
    assert "make frontend" in built.stdout + built.stderr
    assert not list(tmp_path.glob("out/*.whl"))


def test_the_installed_wheel_runs_a_node_from_an_empty_directory(wheel, tmp_path):
    target, cwd = tmp_path / "site", tmp_path / "empty"
    cwd.mkdir()
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                                "--disable-pip-version-check", "--target", str(target), str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    script = target / "bin" / "raftconnect"
    assert script.exists()
    # only the installed package: no settings module chosen for it (the console script picks its own), no
    # data dir, and the wheel's copy first on the path (the checkout's editable install comes after it)
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "RAFTCONNECT_DATA_DIR") and not k.startswith("RAFTCONNECT_STORE_")}
    env.update({"PYTHONPATH": str(target), "PYTHONUNBUFFERED": "1", "RAFTCONNECT_DEVELOPMENT": "1"})
    where = subprocess.run([sys.executable, "-c", "import webapp, raftnode; print(webapp.__file__); "
                            "print(raftnode.__file__)"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert all(Path(f).resolve().is_relative_to(target.resolve()) for f in where.stdout.split()), where.stdout

    rest, raft = free_port(), free_port()
    url = f"http://127.0.0.1:{rest}"
    log_path = tmp_path / "node.log"
    with open(log_path, "wb") as log:
        # the default roles (raft,worker): the worker's agent is a Celery process, which must find the wheel too
        proc = subprocess.Popen([str(script), "node", "--node-id", "n1",
                                 "--rest-address", f"127.0.0.1:{rest}", "--raft-address", f"127.0.0.1:{raft}",
                                 "--bootstrap-servers", f"127.0.0.1:{free_port()}"],
                                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log_tail() -> str:
        return log_path.read_bytes()[-4000:].decode(errors="replace")

    def ready() -> bool:  # 200 (degraded: no Kafka there), Raft leader, and its agent heartbeating
        assert proc.poll() is None, f"the node exited with {proc.returncode}:\n{log_tail()}"
        health = requests.get(url + "/health", timeout=2)
        checks = health.json()["checks"]
        return health.status_code == 200 and checks["raft"]["role"] == "LEADER" and checks["agent"]["state"] == "ok"

    try:
        try:
            wait_for(ready, 60, what="the installed node's /health with its agent ok")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{log_tail()}") from None
        page = requests.get(url + "/console/", timeout=10)
        assert page.status_code == 200, page.text[:500]
        assert page.text == (CONSOLE_DIST / "index.html").read_text()
        asset = next(p for p in (CONSOLE_DIST / "assets").iterdir() if p.suffix == ".js")
        assert requests.get(f"{url}/console/assets/{asset.name}", timeout=10).status_code == 200
        # the node's state is in the working directory (var/<node-id>), none of it next to the package
        assert (cwd / "var" / "n1" / "node.sqlite3").is_file()
        assert not (target / "var").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its group still alive
        except ProcessLookupError:
            pass
