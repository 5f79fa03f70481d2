"""The ``raftconnect`` command line end to end: a node it started from a worker properties file, driven by
the client commands as subprocesses (output, ``-o json``, exit codes 0/1/2)."""
from __future__ import annotations

import json
import re

import pytest
import requests
from click.testing import CliRunner

from webapp.cli import cli
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration

SOURCE = "raftconnect.connectors.file.FileSourceConnector"

# every command and group that takes --help in-process (`node` is checked as a subprocess: it loads Django)
COMMANDS = [[], ["get"], ["get", "connectors"], ["get", "tasks"], ["get", "plugins"], ["get", "offsets"],
            ["describe"], ["describe", "connector"], ["apply"], ["pause"], ["resume"], ["stop"], ["restart"],
            ["delete"], ["offsets"], ["offsets", "get"], ["offsets", "alter"], ["offsets", "reset"], ["cluster"],
            ["config"], ["config", "set-context"], ["config", "use-context"], ["config", "get-contexts"],
            ["config", "current-context"], ["config", "delete-context"], ["store"], ["store", "list"],
            ["store", "switch"], ["store", "rollback"], ["store", "add"], ["store", "test"], ["store", "remove"], ["logs"], ["logs", "level"], ["backup"], ["backup", "export"],
            ["backup", "restore"], ["tokens"], ["tokens", "list"], ["tokens", "create"], ["tokens", "revoke"],
            ["users"], ["users", "list"], ["users", "create"], ["users", "set"], ["users", "delete"], ["kafka"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "raftconnect")
def test_help_of_every_command_exits_0(command):
    result = CliRunner().invoke(cli, [*command, "--help"], prog_name="raftconnect")
    assert result.exit_code == 0, result.output
    assert "Usage: raftconnect" in result.output


def test_help_as_a_script_and_node_help_lists_runnode_flags(run_cli):
    top = run_cli("--help")
    assert top.code == 0 and "apply" in top.out and "node" in top.out
    assert run_cli("--version").out.startswith("raftconnect, version ")
    node = run_cli("node", "--help")
    assert node.code == 0, node.err
    for flag in ("--node-id", "--roles", "--raft-address", "--bootstrap-servers", "--config", "--rest-listen"):
        assert flag in node.out


def test_usage_errors_exit_2(run_cli, tmp_path):
    assert run_cli("get", "bogus").code == 2
    assert run_cli("apply").code == 2
    missing = run_cli("apply", "-f", str(tmp_path / "nope.json"))
    assert missing.code == 2 and "nope.json" in missing.err
    bad = tmp_path / "bad.json"
    bad.write_text('{"config": {"connector.class": "x"}}')
    no_name = run_cli("apply", "-f", str(bad), env={"RAFTCONNECT_URL": "http://127.0.0.1:9"})
    assert no_name.code == 2 and "no connector name" in no_name.err
    assert run_cli("--context", "ghost", "get", "connectors").code == 2


def test_unreachable_node_exits_1(run_cli):
    result = run_cli("--url", "http://127.0.0.1:9", "--timeout", "5", "get", "connectors")
    assert result.code == 1 and "cannot reach http://127.0.0.1:9" in result.err


def test_node_started_from_properties_file_flags_win(cli_node, run_cli):
    """listeners (bind) and rest.advertised.host.name (what the cluster records) come from the file,
    the node id from the command line over the file's raftconnect.node.id."""
    port = cli_node.url.rsplit(":", 1)[1]
    result = run_cli("--url", cli_node.url, "--user", cli_node.auth[0], "--password", cli_node.auth[1],
                     "cluster", "-o", "json")
    assert result.code == 0, result.err
    (node,) = json.loads(result.out)["nodes"]
    assert node["id"] == "cli-flag" and node["rest_address"] == f"localhost:{port}"
    table = run_cli("--url", cli_node.url, "--user", cli_node.auth[0], "--password", cli_node.auth[1], "cluster")
    assert "cli-flag" in table.out and "raft" in table.out
    assert "surely.unknown.key: unknown worker setting" in cli_node.log.read_text()


@pytest.fixture
def context(cli_node, run_cli):
    """A current context pointing at the node (basic auth), so commands need no connection flags."""
    result = run_cli("config", "set-context", "local", "--url", cli_node.url, "--user", cli_node.auth[0],
                     "--password", cli_node.auth[1])
    assert result.code == 0, result.err
    return run_cli


def test_contexts_file_and_token_auth(context, cli_node, tmp_path):
    run_cli = context
    listed = json.loads(run_cli("config", "get-contexts", "-o", "json").out)
    assert listed == [{"name": "local", "current": True, "url": cli_node.url, "user": "admin", "auth": "basic"}]
    assert cli_node.auth[1] not in run_cli("config", "get-contexts").out
    assert run_cli("config", "current-context").out.strip() == "local"
    token = requests.post(cli_node.url + "/raftconnect/v1/tokens", json={"name": "cli"}, auth=cli_node.auth,
                          timeout=10).json()["token"]
    assert run_cli("config", "set-context", "tok", "--url", cli_node.url, "--token", token, "--use").code == 0
    assert run_cli("get", "plugins").code == 0
    assert run_cli("--token", "wrong", "get", "connectors").code == 1
    assert run_cli("config", "use-context", "local").code == 0
    assert run_cli("config", "delete-context", "tok").code == 0


def test_apply_get_describe_lifecycle_and_errors(context, tmp_path):
    run_cli = context
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,x\n")
    props = tmp_path / "cli-props.properties"
    props.write_text(f"# a standalone Connect connector file\nname=cli-props\nconnector.class={SOURCE}\n"
                     f"path={data}\nformat=csv\ntopic=cli-props\ntasks.max=1\n")
    as_json = tmp_path / "cli-json.json"
    as_json.write_text(json.dumps({"name": "cli-json", "config": {"connector.class": SOURCE, "path": str(data),
                                                                    "format": "csv", "topic": "cli-json",
                                                                    "tasks.max": 1}}))
    applied = run_cli("apply", "-f", str(props), "-f", str(as_json))
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == ["connector/cli-props created", "connector/cli-json created"]
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"name": "cli-json", "connector.class": SOURCE, "path": str(data), "format": "csv",
                                "topic": "cli-json-2", "tasks.max": "1"}))
    again = run_cli("apply", "-f", str(flat))
    assert again.code == 0 and again.out.strip() == "connector/cli-json configured"

    listed = run_cli("get", "connectors", "-o", "json")
    assert listed.code == 0, listed.err
    connectors = json.loads(listed.out)
    assert connectors["cli-json"]["info"]["config"]["topic"] == "cli-json-2"
    assert connectors["cli-props"]["info"]["config"]["connector.class"] == SOURCE
    table = run_cli("get", "connectors").out
    assert table.splitlines()[0].split() == ["NAME", "TYPE", "STATE", "TASKS", "CLASS"]
    assert any(line.startswith("cli-props") and "source" in line for line in table.splitlines())

    described = run_cli("describe", "connector", "cli-props")
    assert described.code == 0 and f"Class:   {SOURCE}" in described.out and "topic = cli-props" in described.out
    detail = json.loads(run_cli("describe", "connector", "cli-props", "-o", "json").out)
    assert detail["name"] == "cli-props" and detail["type"] == "source" and detail["config"]["format"] == "csv"

    assert run_cli("pause", "cli-props").out.strip() == "connector/cli-props paused"
    assert run_cli("resume", "cli-props").out.strip() == "connector/cli-props resumed"
    assert run_cli("get", "tasks", "cli-props", "-o", "json").code == 0
    # no worker runs here, so the connector has no status yet: Connect's 404 for a restart plan
    restarted = run_cli("restart", "cli-props", "--include-tasks", "--only-failed")
    assert restarted.code == 1 and "Status for connector cli-props not found" in restarted.err
    assert run_cli("restart", "cli-props", "--task", "0", "--include-tasks").code == 2
    assert run_cli("stop", "cli-json").code == 0
    offsets = run_cli("offsets", "get", "cli-json", "-o", "json")
    assert offsets.code == 0 and json.loads(offsets.out) == {"offsets": []}
    assert run_cli("offsets", "reset", "cli-json").code == 0
    bad_offsets = tmp_path / "offsets.json"
    bad_offsets.write_text('{"offsets": "all of them"}')
    refused = run_cli("offsets", "alter", "cli-json", "-f", str(bad_offsets))
    assert refused.code == 1 and "error_code 400" in refused.err

    missing = run_cli("describe", "connector", "cli-nope")
    assert missing.code == 1
    assert "Connector cli-nope not found" in missing.err and "404" in missing.err
    as_json_error = run_cli("get", "offsets", "cli-nope", "-o", "json")
    assert as_json_error.code == 1
    assert json.loads(as_json_error.err)["error_code"] == 404

    assert run_cli("delete", "cli-props", "cli-json").code == 0
    assert run_cli("describe", "connector", "cli-props").code == 1


def test_store_and_log_levels(context):
    run_cli = context
    stores = run_cli("store", "list", "-o", "json")
    assert stores.code == 0, stores.err
    assert json.loads(stores.out)["active"] == "raft"
    assert run_cli("store", "list").out.split()[:2] == ["STORE", "BACKEND"]
    unknown = run_cli("store", "switch", "nowhere")
    assert unknown.code == 1 and "error_code 404" in unknown.err
    port = free_port()  # nothing listens there: the store is added, and its test says why it fails
    added = run_cli("store", "add", "down", "--url", f"postgresql://postgres@127.0.0.1:{port}/x",
                    "--password", "${env:RC_CLI_PG_PASSWORD}")
    assert added.code == 0, added.err
    assert re.search(r"^\s*down\s+postgresql\s+cluster\s+postgresql://", added.out, re.M), added.out
    failed = run_cli("store", "test", "down")
    assert failed.code == 1 and re.search(r"^resolve\s+no\s", failed.out, re.M), failed.out  # the variable is unset
    assert run_cli("store", "remove", "down").out.strip() == "store down removed"
    gone = run_cli("store", "remove", "down")
    assert gone.code == 1 and "error_code 404" in gone.err
    assert run_cli("logs", "level", "raftconnect.cli.test", "debug").out.strip() == \
        "raftconnect.cli.test set to DEBUG (worker)"
    assert run_cli("logs", "level", "raftconnect.cli.test").out.strip() == "raftconnect.cli.test DEBUG"
    listed = json.loads(run_cli("logs", "level", "-o", "json").out)
    assert listed["raftconnect.cli.test"]["level"] == "DEBUG"


def test_backup_export_writes_a_private_checked_file_and_restore_refuses_names_that_exist(context, tmp_path):
    run_cli = context
    out = tmp_path / "backup.json"
    result = run_cli("backup", "export", "-o", str(out), "--no-users")
    assert result.code == 0, result.err
    assert "written to" in result.err and oct(out.stat().st_mode & 0o777) == "0o600"
    document = json.loads(out.read_text())
    assert document["format"] == "raftconnect-backup" and document["users"] == []
    if document["connectors"]:  # the session's node holds connectors of earlier tests: all of them exist
        again = run_cli("backup", "restore", str(out))
        assert again.code == 1 and "error_code 409" in again.err
    empty = {**document, "connectors": []}
    from webapp.storage.backup import digest

    empty["sha256"] = digest(empty)
    (tmp_path / "empty.json").write_text(json.dumps(empty))
    restored = run_cli("backup", "restore", str(tmp_path / "empty.json"), "-o", "json")
    assert restored.code == 0, restored.err
    assert json.loads(restored.out)["connectors"] == 0
    (tmp_path / "bad.json").write_text("{not json")
    assert run_cli("backup", "restore", str(tmp_path / "bad.json")).code == 1


def test_users_and_tokens_commands(context, cli_node, run_cli):
    run_cli_ = context
    created = run_cli_("users", "create", "cli-user", "--role", "viewer", "-o", "json",
                       env={"RAFTCONNECT_NEW_USER_PASSWORD": "cli-pw"})
    assert created.code == 0, created.err
    assert json.loads(created.out)[0]["role"] == "viewer" and "cli-pw" not in created.out
    assert run_cli_("users", "create", "cli-user", "--role", "viewer",
                    env={"RAFTCONNECT_NEW_USER_PASSWORD": "cli-pw"}).code == 1  # exists
    assert run_cli_("users", "set", "cli-user").code == 2  # nothing to change
    assert "operator" in run_cli_("users", "set", "cli-user", "--role", "operator").out
    listed = run_cli_("users", "list").out
    assert "cli-user" in listed and "operator" in listed
    as_user = ("--url", cli_node.url, "--user", "cli-user", "--password", "cli-pw")
    key = run_cli(*as_user, "tokens", "create", "ci", "--expires-in", "3600").out.strip()
    assert key.startswith("rct_")
    assert run_cli(*as_user, "tokens", "create", "ci").code == 1  # never replaced
    assert run_cli("--url", cli_node.url, "--token", key, "get", "connectors").code == 0
    tokens = json.loads(run_cli(*as_user, "tokens", "list", "-o", "json").out)
    assert [t["name"] for t in tokens] == ["ci"] and key not in str(tokens)
    assert run_cli(*as_user, "tokens", "revoke", "ci").code == 0
    assert run_cli("--url", cli_node.url, "--token", key, "get", "connectors").code == 1
    assert run_cli_("users", "delete", "cli-user").code == 0
    assert run_cli(*as_user, "get", "connectors").code == 1


def test_cluster_table_says_how_long_a_departed_workers_tasks_are_held(monkeypatch):
    from webapp.cli import app

    class Answer:
        def get(self, path):
            assert path == "/raftconnect/v1/cluster"
            node = {"roles": ["worker"], "rest_address": "h:8083", "raft_address": None, "raft": None, "tasks": ["a-0"]}
            return {"leader": "r1:7001", "generation": 9, "metadata_store": "raft", "nodes": [
                {**node, "id": "w1", "alive": True, "reassign_in_s": None},
                {**node, "id": "w2", "alive": False, "reassign_in_s": 41.2},
                {**node, "id": "w3", "alive": False, "reassign_in_s": None}]}

    monkeypatch.setattr(app, "_client", lambda ctx: Answer())
    out = CliRunner().invoke(app.cli, ["cluster"], prog_name="raftconnect").output
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert " yes " in rows["w1"] and "no (tasks held 42s)" in rows["w2"] and "held" not in rows["w3"]
