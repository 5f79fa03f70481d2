"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The compose file must validate against the Compose Specification's JSON schema
(the copy check-jsonschema ships as ``vendor.compose-spec``), be wired as a
cluster (healthchecks, depends_on on healthy services, named volumes), and every
node's command must parse with ``runnode``'s own argument parser and agree with
the others (Raft peers, ``--cluster``, data dirs on volumes). Every
``RAFTCONNECT_*`` variable set must be one the code reads, and every metadata
store URL must map to a backend the store registry accepts.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ENV = {"RAFTCONNECT_CLUSTER_SECRET": "s3cret-for-tests", "RAFTCONNECT_ADMIN_PASSWORD": "adm1n-for-tests"}
NODE_SERVICES = ("raft1", "raft2", "raft3", "worker1")

_VAR = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\})")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation (``${V}``, ``${V:-default}``, ``${V-default}``, ``${V:?err}``, ``$$``)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        val = env.get(name)
        if op in (":-", "-"):
            return arg if (val is None or (op == ":-" and val == "")) else val
        if op in (":?", "?"):
            if val is None or (op == ":?" and val == ""):
                raise KeyError(f"required variable {name}: {arg}")
            return val
        return val or ""

    return _VAR.sub(sub, value)


def load(env: dict[str, str] = ENV) -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load()


def node_args(service: dict[str, Any]):
    """Parse a node's command with the runnode management command's real parser."""
    from webapp.connect.management.commands.runnode import Command

    argv = shlex.split(service["command"]) if isinstance(service["command"], str) else list(service["command"])
    assert argv[:3] == ["python", "manage.py", "runnode"], argv
    return Command().create_parser("manage.py", "runnode").parse_args(argv[3:])


def test_compose_file_matches_the_compose_specification(compose):
    schema = json.loads(resources.files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("compose-spec.json").read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_required_secrets_must_be_given():
    with pytest.raises(KeyError, match="RAFTCONNECT_CLUSTER_SECRET"):
        load({"RAFTCONNECT_ADMIN_PASSWORD": "x"})


def test_every_service_has_an_image_and_a_healthcheck_and_waits_for_healthy_dependencies(compose):
    services = compose["services"]
    expected = set(NODE_SERVICES) | {"kafka", "postgres", "mariadb", "redis", "spark-master", "spark-worker"}
    assert expected <= set(services)
    for name, svc in services.items():
        assert svc.get("image") or svc.get("build"), name
        test = svc.get("healthcheck", {}).get("test")
        assert test and not svc["healthcheck"].get("disable"), f"{name} has no healthcheck"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert cond == {"condition": "service_healthy"}, f"{name} -> {dep}: {cond}"
            assert services[dep].get("healthcheck"), f"{name} waits for {dep}, which has no healthcheck"
    for name in NODE_SERVICES:
        assert "/health" in " ".join(services[name]["healthcheck"]["test"]), name
        assert set(services[name]["depends_on"]) >= {"kafka", "postgres", "mariadb", "redis", "spark-master"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"


def test_named_volumes_are_declared_and_each_node_keeps_its_own_data_dir(compose):
    declared = set(compose["volumes"])
    seen_data: dict[str, str] = {}
    for name, svc in compose["services"].items():
        for spec in svc.get("volumes", []):
            source, target = spec.split(":")[:2]
            assert source in declared, f"{name}: volume {source} is not a named volume"
            if name in NODE_SERVICES and target == node_args(svc).data_dir:
                assert source not in seen_data.values(), f"{name} shares its data dir volume {source}"
                seen_data[name] = source
    assert set(seen_data) == set(NODE_SERVICES), f"nodes without a data dir volume: {set(NODE_SERVICES) - set(seen_data)}"


def test_node_commands_parse_with_runnode_and_form_one_cluster(compose):
    services = compose["services"]
    args = {name: node_args(services[name]) for name in NODE_SERVICES}
    raft = {n: a for n, a in args.items() if "raft" in a.roles}
    workers = {n: a for n, a in args.items() if a.roles == ("worker",)}
    assert sorted(raft) == ["raft1", "raft2", "raft3"] and all(a.roles == ("raft", "worker") for a in raft.values())
    assert sorted(workers) == ["worker1"]
    assert len({a.node_id for a in args.values()}) == len(args)
    for name, a in args.items():
        assert a.node_id == name and services[name]["hostname"] == name
        assert a.rest_address == f"{name}:8083"
    for name, a in raft.items():
        others = {o.raft_address for n, o in raft.items() if n != name}
        assert set(a.raft_peers.split(",")) == others, name
    rest_of_raft = {a.rest_address for a in raft.values()}
    for a in workers.values():
        assert set(a.cluster.split(",")) == rest_of_raft
        assert set(services[a.node_id]["depends_on"]) >= set(raft)


def _variables_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for folder in ("webapp", "raftnode"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(re.findall(r"RAFTCONNECT_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    names.update(re.findall(r"RAFTCONNECT_[A-Z0-9_]*[A-Z0-9]", (ROOT / "manage.py").read_text()))
    return names


def test_node_environment_uses_only_variables_the_code_reads(compose):
    known = _variables_read_by_the_code()
    assert "RAFTCONNECT_SPARK_MASTER" in known and "RAFTCONNECT_LOG_FORMAT" in known
    for name in NODE_SERVICES:
        env = compose["services"][name]["environment"]
        for key in env:
            if key.startswith("RAFTCONNECT_STORE_"):
                continue
            assert not key.startswith("RAFTCONNECT_") or key in known, f"{name}: {key} is read by nothing"
        assert env["RAFTCONNECT_CLUSTER_SECRET"] == ENV["RAFTCONNECT_CLUSTER_SECRET"]
        assert env["RAFTCONNECT_CELERY_BROKER"].startswith("redis://redis:")
        assert env["RAFTCONNECT_SPARK_MASTER"] == "spark://spark-master:7077"
        assert env["SPARK_LOCAL_HOSTNAME"] == name  # Spark executors reach the driver at the node's name
        assert env["RAFTCONNECT_BOOTSTRAP_SERVERS"] == "kafka:9092"


def test_runnode_reads_the_node_environment_as_the_container_gets_it(compose, monkeypatch):
    """Flags not on the command line come from the service's environment, through runnode's own defaults."""
    for name in NODE_SERVICES:
        with monkeypatch.context() as m:
            for key in [k for k in os.environ if k.startswith("RAFTCONNECT_")]:
                m.delenv(key)
            for key, val in compose["services"][name]["environment"].items():
                m.setenv(key, str(val))
            a = node_args(compose["services"][name])
        assert a.spark_master == "spark://spark-master:7077"
        assert a.bootstrap_servers == "kafka:9092"
        assert a.metadata_store == "raft"
        assert a.node_id == name and a.data_dir == "/var/lib/raftconnect"
        # file connectors use the volume shared with Spark's executors, not each node's data dir
        assert a.file_allowed_paths == "/data"
        assert "connect-data:/data" in compose["services"][name]["volumes"]


def test_metadata_store_urls_map_to_backends_the_registry_accepts(compose):
    from webapp.storage.registry import create_store, store_urls_from_env

    env = compose["services"]["raft1"]["environment"]
    urls = store_urls_from_env({k: str(v) for k, v in env.items()})
    assert {"pg", "maria", "cache"} <= set(urls)
    assert env["RAFTCONNECT_METADATA_STORE"] in {"raft", *urls}
    for name, url in urls.items():
        host = url.split("@")[-1].split("://")[-1].split(":")[0].split("/")[0]
        assert host in compose["services"], f"store {name} points at {host}, not a service"
        store = create_store(name, url, None)  # builds the backend; connects only on use
        try:
            assert store.name == name
        finally:
            getattr(store, "close", lambda: None)()


def test_spark_runs_from_the_node_image_with_per_node_core_caps(compose):
    services = compose["services"]
    for name in ("spark-master", "spark-worker"):
        assert services[name]["build"] == "." and services[name]["image"] == services["raft1"]["image"]
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]
    conf = dict(line.split(None, 1) for line in (ROOT / "deploy/spark/spark-defaults.conf").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert int(conf["spark.cores.max"]) * len(NODE_SERVICES) <= int(
        services["spark-worker"]["environment"]["SPARK_WORKER_CORES"])


def test_dockerfile_builds_the_node_image():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"openjdk-\d+-jre", text), "Spark needs a Java runtime"
    assert "pip install -r requirements.txt" in text
    assert "SPARK_CONF_DIR=/app/deploy/spark" in text
    assert "manage.py" in text and "runnode" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and "var" in ignored
