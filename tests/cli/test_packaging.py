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
    for name in ("django", "djangorestframework", "celery", "pysyncobj", "confluent-kafka", "pyspark", "granian", "waitress",
                 "whitenoise", "requests", "click", "cryptography", "pyarrow", "polars"):
        assert name in declared, name


def _name(requirement: str) -> str:
    for sep in ("[", "~", "=", ">", "<", ";"):
        requirement = requirement.split(sep)[0]
    return requirement.strip().lower().replace("_", "-")


def test_extras_split_optional_drivers_from_the_core():
    """Db2's 130 MB driver and Redis are extras; a plain ``pip install raftconnect`` brings neither."""
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    assert {"db2", "redis", "test", "dev"} <= set(extras)
    core = {_name(d) for d in project["dependencies"]}
    assert {"ibm-db", "ibm-db-django", "redis"}.isdisjoint(core)
    assert {_name(d) for d in extras["db2"]} >= {"ibm-db", "ibm-db-django"}
    assert {_name(d) for d in extras["redis"]} == {"redis"}
    assert "raftconnect[test,db2,redis]" in extras["dev"]


def test_every_pinned_runtime_requirement_is_declared_by_the_project():
    """requirements.txt (what the Docker image installs) names nothing that ``pip install 'raftconnect[redis]'``
    would not bring: the two lists cannot drift apart silently."""
    project = _pyproject()["project"]
    declared = {_name(d) for d in project["dependencies"] + project["optional-dependencies"]["redis"]}
    pinned = {_name(line) for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith(("#", "-"))}
    assert pinned <= declared, sorted(pinned - declared)
