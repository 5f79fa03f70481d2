"""The plumbing every ``raftconnect`` client command shares, and the root command group.

Owns the root group :data:`cli` (its global options: context, URL, credentials,
timeout), turning API, connection and contexts errors into exit codes 1 and 2
(``_RootGroup``), the ``-o/--output`` option, the REST client of a command
(``_client``), sending one request and printing its answer (``_call``), tables and
JSON output, ``_plain`` (a command that sends one request without arguments) and
``_named_delete`` (the ``group verb NAME`` → ``DELETE`` commands).

Must not touch: Django or anything but the public REST API (through
:class:`~webapp.cli.client.ConnectRestClient`); the commands themselves
(:mod:`.app`, :mod:`.admin`).
"""
import json
from typing import Any, Callable, Iterable, Sequence

import click

from .client import ApiError, ConnectionFailed, ConnectRestClient, segment
from .connectorfiles import ConnectorFileError
from .contexts import ContextError, ContextStore, default_config_path, resolve_connection

__all__ = ["cli", "output_option"]


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


def _plain(group: click.Group, verb: str, method: str, path: str, help_text: str,
           show: Callable[[Any], None]) -> click.Command:
    """``group verb [-o json]``: ``method path`` without arguments or body, the answer printed through
    ``show`` (or as JSON); the command's help is ``help_text`` followed by the request."""
    @output_option
    @click.pass_context
    def command(ctx: click.Context, output: str) -> None:
        _call(ctx, method, path, output=output, show=show)

    command.__doc__ = f"{help_text} ({method} {path})."
    return group.command(verb)(command)


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
