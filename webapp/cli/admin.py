"""The cluster administration commands of ``raftconnect``: ``store``, ``users``, ``tokens``, ``backup``, ``logs``.

Owns these command groups, their options and output: the metadata store (list,
switch, rollback, stores added at run time), REST users and API tokens, the
backup's export and restore, and log levels. Each is a thin shell over one
endpoint under ``/raftconnect/v1/`` or ``/admin/loggers`` (:func:`~webapp.cli.base._call`).

Must not touch: Django or anything but the public REST API; the connector commands
(:mod:`.app`).
"""
import json
import os
import sys
from typing import Any

import click

from .base import _call, _client, _echo_json, _named_delete, _plain, _table, cli, output_option
from .client import segment

__all__ = ["store", "users", "tokens", "backup", "logs"]

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


store_list = _plain(store, "list", "GET", "/raftconnect/v1/metadata-store",
                    "Configured stores (* = active) and any switch in progress", _print_store)


@store.command("switch")
@click.argument("target")
@output_option
@click.pass_context
def store_switch(ctx: click.Context, target: str, output: str) -> None:
    """Start switching the cluster to store TARGET (POST /raftconnect/v1/metadata-store/switch)."""
    _call(ctx, "POST", "/raftconnect/v1/metadata-store/switch", json={"target": target}, output=output,
          show=_print_store)


store_rollback = _plain(store, "rollback", "POST", "/raftconnect/v1/metadata-store/rollback",
                        "Abort the running switch, or switch back", _print_store)


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


tokens_list = _plain(tokens, "list", "GET", "/raftconnect/v1/tokens", "Your tokens, never their keys",
                     lambda data: _table(("NAME", "CREATED", "EXPIRES", "EXPIRED"),
                                         [(t["name"], _when(t["created"]), _when(t["expires"]),
                                           "yes" if t["expired"] else "") for t in data]))


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


users_list = _plain(users, "list", "GET", "/raftconnect/v1/users", "Every user", _print_users)


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
