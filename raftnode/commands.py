"""The typed facade over the replicated cluster state: one method per replicated command.

Owns the names and argument order of the commands :class:`~raftnode.state.ClusterStateMachine`
applies (its private ``_name`` methods); callers use :class:`ClusterCommands` instead of
``RaftNode.propose("_name", ...)`` with a string. The wire and journal format is unchanged: each
method proposes exactly the positional arguments the replicated method takes, so existing
journals replay. Like every Raft command, arguments must be deterministic and picklable plain
data (``str``, ``int``, ``float``, ``bool``, ``None``, lists and dicts of them): times, ids and
epochs are computed by the caller.

Every method waits for the commit (``timeout`` seconds in all, see :meth:`RaftNode.propose`) and
returns the command's result (a dict, ``{"ok": True, ...}``). Errors:
:class:`~raftnode.node.CommandRejected` (the state machine refused: stale epoch or generation,
fenced writer, unknown connector, closed store; has ``code``) and
:class:`~raftnode.node.RaftUnavailable` (not committed in time).

Must not import Django or ``webapp``, and must not compute anything non-deterministic itself.
"""
from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ClusterCommands", "Proposer", "DEFAULT_TIMEOUT"]

#: Seconds a command may take to commit unless the caller says otherwise (``RaftNode.propose``'s default).
DEFAULT_TIMEOUT = 10.0

Result = dict[str, Any]


class Proposer(Protocol):
    """What the commands need of a Raft member: :meth:`~raftnode.node.RaftNode.propose` (so this module
    does not import the node, which imports it)."""

    def propose(self, name: str, *args: Any, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Commit the replicated command ``name(*args)`` within ``timeout`` seconds and return its result."""
        ...


class ClusterCommands:
    """Replicated writes of one :class:`~raftnode.node.RaftNode`, by name and with typed arguments.

    Args:
        raft: the node whose ``propose`` commits the commands (a :class:`~raftnode.node.RaftNode`).
    """

    def __init__(self, raft: Proposer) -> None:
        self._raft = raft

    def _propose(self, name: str, *args: Any, timeout: float) -> Result:
        return self._raft.propose(name, *args, timeout=timeout)

    # ------------------------------------------------------------------ cluster
    def register_member(self, *, node_id: str, info: dict[str, Any], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Add or replace member ``node_id`` (``info``: roles, addresses, weight)."""
        return self._propose("_register_member", node_id, info, timeout=timeout)

    def remove_member(self, *, node_id: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Forget member ``node_id`` (no error if unknown)."""
        return self._propose("_remove_member", node_id, timeout=timeout)

    def become_coordinator(self, *, epoch: int, leader: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Record ``leader`` as the group coordinator of ``epoch`` (the Raft term). Rejected if the epoch is stale."""
        return self._propose("_become_coordinator", epoch, leader, timeout=timeout)

    def set_assignment(self, *, epoch: int, generation: int, connectors: dict[str, str], tasks: dict[str, str],
                       base_generation: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Commit an assignment: ``connectors`` ``{name: worker}``, ``tasks`` ``{"name-N": worker}``.

        With ``base_generation``, ``connectors`` and ``tasks`` are only the changes to the committed
        assignment of that generation (``{key: worker, or None to drop it}``; see
        :meth:`webapp.coordinator.assignor.Assignment.changes_from`), and the entry is rejected
        (409) when the committed generation is another. Rejected for a stale ``epoch`` or a
        ``generation`` not above the committed one.
        """
        return self._propose("_set_assignment", epoch, generation, connectors, tasks, base_generation,
                             timeout=timeout)

    def request_restart(self, *, name: str, connector: bool, tasks: list[int],
                        timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Count up the restart counters of connector ``name`` (if ``connector``) and of its ``tasks``.

        Returns ``{"ok", "restarts": {instance key: counter}}``.
        """
        return self._propose("_request_restart", name, connector, tasks, timeout=timeout)

    # ---------------------------------------------------------- raft-store metadata
    def put_connector_config(self, *, name: str, config: dict[str, str], target_state: str | None,
                             create_only: bool, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Create or replace a connector's config (``target_state`` a plain string, None keeps it / STARTED).

        Returns ``{"ok", "created": bool}``; rejected (409) if ``create_only`` and it exists.
        """
        # str(): a str enum member (webapp.states) must enter the log as a plain string
        target = None if target_state is None else str(target_state)
        return self._propose("_put_connector_config", name, config, target, create_only, timeout=timeout)

    def delete_connector(self, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Delete a connector's config, statuses and topics (offsets stay). Rejected (404) if unknown."""
        return self._propose("_delete_connector", name, timeout=timeout)

    def put_target_state(self, *, name: str, target_state: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Set a connector's target state (a plain string). Rejected (404) if unknown."""
        return self._propose("_put_target_state", name, str(target_state), timeout=timeout)

    def put_task_configs(self, *, name: str, worker_id: str | None, generation: int,
                         task_configs: list[dict[str, str]], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Replace a connector's task configs; fenced by ``worker_id``/``generation`` unless ``worker_id`` is None."""
        return self._propose("_put_task_configs", name, worker_id, generation, task_configs, timeout=timeout)

    def put_status(self, *, name: str, task: int | None, worker_id: str, generation: int, status: dict[str, Any],
                   timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Record the status of the connector (``task`` None) or one task; fenced."""
        return self._propose("_put_status", name, task, worker_id, generation, status, timeout=timeout)

    def zzzz_put_statuses(self, *, worker_id: str, items: list[list], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Record many statuses of ``worker_id`` in one log entry: ``items`` ``[[name, task or None,
        generation, status], ...]``. Returns the list of per-item results (``{"ok": True}`` or a
        ``Rejected``), each fenced on its own; raises only when the entry itself was not committed.
        ``zzzz_`` keeps the command's name after every other one (pysyncobj numbers them by name).
        """
        return self._propose("_zzzz_put_statuses", worker_id, items, timeout=timeout)

    def commit_offsets(self, *, name: str, task: int | None, worker_id: str, generation: int, entries: list[list],
                       timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Write offsets ``[[key, partition, offset | None], ...]`` (None removes); fenced when ``task`` is set."""
        return self._propose("_commit_offsets", name, task, worker_id, generation, entries, timeout=timeout)

    def zzzzz_commit_offsets(self, *, worker_id: str, items: list[list],
                             timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
        """Write many tasks' offsets of ``worker_id`` in one log entry: ``items`` ``[[name, task, generation,
        entries], ...]`` (``entries`` as for :meth:`commit_offsets`). Returns the per-item results
        (``{"ok": True, ...}`` or a ``Rejected``), each fenced on its own; raises only when the entry
        itself was not committed. ``zzzzz_`` keeps the command's name after every other one.
        """
        return self._propose("_zzzzz_commit_offsets", worker_id, items, timeout=timeout)

    def zzzzzz_put_task_configs(self, *, name: str, worker_id: str | None, generation: int,
                                task_configs: list[dict[str, str]], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """:meth:`put_task_configs`, and when the configs replace others, the connector's assigned tasks are
        granted anew at a new assignment generation in the same entry, so every instance started before
        is fenced. Returns ``{"ok", "tasks", "generation": the new generation or None}``."""
        return self._propose("_zzzzzz_put_task_configs", name, worker_id, generation, task_configs, timeout=timeout)

    def zzzzzz_regrant_tasks(self, *, name: str, count: int, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Grant connector ``name``'s assigned tasks ``0 … count-1`` anew (after task configs written to a
        store other than Raft). Returns ``{"ok", "generation": the new generation or None}``."""
        return self._propose("_zzzzzz_regrant_tasks", name, int(count), timeout=timeout)

    def zzzzzz_rejoin_member(self, *, epoch: int, node_id: str, info: dict[str, Any],
                             timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Record member ``node_id``'s new process (``info`` with its ``incarnation``) and grant everything it
        owns anew, fencing its previous process. Rejected for a stale coordinator ``epoch``."""
        return self._propose("_zzzzzz_rejoin_member", epoch, node_id, info, timeout=timeout)

    def zzzzzzz_commit_offsets(self, *, worker_id: str, items: list[list],
                               timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
        """:meth:`zzzzz_commit_offsets` with each commit's sequence number: ``items`` ``[[name, task, generation,
        seq or None, entries], ...]``. An item older than a commit of its task already applied at its
        generation is refused (409) alone. Returns the per-item results."""
        return self._propose("_zzzzzzz_commit_offsets", worker_id, items, timeout=timeout)

    def zzzzzzz_start_task(self, *, name: str, task: int, worker_id: str, generation: int, seq: int,
                           timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Record that task ``name-task`` starts at ``generation`` with its agent's counter at ``seq``: its
        commits numbered lower at that generation are refused from then on. Fenced (409)."""
        return self._propose("_zzzzzzz_start_task", name, int(task), worker_id, int(generation), int(seq),
                             timeout=timeout)

    def zzzzzzzz_start_tasks(self, *, worker_id: str, items: list[list],
                             timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
        """:meth:`zzzzzzz_start_task` for many tasks of ``worker_id`` in one entry: ``items`` ``[[name, task,
        generation, seq], ...]``. Each start is fenced alone (409 in its own result). Returns the per-item
        results."""
        return self._propose("_zzzzzzzz_start_tasks", worker_id, items, timeout=timeout)

    def put_topics(self, *, name: str, topics: list[str], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Add ``topics`` to the connector's active topics."""
        return self._propose("_put_topics", name, topics, timeout=timeout)

    def reset_topics(self, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Empty the connector's active topics."""
        return self._propose("_reset_topics", name, timeout=timeout)

    def reset_offsets(self, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Remove all of the connector's offsets."""
        return self._propose("_reset_offsets", name, timeout=timeout)

    def import_names(self, *, items: list[list], timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Replace kinds of names, unfenced (a switch's copy and mirror; see ``ClusterStateMachine._import_names``)."""
        return self._propose("_import_names", items, timeout=timeout)

    def clear_metadata(self, *, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Empty the raft store's metadata (a switch to ``raft`` starts from nothing). Rejected while raft is active."""
        return self._propose("_clear_metadata", timeout=timeout)

    # ------------------------------------------------------------- store switch
    def init_store(self, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """The store a new cluster starts on (first leader only)."""
        return self._propose("_init_store", name, timeout=timeout)

    def begin_switch(self, *, epoch: int, switch_id: str, source: str, target: str, now: float,
                     timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Start switching the active store from ``source`` to ``target`` (``now``: the caller's epoch seconds)."""
        return self._propose("_begin_switch", epoch, switch_id, source, target, now, timeout=timeout)

    def switch_phase(self, *, epoch: int, switch_id: str, phase: str, progress: dict[str, Any], now: float,
                     timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Move switch ``switch_id`` to ``phase`` (forward only), merging ``progress``."""
        return self._propose("_switch_phase", epoch, switch_id, phase, progress, now, timeout=timeout)

    def commit_switch(self, *, epoch: int, switch_id: str, digest: dict[str, Any], now: float,
                      timeout: float = DEFAULT_TIMEOUT) -> Result:
        """The commit point of a switch: its target becomes the active store."""
        return self._propose("_commit_switch", epoch, switch_id, digest, now, timeout=timeout)

    def abort_switch(self, *, epoch: int, switch_id: str, reason: str, now: float,
                     timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Abort (roll back) a switch that has not committed."""
        return self._propose("_abort_switch", epoch, switch_id, reason, now, timeout=timeout)

    # ------------------------------------------------------------- users and tokens
    def user_put(self, *, name: str, changes: dict[str, Any], create: bool, now: float,
                 timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Create (``create``) or update user ``name``: ``changes`` ⊆ ``{"password": Django hash, "role", "active"}``.

        ``now``: the caller's unix seconds. Returns ``{"ok", "created": bool}``. Rejected: 409 exists
        (create) or would leave no active admin, 404 unknown (update), 400 create without hash/role.
        """
        return self._propose("_user_put", name, dict(changes), bool(create), float(now), timeout=timeout)

    def user_delete(self, *, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Delete user ``name`` and its tokens. Rejected: 404 unknown, 409 the last active admin."""
        return self._propose("_user_delete", name, timeout=timeout)

    def token_create(self, *, user: str, name: str, digest: str, now: float, expires: float | None,
                     timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Add ``user``'s token ``name`` whose key has SHA-256 hex ``digest`` (never the key itself).

        ``now``/``expires``: unix seconds (``expires`` None: never). Rejected: 404 unknown user,
        409 duplicate name.
        """
        return self._propose("_token_create", user, name, digest, float(now),
                             None if expires is None else float(expires), timeout=timeout)

    def token_revoke(self, *, user: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Remove ``user``'s token ``name``. Rejected: 404 unknown."""
        return self._propose("_token_revoke", user, name, timeout=timeout)

    # ------------------------------------------------------------- run-time metadata stores
    def zz_store_spec(self, *, name: str, spec: dict[str, Any] | None, now: float,
                      timeout: float = DEFAULT_TIMEOUT) -> Result:
        """Add the metadata store ``name`` on every member, or remove it (``spec`` None).

        ``spec``: ``{"url", "password": str | None, "added_by"}``, where ``url`` and ``password``
        hold config-provider references only (the caller checks); ``now``: unix seconds. The
        ``zz_`` keeps the command's name after every other one (pysyncobj numbers them by name).
        Rejected: 400 the name ``raft``; adding: 409 it exists; removing: 404 unknown, 409 the
        active store or one a running switch uses.
        """
        if spec is not None:
            password = spec.get("password")
            spec = {"url": str(spec["url"]), "password": None if password is None else str(password),
                    "added_by": str(spec.get("added_by") or "")}
        return self._propose("_zz_store_spec", name, spec, float(now), timeout=timeout)
