"""Where file connectors and file config providers may read and write: ``raftconnect.file.allowed.paths``.

Owns the worker setting ``raftconnect.file.allowed.paths`` (environment
``RAFTCONNECT_FILE_ALLOWED_PATHS``, or ``runnode --file-allowed-paths``): the
one place that parses it, and the one check every file path of a file
connector (and, unless they have their own list, of the ``file`` /
``directory`` config providers) goes through. It plays the part of Kafka's
``allowed.paths`` of its FileConfigProvider, for the connectors too.

Rules, applied to a path after :func:`os.path.realpath` (symbolic links and
``..`` resolved, relative paths taken from the process's working directory):

* it must be one of the allowed roots or under one;
* it must never be in the node's data directory (``RAFTCONNECT_DATA_DIR``:
  Raft journal, node database, ``cluster.secret``), except under the data
  directory's ``files/`` when that is an allowed root.

Allowed roots: the comma-separated directories of the setting; when it is not
set (or empty), the node's ``<data dir>/files/`` alone (``runnode`` creates it),
so a fresh node lets connectors touch nothing else. A process that is not a
node (no data directory) and has no setting allows nothing.

The setting is per node, like Kafka's worker configs: the node that answers a
REST write checks it when a connector is created or validated, the worker
running a connector or task checks it again each time it opens a path. Give
every node the same value.

A runtime helper declared for connectors (``pyproject.toml``, contract
``connectors-use-declared-helpers``): the file connectors, the config providers
(``webapp.runtime.config_providers``) and the node (its default root) use it.
Must not import Django (connectors are imported where Django is not set up) or
anything of ``webapp`` but the plugin API.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Mapping

from webapp.plugin import ConnectException

__all__ = ["SETTING", "ENV", "DATA_DIR_ENV", "FILES_DIR", "PathNotAllowed", "FileAccessPolicy", "policy", "realpath",
           "default_root", "check", "violation", "normalize"]

#: the worker setting's name, as messages and docs spell it
SETTING = "raftconnect.file.allowed.paths"
#: the environment variable that carries it (``runnode --file-allowed-paths`` sets it)
ENV = "RAFTCONNECT_FILE_ALLOWED_PATHS"
#: the node's data directory, set by ``runnode`` for the node and its agent
DATA_DIR_ENV = "RAFTCONNECT_DATA_DIR"
#: the directory under the data directory that is the default allowed root
FILES_DIR = "files"


class PathNotAllowed(ConnectException):
    """A file path is outside the allowed roots or inside the node's data directory; the message names
    :data:`SETTING`."""


#: the kernel names what an open descriptor refers to (Linux): :func:`realpath` asks it
_PROC_FD = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


def realpath(path: str) -> str:
    """``os.path.realpath(path)``: the absolute path with every symbolic link and ``..`` resolved.

    For a path that exists, on Linux, the kernel resolves it: the path is opened with ``O_PATH``
    (no read permission needed, nothing read) and ``/proc/self/fd/N`` names the place. That is 3
    system calls, where ``posixpath.realpath`` walks each component in Python with an ``lstat``
    apiece; it was most of a file connector's validation (a REST config write's path check,
    issue 16). Any other case (no such path, no ``/proc``, a name the kernel marks as unusable)
    goes to ``os.path.realpath``, which also resolves what does not exist yet. Errors: as
    ``os.path.realpath`` (``ValueError`` for a NUL byte, ``TypeError`` for a non-path).
    """
    if _PROC_FD and isinstance(path, str):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except (OSError, ValueError):
            return os.path.realpath(path)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = ""
        finally:
            os.close(fd)
        if real.startswith(os.sep) and not real.endswith(" (deleted)"):
            return real
    return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def normalize(value: str | None) -> str:
    """``value`` (comma-separated directories) with each entry made absolute against the working directory.

    Used by ``runnode`` before it hands the setting to its agent, so both read the
    same directories whatever their working directory. Empty or ``None`` gives ``""``
    (the default applies).
    """
    return ",".join(os.path.abspath(p) for p in _split(value))


def default_root(data_dir: str) -> str:
    """The default allowed root of a node whose data directory is ``data_dir``: ``<data_dir>/files`` (absolute)."""
    return os.path.join(os.path.abspath(data_dir), FILES_DIR)


@dataclass(frozen=True)
class FileAccessPolicy:
    """Allowed roots and the protected data directory, all as real absolute paths.

    Attributes:
        roots: the allowed directories (real paths); empty means nothing is allowed.
        data_dir: the node's data directory (real path), or ``None`` outside a node.
        label: how messages name the list the roots came from, e.g.
            ``raftconnect.file.allowed.paths (RAFTCONNECT_FILE_ALLOWED_PATHS)``.
        default: True when the roots are the default (no setting given).
    """

    roots: tuple[str, ...]
    data_dir: str | None
    label: str = f"{SETTING} ({ENV})"
    default: bool = False

    def violation(self, path: str) -> str | None:
        """Why ``path`` may not be used, or ``None`` when it may.

        ``path``: as the user wrote it (file or directory; it need not exist).
        The message names the setting and the path as written, never what a
        symbolic link points at.
        """
        return self._judge(path)[1]

    def _judge(self, path: str) -> tuple[str | None, str | None]:
        """``(real path, None)`` when ``path`` may be used, else ``(real path or None, why not)``: the path
        is resolved once for both the check and the caller (:meth:`check`)."""
        try:
            real = realpath(path)
        except (ValueError, TypeError, OSError):  # NUL bytes, not a string
            return None, f"Path {path!r} is not a valid path ({self.label})"
        moved = real != os.path.abspath(path) or os.pardir in str(path).split(os.sep)  # abspath folds '..'
        how = "resolves (through a symbolic link or '..') to a place" if moved else "is"
        if self.data_dir is not None and _under(real, self.data_dir) \
                and not _under(real, os.path.join(self.data_dir, FILES_DIR)):
            return real, (f"Path {path} {how} in the node's data directory (Raft journal, node database, cluster "
                          f"secret), which {SETTING} never allows; only its {FILES_DIR}/ directory may be allowed")
        if not any(_under(real, root) for root in self.roots):
            allowed = ", ".join(self.roots) if self.roots else "nothing (this process has no data directory)"
            if self.default and self.roots:
                allowed += " (the default: the node's data directory's files/)"
            return real, f"Path {path} {how} not under {self.label}; allowed: {allowed}"
        return real, None

    def check(self, path: str) -> str:
        """The real path of ``path``; raises :class:`PathNotAllowed` (a ConnectException) when not allowed."""
        real, problem = self._judge(path)
        if problem is not None:
            raise PathNotAllowed(problem)
        return real


#: seconds a policy's resolved directories are reused for the same settings (:func:`policy`)
POLICY_TTL_S = 2.0
_policies: dict[tuple, tuple[float, FileAccessPolicy]] = {}


def policy(environ: Mapping[str, str] | None = None, *, data_dir: str | None = None,
           roots: list[str] | None = None, label: str | None = None) -> FileAccessPolicy:
    """The policy in force, read from the environment at each call.

    The directories it names are resolved (``realpath``) at most once per :data:`POLICY_TTL_S`
    for the same settings: two of the three ``realpath`` calls of a file connector's validation,
    ~7 % of a REST config write's CPU on the leader (benchmarks/cluster). A changed setting
    applies at once; a root that is a symbolic link pointed elsewhere, within that time.

    Args:
        environ: where the setting and data directory are read (default :data:`os.environ`).
        data_dir: the node's data directory (default ``RAFTCONNECT_DATA_DIR``; none outside a node).
        roots: use these directories instead of the setting (the config providers' own list).
        label: how messages name that list (with ``roots``).

    Returns:
        a :class:`FileAccessPolicy`; roots that do not exist yet are kept (they may be created later).
    """
    env = os.environ if environ is None else environ
    data = data_dir if data_dir is not None else (env.get(DATA_DIR_ENV) or None)
    setting = None if roots is not None else env.get(ENV)
    named = [*(roots if roots is not None else _split(setting)), *([data] if data else [])]
    # relative directories resolve against the working directory, so it is part of the key then; a node's
    # are absolute (runnode makes them so), which spares a system call on every check
    cwd = os.getcwd() if any(not os.path.isabs(p) for p in named) else None
    key = (data, None if roots is None else tuple(roots), label, setting, cwd)
    now = time.monotonic()
    hit = _policies.get(key)
    if hit is not None and now - hit[0] < POLICY_TTL_S:
        return hit[1]
    if len(_policies) >= 64:  # distinct settings are few; a process that makes many starts over
        _policies.clear()
    made = _resolved_policy(data, roots, label, env)
    _policies[key] = (now, made)
    return made


def _resolved_policy(data: str | None, roots: list[str] | None, label: str | None,
                     env: Mapping[str, str]) -> FileAccessPolicy:
    real_data = os.path.realpath(data) if data else None
    if roots is not None:
        return FileAccessPolicy(tuple(os.path.realpath(r) for r in roots), real_data, label or SETTING)
    configured = _split(env.get(ENV))
    if configured:
        return FileAccessPolicy(tuple(os.path.realpath(r) for r in configured), real_data)
    default = (os.path.realpath(default_root(data)),) if data else ()
    return FileAccessPolicy(default, real_data, default=True)


def violation(path: str) -> str | None:
    """:meth:`FileAccessPolicy.violation` under the policy in force (:func:`policy`)."""
    return policy().violation(path)


def check(path: str) -> str:
    """:meth:`FileAccessPolicy.check` under the policy in force: the real path, or :class:`PathNotAllowed`."""
    return policy().check(path)
