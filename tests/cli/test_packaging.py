"""The console script contract: pyproject declares ``raftconnect`` and its entry point resolves."""
from __future__ import annotations

import tomllib
from importlib import import_module

from tools.launcher import REPO_ROOT


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_pyproject_declares_the_raftconnect_script_and_it_resolves():
    target = _pyproject()["project"]["scripts"]["raftconnect"]
    module, _, attr = target.partition(":")
    main = getattr(import_module(module), attr)
    assert callable(main)


def test_runtime_dependencies_are_declared():
    """``pip install .`` must pull what a node and the CLI import (the runtime part of requirements.txt)."""
    declared = {d.split("[")[0].split("~")[0].split("=")[0].split(">")[0].strip().lower()
                for d in _pyproject()["project"]["dependencies"]}
    for name in ("django", "djangorestframework", "celery", "pysyncobj", "confluent-kafka", "pyspark", "waitress",
                 "whitenoise", "requests", "click", "cryptography", "pyarrow", "polars"):
        assert name in declared, name
