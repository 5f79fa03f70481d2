"""The replicated state machine of a RaftConnect cluster.

Owns the state every Raft member holds identically: cluster members, the
coordinator epoch, the current assignment and its generation, the active metadata
store and the stores added at run time, the REST users and their API tokens, and — while the active store is ``raft`` —
the connector metadata itself (configs, target states, task configs, statuses, offsets).

Every replicated method here is private, deterministic and apply-only: it reads
only its arguments and the current state (no clocks, no randomness, no I/O), so
every member computes the same result. Callers compute timestamps, ids and epochs
before proposing (see :class:`raftnode.node.RaftNode`). Fencing is checked inside
apply, so a check and its write are one atomic step of the log.

About 800 lines, nearly all the one class, on purpose: pysyncobj numbers a
consumer's replicated methods by sorting their names and writes that number, not
the name, into the journal (``LEGACY_COMMANDS``), so every replicated command is a
method of :class:`ClusterStateMachine` and its numbering is read in one place;
the reads beside them are the copies those commands keep consistent. The typed
writes callers use are :class:`raftnode.commands.ClusterCommands`.

Must not touch: Django or anything from ``webapp``; clocks, randomness or I/O
inside a replicated method.
"""
from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import deque
from collections.abc import Hashable
from typing import Any

from pysyncobj import SyncObjConsumer, replicated

__all__ = ["ClusterStateMachine", "Rejected", "STORE_RAFT", "SWITCH_PHASES", "SWITCH_RUNNING", "LEGACY_COMMANDS",
           "BATCH_COMMAND", "json_copy"]

#: The replicated commands of the first journals, in pysyncobj's numbering order. pysyncobj numbers
#: a consumer's replicated methods by sorting their names and logs that number, not the name: a new
#: command must sort after all of these (and keep ``ver`` 0), or existing journals replay the wrong
#: commands. ``tests/raftnode/test_state.py`` checks that these keep their numbers.
LEGACY_COMMANDS = (
    "_abort_switch", "_become_coordinator", "_begin_switch", "_clear_metadata", "_commit_offsets",
    "_commit_switch", "_delete_connector", "_import_names", "_init_store", "_put_connector_config",
    "_put_status", "_put_target_state", "_put_task_configs", "_put_topics", "_register_member",
    "_remove_member", "_request_restart", "_reset_offsets", "_reset_topics", "_set_assignment",
    "_switch_phase",
)
#: The group-commit command (``raftnode.groupcommit``): one log entry holding many commands. Added
#: after ``_zz_store_spec``, so, for the reason above, its name sorts after that one's, and a command
#: added later must sort after it (``_zzzz_put_statuses``, then ``_zzzzz_commit_offsets``, then the three
#: ``_zzzzzz_`` commands that grant instances anew, the two ``_zzzzzzz_`` ones that keep commits in
#: order and ``_zzzzzzzz_start_tasks``); ``tests/raftnode/test_users.py`` pins every number.
BATCH_COMMAND = "_zzz_apply_batch"
#: the role that may manage users; the state machine keeps at least one active user with it
#: (``webapp.connect.api.roles.ADMIN``; raftnode imports nothing of webapp)
ADMIN_ROLE = "admin"

STORE_RAFT = "raft"

#: Changes to connectors' view inputs a member remembers for ``ClusterStateMachine.view_changes_since``
#: (one per config, target state, task configs or restart command: well under a megabyte). A reader that
#: last looked further back rebuilds its marker instead.
VIEW_CHANGES_KEPT = 4096

#: Assignment steps a member remembers for ``ClusterStateMachine.assignment_steps``: at most this many
#: generations, holding at most :data:`ASSIGNMENT_STEP_KEYS_KEPT` changed keys in all (the oldest go first).
ASSIGNMENT_STEPS_KEPT = 64
ASSIGNMENT_STEP_KEYS_KEPT = 50_000

#: Phases of a metadata store switch, in order; ``completed`` and ``aborted`` end it.
SWITCH_PHASES = ("prepare", "copy", "verify", "committed", "completed", "aborted")
#: Phases before the commit point: a switch in one of these can still be rolled back.
SWITCH_RUNNING = ("prepare", "copy", "verify")


class ChangeLog:
    """The last ``kept`` changes as ``(version, name)``, answering "which names changed after version
    v?" (:meth:`since`) without walking more than the changes since. Thread-safe. A name is any
    hashable value: a connector's name, or a ``(worker, connector)`` pair.

    Versions come from the caller (:meth:`record`, one writer, increasing) or from the log itself
    (:meth:`add`, any thread). A change of anything (``name`` None) forgets what came before it:
    earlier versions are then unknown, as are versions older than the ``kept`` changes held.
    Memory: ``kept`` tuples at most (~150 bytes each with their names).
    """

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._changes: deque[tuple[int, Hashable]] = deque()
        self._floor: float = 0  # every change after this version is held
        self._last = 0

    @property
    def last(self) -> int:
        """The version of the last change recorded (0: none)."""
        return self._last

    def record(self, version: int, name: Hashable | None) -> None:
        """``name`` changed at ``version`` (not lower than the last one recorded); ``None``: anything did."""
        with self._lock:
            self._record(version, name)

    def add(self, name: Hashable | None) -> int:
        """Record a change of ``name`` (``None``: of anything) under the next version; returns it."""
        with self._lock:
            version = self._last + 1
            self._record(version, name)
            return version

    def _record(self, version: int, name: Hashable | None) -> None:
        self._last = version
        changes = self._changes
        if name is None:
            changes.clear()
            self._floor = version
            return
        while len(changes) >= self.kept:
            self._floor = changes.popleft()[0]
        changes.append((version, name))

    def forget(self) -> None:
        """Make every version unknown until the next change of anything is recorded."""
        with self._lock:
            self._changes.clear()
            self._floor = float("inf")

    def since(self, version: int) -> set[Any] | None:
        """Names changed after ``version``, or ``None`` when this log does not reach back that far."""
        with self._lock:
            if version < self._floor:
                return None
            names: set[Any] = set()
            for changed_at, name in reversed(self._changes):
                if changed_at <= version:
                    break
                names.add(name)
            return names


class Rejected(dict):
    """Result of a command refused by apply: ``{"rejected": reason, "code": http status}``.

    Returned (not raised) because pysyncobj hands apply results to the proposer.
    """

    def __init__(self, reason: str, code: int = 409):
        super().__init__(rejected=reason, code=code)


def _task_key(connector: str, task: int) -> str:
    return f"{connector}-{task}"


def late(generation: int | None, seq: int | None, held_generation: int | None, held_seq: int | None) -> bool:
    """Whether a commit ``(generation, seq)`` is older than the one that wrote an offset ``(held_generation,
    held_seq)``: same generation, both numbered, a lower number. The numbers of one generation come from
    one agent process (a new one is granted anew, at a new generation), so only they compare. The rule of
    every store that orders commits per partition (:attr:`ClusterStateMachine.offset_orders`, the
    relational stores' offset rows)."""
    return (seq is not None and held_seq is not None and generation is not None
            and generation == held_generation and seq < held_seq)


_SCALARS = (str, int, float, bool, type(None))


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped ``value`` (dicts, lists, tuples and scalars), as ``copy.deepcopy`` gives.

    What the state holds is JSON-shaped (configs, task configs, statuses, offsets), so no memo of
    shared or cyclic objects is needed: measured at 10,000 connectors of 10 tasks, the reads behind
    ``GET /connectors?expand=status`` spent three quarters of their time in ``copy.deepcopy``.
    Anything else (never stored here) is handed to ``copy.deepcopy``.
    """
    if isinstance(value, dict):
        return {k: v if v.__class__ in _SCALARS else json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if v.__class__ in _SCALARS else json_copy(v) for v in value]
    if value.__class__ in _SCALARS:
        return value
    if isinstance(value, tuple):
        return tuple(json_copy(v) for v in value)
    return copy.deepcopy(value)


_SCALAR_TYPES = frozenset(_SCALARS)
_TRACE_TYPES = (str, type(None))
_STATUS_KEYS = frozenset(("state", "trace", "worker_id", "generation"))


def _status_copy(status: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of one status entry, made with ``dict()`` where that is one.

    Apply writes an entry as ``{"state", "trace", "worker_id", "generation"}`` from a command whose
    arguments the REST layer typed (a known state word, a worker id string, an int), except the
    ``trace``, which nobody validates: an entry of exactly those keys with a string or ``None``
    trace is flat, and ``dict()`` copies it whole (looking at the keys and the trace costs less
    than looking at every value, at 110,000 entries per list). Anything else is checked value by
    value and, if need be, :func:`json_copy`'d.
    """
    out = dict(status)
    if out.keys() == _STATUS_KEYS and out["trace"].__class__ in _TRACE_TYPES:
        return out
    for value in out.values():
        if value.__class__ not in _SCALAR_TYPES:
            return json_copy(status)
    return out


class ClusterStateMachine(SyncObjConsumer):
    """Replicated cluster state (a pysyncobj ``SyncObjConsumer``).

    Public methods are local reads of this member's applied state (they may lag
    the leader by the replication delay). Private ``_``-prefixed methods are
    replicated commands; call them only through :class:`raftnode.node.RaftNode`.

    Shapes (all JSON-compatible):
        members: ``{node_id: {"roles": [..], "rest_address": "h:p",
            "raft_address": "h:p" | None, "weight": float}}``
        assignment: ``{"generation": int, "epoch": int, "leader": node_id | None,
            "connectors": {name: worker_id}, "tasks": {"name-i": worker_id},
            "assigned_at": {"name-i": generation}}``
        connectors: ``{name: {"config": {..}, "target_state": "STARTED"|"PAUSED"|"STOPPED",
            "tasks": [task config, ..], "created": int}}``
        statuses: ``{name: {"connector": status, "tasks": {"i": status}}}`` where a status is
            ``{"state": .., "worker_id": .., "trace": str|None, "generation": int}``
        offsets: ``{name: {partition_key: [partition, offset]}}``
        topics: ``{name: [topic, ..]}`` active topics (sorted), removed with the connector
        active_store: name of the store holding connector metadata (``raft`` or a
            configured store name); ``store_initialized`` once the first leader set it.
        switch: the latest store switch, or ``None``: ``{"id", "source", "target",
            "phase" (see :data:`SWITCH_PHASES`), "epoch", "started_at", "updated_at"
            (unix seconds, from the proposer), "progress": {..}, "error": str | None}``.
        previous_store: the store active before the last completed switch (rollback target).
        store_specs: metadata stores added at run time (REST, admin page), on every member alike:
            ``{name: {"url": str, "password": str | None, "added_at": float, "added_by": str}}``.
            ``url`` and ``password`` hold config-provider references (``${env:VAR}``,
            ``${file:/path:key}``) and never a password in clear: each node resolves them when it
            builds the store (``webapp.storage.registry``). Stores configured by environment
            variable are node-local and not here.
        restarts: ``{"name": seq, "name-i": seq}`` — restart requests (``POST .../restart``) per
            connector instance and task, counted up by :meth:`_request_restart`. Coordination
            state like the assignment (kept whatever store is active): the coordinator puts each
            counter in the worker's view and the worker restarts an instance whose counter
            changed since it started it.
        users: ``{name: {"password": Django password hash, "role": role name, "active": bool,
            "created": float, "updated": float}}`` (unix seconds, from the proposer). Never a
            password: the proposer hashes it.
        tokens: ``{sha256 hex digest of the key: {"user": name, "name": token name,
            "created": float, "expires": float | None}}``; (user, name) is unique. Never a key.
        commit_floors: ``{"name-i": [generation, seq]}``: the highest commit sequence number applied
            or started from for the task at that generation (:meth:`_zzzzzzz_commit_offsets`,
            :meth:`_zzzzzzz_start_task`); dropped with the task's key from the assignment.
        offset_orders: ``{name: {partition_key: [generation, seq]}}``: the numbered commit that wrote an
            offset imported from another store (``NameSnapshot.offset_commits``, a switch from a
            relational store), per partition, as that store kept it; a numbered commit older than it
            at the same generation leaves that partition as it is (:meth:`_zzzzzzz_commit_offsets`).
            A partition leaves it at its next write, after which the task's ``commit_floors`` entry
            orders its commits, and with the name's offsets; so it holds at most one entry per
            imported offset that no commit has written since.
        view_version: counts the applied commands that may change what a worker is told to run
            (members, the assignment, restart counters, connector configs, target states, task
            configs, imports, the active store) — not status reports, offset commits or topics,
            which are most of the log under load. ``connector_versions`` (``{name:
            view_version of its last change}``) and ``views_version`` (changes that may touch every
            view: imports, clears, the active store) let the coordinator rebuild only the views of
            the workers a change concerns (see ``GroupCoordinator``).

    The connector metadata here is the ``raft`` store's. While another store is
    active it is not served and plain metadata writes are refused (the ``raft``
    store is then read-only); only a switch whose target is ``raft`` may clear
    and import into it.
    """

    def __init__(self) -> None:
        # Local bookkeeping, not replicated: attributes that exist before SyncObjConsumer.__init__ are
        # left out of snapshots (and of digest()). See listing_revisions().
        self._listing_seq = 0
        self._listing_floor = 0
        self._listing_revisions: dict[str, int] = {}
        # the connectors each change a worker's view may show was about, by view_version: view_changes_since()
        self._view_changes = ChangeLog(VIEW_CHANGES_KEPT)
        # (worker, connector) of each instance a new assignment gave, took or granted anew, by view_version:
        # placement_changes_since()
        self._placement_changes = ChangeLog(VIEW_CHANGES_KEPT)
        # generation -> (base generation, connector changes, task changes) of the last assignments applied
        # here as changes to an earlier one (a grant anew: none), oldest first: assignment_steps()
        self._assignment_steps: dict[int, tuple[int, dict[str, str | None], dict[str, str | None]]] = {}
        self._assignment_step_keys = 0
        #: snapshots this member loaded since it started (its own at start, or one sent by a leader)
        self.snapshots_loaded = 0
        super().__init__()
        self.members: dict[str, dict[str, Any]] = {}
        self.epoch = 0
        self.assignment: dict[str, Any] = {
            "generation": 0, "epoch": 0, "leader": None,
            "connectors": {}, "tasks": {}, "assigned_at": {},
        }
        self.active_store = STORE_RAFT
        self.store_initialized = False
        self.switch: dict[str, Any] | None = None
        self.previous_store: str | None = None
        self.connectors: dict[str, dict[str, Any]] = {}
        self.statuses: dict[str, dict[str, Any]] = {}
        self.offsets: dict[str, dict[str, list]] = {}
        self.topics: dict[str, list[str]] = {}
        self.config_seq = 0
        self.restarts: dict[str, int] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, dict[str, Any]] = {}
        self.store_specs: dict[str, dict[str, Any]] = {}
        self.view_version = 0
        self.views_version = 0
        self.connector_versions: dict[str, int] = {}
        self.commit_floors: dict[str, list[int]] = {}
        self.offset_orders: dict[str, dict[str, list[int]]] = {}

    def _deserialize(self, data: dict[str, Any]) -> None:
        """Load a snapshot; one written before users, tokens, store specs or view versions existed leaves them empty."""
        self.users, self.tokens, self.store_specs = {}, {}, {}
        self.view_version, self.views_version, self.connector_versions = 0, 0, {}
        self.commit_floors, self.offset_orders = {}, {}
        self._view_changes.forget()  # until the load is done, no version is known
        self._placement_changes.forget()
        self._forget_assignment_steps()
        super()._deserialize(data)
        self.snapshots_loaded += 1
        self._listed_changed(None)
        self._view_changes.record(self.view_version, None)
        self._placement_changes.record(self.view_version, None)

    def assignment_steps(self, since: int, until: int
                         ) -> list[tuple[dict[str, str | None], dict[str, str | None]]] | None:
        """The changes that turn the assignment of generation ``since`` into that of generation ``until``:
        ``[(connector changes, task changes), ...]`` in the order applied, each ``{key: new owner, or
        None when dropped}`` (a key may name the owner it had), or ``None`` when this member does not
        know every step: an assignment applied whole, a snapshot loaded, or a step forgotten (at most
        :data:`ASSIGNMENT_STEPS_KEPT` are kept, of :data:`ASSIGNMENT_STEP_KEYS_KEPT` keys in all).

        Generation numbers name one assignment for the whole log (a generation is applied at most
        once, and every member applies the same log), so a reader holding what it derived from
        generation ``since`` can bring it to ``until`` with these. Local to this member, not
        replicated; for the group coordinator's owner index
        (``webapp.coordinator.coordinator.GroupCoordinator._owned``). Cost: the steps, not the assignment.
        """
        steps = self._assignment_steps
        out = []
        generation = until
        while generation > since:
            step = steps.get(generation)
            if step is None:
                return None
            generation = step[0]
            out.append(step[1:])
        if generation != since:
            return None
        out.reverse()
        return out

    def _assignment_step(self, generation: int, base: int | None, connectors: dict[str, str | None],
                         tasks: dict[str, str | None]) -> None:
        """Remember how the assignment of ``generation`` was made from that of ``base`` (``None``: whole)."""
        if base is None:
            self._forget_assignment_steps()
            return
        steps = self._assignment_steps
        steps[generation] = (base, connectors, tasks)
        self._assignment_step_keys += len(connectors) + len(tasks)
        while len(steps) > ASSIGNMENT_STEPS_KEPT or (self._assignment_step_keys > ASSIGNMENT_STEP_KEYS_KEPT
                                                     and len(steps) > 1):
            _, dropped_connectors, dropped_tasks = steps.pop(next(iter(steps)))
            self._assignment_step_keys -= len(dropped_connectors) + len(dropped_tasks)

    def _forget_assignment_steps(self) -> None:
        self._assignment_steps = {}
        self._assignment_step_keys = 0

    def _listed_changed(self, name: str | None) -> None:
        """Local bookkeeping, called after an apply changed what ``GET /connectors?expand=...`` shows of
        connector ``name`` (its record, statuses or owners), or of any connector (``None``)."""
        self._listing_seq += 1
        if name is None:  # every revision is now the floor: the map would only grow
            self._listing_floor, self._listing_revisions = self._listing_seq, {}
        elif name in self.connectors:
            self._listing_revisions[name] = self._listing_seq
        else:  # deleted: a re-created connector gets a newer revision anyway
            self._listing_revisions.pop(name, None)

    def _connector_changed(self, name: str) -> None:
        """Apply-side bookkeeping: connector ``name``'s config, target state or task configs changed."""
        self.connector_versions[name] = self._view_moved(name)

    def _views_changed(self) -> None:
        """Apply-side bookkeeping: a change that may touch every view (imports, clears, the active store)."""
        self.views_version += 1
        self._view_moved(None)
        self._listed_changed(None)

    def _view_moved(self, name: str | None) -> int:
        """Move ``view_version`` for a change of connector ``name`` (``None``: of any) and return it.
        The change is logged first (:meth:`view_changes_since`), so a reader that sees the new version
        finds it in the log."""
        version = self.view_version + 1
        self._view_changes.record(version, name)
        self.view_version = version
        return version

    def view_changes_since(self, version: int) -> set[str] | None:
        """Names of the connectors whose config, target state, task configs or restart counters
        changed in the commands applied after ``view_version`` was ``version``, or ``None`` when this
        member does not know that far back: more than :data:`VIEW_CHANGES_KEPT` such changes since,
        a change that may touch every view (imports, clears, the active store) or a snapshot
        loaded since (a snapshot is a later point of the same log, so its ``view_version`` is not
        lower; a version it equals names the same view inputs, and an empty set is right for it).

        The other commands that move ``view_version`` are not named: members joining or leaving,
        the coordinator's epoch, and new assignments (which replace ``assignment``, so a reader
        that holds the assignment it last saw can tell). Local to this member, not replicated (a
        reader compares with versions it read on this member). Cost: the changes since, not the
        log. For the group coordinator, which skips a worker's view when none of its connectors
        is named (:meth:`webapp.coordinator.coordinator.GroupCoordinator._cached_view`).
        """
        return self._view_changes.since(version)

    def placement_changes_since(self, version: int) -> set[tuple[str, str]] | None:
        """``(worker id, connector name)`` of each connector or task instance that an assignment committed
        after ``view_version`` was ``version`` gave the worker, took from it, or granted it anew (its
        generation moved), or ``None`` when this member does not know that far back (as
        :meth:`view_changes_since`; a whole assignment, the first of a coordinator, names every
        worker: ``None`` for the versions before it). A task names its connector.

        A worker named by neither this nor :meth:`view_changes_since` (for its connectors) has the
        view it had, but for the assignment's generation and epoch; one named here, for a few
        connectors, has the view it had but for those connectors' parts. Local, as
        :meth:`view_changes_since`.
        """
        return self._placement_changes.since(version)

    # ------------------------------------------------------------------ reads
    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the whole state, for views that need a consistent read."""
        return json_copy(self._serialize())

    def digest(self) -> str:
        """SHA-256 (hex) of the whole replicated state as canonical JSON (sorted keys).

        Two members that applied the same log, or one restored from the other's snapshot,
        have the same digest; compare it only while neither applies anything.
        """
        data = json.dumps(self._serialize(), sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha256(data.encode("utf-8")).hexdigest()

    def listing_revisions(self) -> tuple[int, dict[str, int]]:
        """``(floor, {name: revision})``: connector ``name``'s listing revision is
        ``max(floor, revisions.get(name, 0))``, a number that grows whenever anything
        ``GET /connectors?expand=status|info`` shows of it changes (config, target state, task
        count, statuses, the owners of the connector and its tasks).

        Local to this member (never replicated, not in snapshots; a restore raises the floor), for
        caches of what is derived from the listing (``webapp.connect.listing``). Each revision is
        set after its change applied, so data read after this call is at least as new as the
        revisions it returned.
        """
        floor = self._listing_floor
        return floor, dict(self._listing_revisions)

    def connector_names(self) -> list[str]:
        """Names of the configured connectors, sorted."""
        return sorted(self.connectors)

    def connector(self, name: str) -> dict[str, Any] | None:
        """A deep copy of one connector's record, or ``None``."""
        rec = self.connectors.get(name)
        return json_copy(rec) if rec is not None else None

    def status(self, name: str) -> dict[str, Any]:
        """A deep copy of one connector's statuses (empty shape when none).

        Status entries are flat (see the class docstring), so each is copied with ``dict()`` where
        that is a deep copy (:func:`_status_copy`): listing 10,000 connectors' statuses spent most of
        its time in :func:`json_copy` otherwise. The tasks map is copied in one step first, as apply
        may add to it meanwhile.
        """
        st = self.statuses.get(name)
        if st is None:
            return {"connector": None, "tasks": {}}
        if len(st) != 2:  # only "connector" and "tasks" are ever stored; anything else is copied whole
            return json_copy(st)
        connector, tasks = st["connector"], dict(st["tasks"])
        return {"connector": None if connector is None else _status_copy(connector),
                "tasks": {k: _status_copy(v) for k, v in tasks.items()}}

    def connector_offsets(self, name: str) -> dict[str, list]:
        """``{partition_key: [partition, offset]}`` committed for ``name``."""
        return json_copy(self.offsets.get(name, {}))

    def restart_seq(self, key: str) -> int:
        """The restart counter of connector ``name`` or task ``name-i`` (0 when never restarted)."""
        return self.restarts.get(key, 0)

    def connector_topics(self, name: str) -> list[str]:
        """Active topics of ``name`` (sorted copy)."""
        return list(self.topics.get(name, []))

    def connector_summary(self, name: str) -> tuple[dict[str, str], str, int] | None:
        """``(config, target_state, task count)`` of one connector, or ``None``.

        What :meth:`connector` gives less the task configs, which are neither copied nor walked (at
        10 tasks per connector they are most of a record), for lists of every connector
        (``GET /connectors?expand=...``). ``config`` is a copy; apply replaces a record's config and
        task list and never changes them in place, so what is read here is one consistent version.
        """
        rec = self.connectors.get(name)
        if rec is None:
            return None
        return json_copy(rec["config"]), rec["target_state"], len(rec["tasks"])

    def user(self, name: str) -> dict[str, Any] | None:
        """A copy of user ``name``'s record (see the class docstring), or ``None``."""
        rec = self.users.get(name)
        return dict(rec) if rec is not None else None

    def user_names(self) -> list[str]:
        """Names of the replicated users, sorted."""
        return sorted(self.users)

    def token(self, digest: str) -> dict[str, Any] | None:
        """A copy of the token whose key has SHA-256 hex ``digest``, or ``None`` (expiry is not checked here)."""
        rec = self.tokens.get(digest)
        return dict(rec) if rec is not None else None

    def user_tokens(self, user: str) -> list[dict[str, Any]]:
        """User ``user``'s tokens, sorted by name: ``[{"name", "created", "expires"}]`` (no digests)."""
        tokens = list(self.tokens.values())  # one step under the GIL: apply may change the dict meanwhile
        return sorted(({"name": t["name"], "created": t["created"], "expires": t["expires"]}
                       for t in tokens if t["user"] == user), key=lambda t: t["name"])

    def store_spec(self, name: str) -> dict[str, Any] | None:
        """A copy of the run-time store ``name``'s spec (see the class docstring), or ``None``."""
        rec = self.store_specs.get(name)
        return dict(rec) if rec is not None else None

    def store_spec_names(self) -> list[str]:
        """Names of the stores added at run time, sorted."""
        return sorted(self.store_specs)

    def check_fence(self, connector: str, task: int | None, worker_id: str, generation: int,
                    seq: int | None = None) -> str | None:
        """Why a write from ``worker_id`` at ``generation`` must be refused, or ``None``.

        A task write is current only if the assignment still gives the task to
        that worker and ``generation`` is not older than the generation at which
        the worker got it. ``task=None`` checks the connector instance instead.
        ``seq``: a task commit's number (``OffsetCommit.seq``), also refused when it is below the task's
        :attr:`commit_floors` entry at ``generation`` (a commit of an earlier instance, still on its way
        when the task started again in the same agent). The Raft store checks numbers inside its
        commands; other stores pass them here, where the floor holds the task starts.
        """
        a = self.assignment
        if task is None:
            owner = a["connectors"].get(connector)
            at = a["assigned_at"].get(connector, 0)
            what = f"connector {connector}"
        else:
            key = _task_key(connector, task)
            owner = a["tasks"].get(key)
            at = a["assigned_at"].get(key, 0)
            what = f"task {key}"
        if owner != worker_id:
            return f"{what} is not assigned to worker {worker_id} (owner: {owner})"
        if generation < at:
            return f"stale generation {generation} for {what} (assigned at generation {at})"
        if seq is not None and task is not None:
            floor = self.commit_floors.get(key)
            if floor is not None and floor[0] == generation and seq < floor[1]:
                return (f"commit {seq} of task {key} at generation {generation} is older than the start or "
                        f"commit {floor[1]} of the task: a late copy")
        return None

    def switch_in_progress(self) -> bool:
        """Whether a store switch has started and not yet reached ``completed`` or ``aborted``."""
        return self.switch is not None and self.switch["phase"] not in ("completed", "aborted")

    def _raft_store_closed(self) -> Rejected | None:
        if self.active_store != STORE_RAFT:
            return Rejected(f"metadata store raft is read-only: the active metadata store is {self.active_store}", 503)
        return None

    def _raft_store_importable(self) -> Rejected | None:
        sw = self.switch
        if self.active_store == STORE_RAFT or (sw and sw["target"] == STORE_RAFT and sw["phase"] in SWITCH_RUNNING):
            return None
        return Rejected("metadata store raft only takes imports while it is a switch's target", 503)

    # --------------------------------------------------------- replicated: cluster
    @replicated
    def _register_member(self, node_id: str, info: dict[str, Any]) -> dict[str, Any]:
        self.members[node_id] = dict(info)
        self.view_version += 1
        return {"ok": True}

    @replicated
    def _remove_member(self, node_id: str) -> dict[str, Any]:
        self.members.pop(node_id, None)
        self.view_version += 1
        return {"ok": True}

    @replicated
    def _become_coordinator(self, epoch: int, leader: str) -> dict[str, Any]:
        if epoch < self.epoch:
            return Rejected(f"stale coordinator epoch {epoch} < {self.epoch}")
        self.epoch = epoch
        self.assignment["leader"] = leader
        self.view_version += 1
        return {"ok": True, "epoch": epoch}

    @replicated
    def _set_assignment(self, epoch: int, generation: int, connectors: dict[str, str],
                        tasks: dict[str, str], base_generation: int | None = None) -> dict[str, Any]:
        """Commit assignment ``generation`` of coordinator ``epoch``.

        Without ``base_generation`` (the first journals' form), ``connectors`` and ``tasks`` are the
        whole assignment. With it, they are changes to the committed assignment of that generation,
        ``{key: new owner, or None to drop the key}``, and the entry is refused (409) if another
        generation was committed meanwhile: at 100,000 tasks the whole assignment is a 4 MB entry
        that every member pickled, logged and applied (~50 ms) after each create, while a create
        changes eleven keys (benchmarks/scale). Both forms give the same state.
        """
        if epoch < self.epoch:
            return Rejected(f"stale coordinator epoch {epoch} < {self.epoch}")
        old = self.assignment
        if generation <= old["generation"]:
            return Rejected(f"stale generation {generation} <= {old['generation']}")
        moved: set[str] | None = None  # connectors whose owners (or their tasks') changed; None: any
        version = self.view_version + 1  # what this entry moves view_version to, at its end
        if base_generation is None:
            new_connectors, new_tasks = dict(connectors), dict(tasks)
            assigned_at = {}
            for key, owner in list(connectors.items()) + list(tasks.items()):
                prev_owner = old["connectors"].get(key) if key in connectors else old["tasks"].get(key)
                assigned_at[key] = old["assigned_at"].get(key, generation) if prev_owner == owner else generation
            self._placement_changes.record(version, None)
        else:
            if base_generation != old["generation"]:
                return Rejected(f"assignment changes to generation {base_generation} do not apply to the committed "
                                f"generation {old['generation']}", 409)
            new_connectors, new_tasks = dict(old["connectors"]), dict(old["tasks"])
            assigned_at = dict(old["assigned_at"])
            moved = set()
            placed: set[tuple[str, str]] = set()  # (worker, connector) of each instance given or taken
            for changes, current in ((connectors, new_connectors), (tasks, new_tasks)):
                for key, owner in changes.items():
                    name = key if current is new_connectors else key.rpartition("-")[0]
                    if owner is None:
                        prev_owner = current.pop(key, None)
                        if prev_owner is not None:
                            moved.add(name)
                            placed.add((prev_owner, name))
                        assigned_at.pop(key, None)
                        if current is new_tasks:
                            self.commit_floors.pop(key, None)
                    elif (prev_owner := current.get(key)) != owner:
                        current[key] = owner
                        assigned_at[key] = generation
                        moved.add(name)
                        placed.update((w, name) for w in (prev_owner, owner) if w is not None)
            for pair in sorted(placed):  # logged before the new assignment can be read
                self._placement_changes.record(version, pair)
        self._assignment_step(generation, base_generation, connectors, tasks)  # before it can be read
        self.assignment = {
            "generation": generation, "epoch": epoch, "leader": old.get("leader"),
            "connectors": new_connectors, "tasks": new_tasks, "assigned_at": assigned_at,
        }
        # counters of instances no longer assigned anywhere are dropped: such an instance starts afresh anyway
        self.restarts = {k: v for k, v in self.restarts.items() if k in new_connectors or k in new_tasks}
        if base_generation is None and self.commit_floors:
            self.commit_floors = {k: v for k, v in self.commit_floors.items() if k in new_tasks}
        self.view_version += 1
        if moved is None:
            self._listed_changed(None)
        else:
            for name in moved:
                self._listed_changed(name)
        return {"ok": True, "generation": generation}

    @replicated
    def _request_restart(self, name: str, connector: bool, tasks: list[int]) -> dict[str, Any]:
        """Count up the restart counters of the connector instance (if ``connector``) and of ``tasks``."""
        keys = ([name] if connector else []) + [_task_key(name, int(t)) for t in tasks]
        for key in keys:
            self.restarts[key] = self.restarts.get(key, 0) + 1
        self._view_moved(name)
        return {"ok": True, "restarts": {k: self.restarts[k] for k in keys}}

    # -------------------------------------------------------- replicated: metadata
    @replicated
    def _put_connector_config(self, name: str, config: dict[str, str], target_state: str | None,
                              create_only: bool) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        rec = self.connectors.get(name)
        if rec is not None and create_only:
            return Rejected(f"Connector {name} already exists", 409)
        self.config_seq += 1
        if rec is None:  # "STARTED" is webapp.states.TargetState.STARTED (raftnode imports no webapp)
            rec = {"config": {}, "target_state": target_state or "STARTED", "tasks": [], "created": self.config_seq}
            self.connectors[name] = rec
            created = True
        else:
            created = False
            if target_state:
                rec["target_state"] = target_state
        rec["config"] = dict(config)
        rec["config_seq"] = self.config_seq
        self._connector_changed(name)
        self._listed_changed(name)
        return {"ok": True, "created": created}

    @replicated
    def _delete_connector(self, name: str) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        if name not in self.connectors:
            return Rejected(f"Connector {name} not found", 404)
        del self.connectors[name]
        self.statuses.pop(name, None)
        self.topics.pop(name, None)
        self._connector_changed(name)
        self._listed_changed(name)
        del self.connector_versions[name]  # a view naming it sees None instead of its last version
        # Offsets survive deletion, as in Kafka Connect (a re-created connector resumes).
        return {"ok": True}

    @replicated
    def _put_target_state(self, name: str, target_state: str) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        rec = self.connectors.get(name)
        if rec is None:
            return Rejected(f"Connector {name} not found", 404)
        rec["target_state"] = target_state
        self._connector_changed(name)
        self._listed_changed(name)
        return {"ok": True}

    @replicated
    def _put_task_configs(self, name: str, worker_id: str, generation: int,
                          task_configs: list[dict[str, str]]) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        rec = self.connectors.get(name)
        if rec is None:
            return Rejected(f"Connector {name} not found", 404)
        if worker_id is not None:  # None: the coordinator's own decision (e.g. stop clears tasks)
            why = self.check_fence(name, None, worker_id, generation)
            if why:
                return Rejected(why)
        if rec["tasks"] != task_configs:
            rec["tasks"] = [dict(t) for t in task_configs]
            self._connector_changed(name)
            # Statuses of tasks that no longer exist are dropped.
            st = self.statuses.get(name)
            if st:
                st["tasks"] = {k: v for k, v in st["tasks"].items() if int(k) < len(task_configs)}
            self._listed_changed(name)
        return {"ok": True, "tasks": len(task_configs)}

    @replicated
    def _put_status(self, name: str, task: int | None, worker_id: str, generation: int,
                    status: dict[str, Any]) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        if name not in self.connectors:
            return Rejected(f"Connector {name} not found", 404)
        why = self.check_fence(name, task, worker_id, generation)
        if why:
            return Rejected(why)
        st = self.statuses.setdefault(name, {"connector": None, "tasks": {}})
        entry = dict(status, worker_id=worker_id, generation=generation)
        if task is None:
            st["connector"] = entry
        else:
            st["tasks"][str(task)] = entry
        self._listed_changed(name)
        return {"ok": True}

    @replicated
    def _commit_offsets(self, name: str, task: int | None, worker_id: str, generation: int,
                        entries: list[list]) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        if task is not None:
            why = self.check_fence(name, task, worker_id, generation)
            if why:
                return Rejected(why)
        offs = self.offsets.setdefault(name, {})
        for key, partition, offset in entries:
            if offset is None:
                offs.pop(key, None)
            else:
                offs[key] = [partition, offset]
        orders = self.offset_orders.get(name)
        if orders:  # a written partition's order is its task's floor's from now on (offset_orders)
            for key, _partition, _offset in entries:
                orders.pop(key, None)
            if not orders:
                del self.offset_orders[name]
        return {"ok": True, "committed": len(entries)}

    @replicated
    def _put_topics(self, name: str, topics: list[str]) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        if name in self.connectors:
            self.topics[name] = sorted(set(self.topics.get(name, [])) | set(topics))
        return {"ok": True}

    @replicated
    def _reset_topics(self, name: str) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        self.topics.pop(name, None)
        return {"ok": True}

    @replicated
    def _reset_offsets(self, name: str) -> dict[str, Any]:
        closed = self._raft_store_closed()
        if closed:
            return closed
        self.offsets.pop(name, None)
        self.offset_orders.pop(name, None)
        return {"ok": True}

    # ---------------------------------------------------- replicated: store switch
    @replicated
    def _init_store(self, name: str) -> dict[str, Any]:
        """First leader of a new cluster: the store the cluster starts on (``runnode --metadata-store``)."""
        if not self.store_initialized:
            self.store_initialized = True
            self._views_changed()
            if not (self.connectors or self.offsets):  # data already in raft stays there (switch to move it)
                self.active_store = name
        return {"ok": True, "active_store": self.active_store}

    @replicated
    def _begin_switch(self, epoch: int, switch_id: str, source: str, target: str, now: float) -> dict[str, Any]:
        if epoch < self.epoch:
            return Rejected(f"stale coordinator epoch {epoch} < {self.epoch}")
        if self.switch_in_progress():
            sw = self.switch
            return Rejected(f"a switch from {sw['source']} to {sw['target']} is already in phase {sw['phase']}")
        if source != self.active_store:
            return Rejected(f"the active metadata store is {self.active_store}, not {source}")
        if target == source:
            return Rejected(f"metadata store {target} is already active", 400)
        self.store_initialized = True
        self.switch = {"id": switch_id, "source": source, "target": target, "phase": "prepare", "epoch": epoch,
                       "started_at": now, "updated_at": now, "progress": {}, "error": None}
        return {"ok": True, "switch": dict(self.switch)}

    def _current_switch(self, epoch: int, switch_id: str) -> Rejected | None:
        if epoch < self.epoch:
            return Rejected(f"stale coordinator epoch {epoch} < {self.epoch}")
        if self.switch is None or self.switch["id"] != switch_id:
            return Rejected(f"switch {switch_id} is not the current switch")
        return None

    @replicated
    def _switch_phase(self, epoch: int, switch_id: str, phase: str, progress: dict[str, Any],
                      now: float) -> dict[str, Any]:
        bad = self._current_switch(epoch, switch_id)
        if bad:
            return bad
        sw = self.switch
        order = SWITCH_PHASES.index
        if phase not in SWITCH_PHASES or phase in ("committed", "aborted") or order(phase) < order(sw["phase"]) \
                or sw["phase"] in ("completed", "aborted"):
            return Rejected(f"switch {switch_id} cannot go from {sw['phase']} to {phase}")
        if phase == "completed" and sw["phase"] != "committed":
            return Rejected(f"switch {switch_id} is not committed")
        sw["phase"] = phase
        sw["progress"] = dict(sw["progress"], **progress)
        sw["updated_at"] = now
        return {"ok": True}

    @replicated
    def _commit_switch(self, epoch: int, switch_id: str, digest: dict[str, Any], now: float) -> dict[str, Any]:
        """The commit point of a switch: the target becomes the active store in one log entry."""
        bad = self._current_switch(epoch, switch_id)
        if bad:
            return bad
        sw = self.switch
        if sw["phase"] != "verify":
            return Rejected(f"switch {switch_id} is in phase {sw['phase']}, not verify")
        self.previous_store = sw["source"]
        self.active_store = sw["target"]
        self._views_changed()
        sw["phase"] = "committed"
        sw["progress"] = dict(sw["progress"], digest=digest)
        sw["updated_at"] = now
        return {"ok": True, "active_store": self.active_store}

    @replicated
    def _abort_switch(self, epoch: int, switch_id: str, reason: str, now: float) -> dict[str, Any]:
        bad = self._current_switch(epoch, switch_id)
        if bad:
            return bad
        sw = self.switch
        if sw["phase"] not in SWITCH_RUNNING:
            return Rejected(f"switch {switch_id} is {sw['phase']} and can no longer be rolled back")
        sw["phase"] = "aborted"
        sw["error"] = reason
        sw["updated_at"] = now
        return {"ok": True}

    @replicated
    def _clear_metadata(self) -> dict[str, Any]:
        """Empty the raft store's connector metadata (a switch to ``raft`` starts from nothing)."""
        closed = self._raft_store_importable()
        if closed or self.active_store == STORE_RAFT:
            return closed or Rejected("the active metadata store raft cannot be cleared", 409)
        self.connectors, self.statuses, self.offsets, self.topics = {}, {}, {}, {}
        self.offset_orders = {}
        self._views_changed()
        return {"ok": True}

    @replicated
    def _import_names(self, items: list[list]) -> dict[str, Any]:
        """Replace kinds of names, unfenced (the switch's copy and mirror).

        ``items``: ``[[name, kinds, record | None, statuses, offsets, topics?, orders?]]`` where
        ``kinds`` ⊆ ``config``/``statuses``/``offsets``, ``record`` is
        ``{"config", "target_state", "tasks"}``, ``offsets`` is
        ``[[partition_key, partition, offset]]`` and ``orders`` ``{partition_key: [generation, seq]}``,
        the commits that wrote them (:attr:`offset_orders`; entries logged before it have none).
        """
        closed = self._raft_store_importable()
        if closed:
            return closed
        self._views_changed()
        for name, kinds, record, statuses, offsets, *rest in items:  # entries logged before topics had 5 fields
            self._import_one(name, kinds, record, statuses, offsets, rest[1] if len(rest) > 1 else None)
            if "statuses" in kinds:
                if rest and rest[0]:
                    self.topics[name] = sorted(set(rest[0]))
                else:
                    self.topics.pop(name, None)
        self._listed_changed(None)
        return {"ok": True, "imported": len(items)}

    def _import_one(self, name: str, kinds: list[str], record: dict[str, Any] | None,
                    statuses: dict[str, Any] | None, offsets: list[list] | None,
                    orders: dict[str, list[int]] | None = None) -> None:
        if "config" in kinds:
            if record is None:
                self.connectors.pop(name, None)
            else:
                old = self.connectors.get(name)
                self.config_seq += 1
                self.connectors[name] = {"config": dict(record["config"]), "target_state": record["target_state"],
                                         "tasks": [dict(t) for t in record["tasks"]],
                                         "created": old["created"] if old else self.config_seq,
                                         "config_seq": self.config_seq}
        if "statuses" in kinds:
            if statuses and (statuses.get("connector") or statuses.get("tasks")):
                self.statuses[name] = json_copy(statuses)
            else:
                self.statuses.pop(name, None)
        if "offsets" in kinds:
            if offsets:
                self.offsets[name] = {key: [partition, offset] for key, partition, offset in offsets}
            else:
                self.offsets.pop(name, None)
            held = {key: [int(order[0]), int(order[1])] for key, order in (orders or {}).items()
                    if key in self.offsets.get(name, ()) and order[0] is not None and order[1] is not None}
            if held:
                self.offset_orders[name] = held
            else:
                self.offset_orders.pop(name, None)

    # ------------------------------------------------------ replicated: users, tokens
    # Names sort after every LEGACY_COMMANDS entry (pysyncobj numbers commands by name order).
    def _active_admins(self) -> set[str]:
        return {n for n, u in self.users.items() if u["active"] and u["role"] == ADMIN_ROLE}

    @replicated
    def _user_put(self, name: str, changes: dict[str, Any], create: bool, now: float) -> dict[str, Any]:
        """Create (``create``) or update user ``name`` with ``changes`` ⊆ ``password``/``role``/``active``.

        Rejected: 409 creating an existing user, 404 updating an unknown one, 400 creating without
        a password hash and a role, 409 when it would leave no active admin (once there is one).
        """
        changes = {k: changes[k] for k in ("password", "role", "active") if k in changes}
        rec = self.users.get(name)
        if create:
            if rec is not None:
                return Rejected(f"User {name} already exists", 409)
            if not changes.get("password") or not changes.get("role"):
                return Rejected("A new user needs a password hash and a role", 400)
            self.users[name] = {"password": changes["password"], "role": changes["role"],
                                "active": bool(changes.get("active", True)), "created": now, "updated": now}
            return {"ok": True, "created": True}
        if rec is None:
            return Rejected(f"User {name} not found", 404)
        admins = self._active_admins()
        after = dict(rec, **changes)
        if admins == {name} and not (after["active"] and after["role"] == ADMIN_ROLE):
            return Rejected(f"User {name} is the last active admin; make another user an admin first", 409)
        after["active"] = bool(after["active"])
        after["updated"] = now
        self.users[name] = after
        return {"ok": True, "created": False}

    @replicated
    def _user_delete(self, name: str) -> dict[str, Any]:
        """Delete user ``name`` and all its tokens. Rejected: 404 unknown, 409 the last active admin."""
        if name not in self.users:
            return Rejected(f"User {name} not found", 404)
        if self._active_admins() == {name}:
            return Rejected(f"User {name} is the last active admin; make another user an admin first", 409)
        del self.users[name]
        self.tokens = {d: t for d, t in self.tokens.items() if t["user"] != name}
        return {"ok": True}

    @replicated
    def _token_create(self, user: str, name: str, digest: str, now: float, expires: float | None) -> dict[str, Any]:
        """Add token ``name`` of ``user`` (key digest ``digest``), first dropping the user's tokens expired at ``now``.

        Rejected: 404 unknown user, 409 the user already has a token ``name`` (or the digest exists).
        """
        if user not in self.users:
            return Rejected(f"User {user} not found", 404)
        self.tokens = {d: t for d, t in self.tokens.items()
                       if not (t["user"] == user and t["expires"] is not None and t["expires"] <= now)}
        if any(t["user"] == user and t["name"] == name for t in self.tokens.values()) or digest in self.tokens:
            return Rejected(f"User {user} already has a token named {name}", 409)
        self.tokens[digest] = {"user": user, "name": name, "created": now, "expires": expires}
        return {"ok": True}

    @replicated
    def _token_revoke(self, user: str, name: str) -> dict[str, Any]:
        """Remove ``user``'s token ``name``. Rejected: 404 when it has none of that name."""
        found = [d for d, t in self.tokens.items() if t["user"] == user and t["name"] == name]
        if not found:
            return Rejected(f"User {user} has no token named {name}", 404)
        for d in found:
            del self.tokens[d]
        return {"ok": True}

    # ------------------------------------------------------ replicated: run-time stores
    # The name sorts after every command before it (pysyncobj numbers commands by name order).
    @replicated
    def _zz_store_spec(self, name: str, spec: dict[str, Any] | None, now: float) -> dict[str, Any]:
        """Add the run-time store ``name`` (``spec``: ``{"url", "password", "added_by"}``) or, with ``spec``
        None, remove it.

        Rejected: 400 the reserved name ``raft``; adding: 409 the name exists; removing: 404 unknown,
        409 the active store or one a running switch copies from or to.
        """
        if name == STORE_RAFT:
            return Rejected("raft is the built-in Raft store; choose another name", 400)
        if spec is not None:
            if name in self.store_specs:
                return Rejected(f"Metadata store {name} already exists", 409)
            self.store_specs[name] = {"url": spec["url"], "password": spec.get("password"),
                                      "added_at": now, "added_by": spec.get("added_by") or ""}
            return {"ok": True, "created": True}
        if name not in self.store_specs:
            return Rejected(f"Metadata store {name} not found", 404)
        if name == self.active_store:
            return Rejected(f"Metadata store {name} is the active store; switch to another store first", 409)
        sw = self.switch
        if sw is not None and sw["phase"] not in ("completed", "aborted") and name in (sw["source"], sw["target"]):
            return Rejected(f"Metadata store {name} takes part in the running switch "
                            f"({sw['source']} to {sw['target']}, phase {sw['phase']})", 409)
        del self.store_specs[name]
        return {"ok": True}

    # ------------------------------------------------------------ replicated: group commit
    @replicated
    def _zzz_apply_batch(self, entries: list[list]) -> list[dict[str, Any]]:
        """Apply ``entries`` (``[[command name, [args...]], ...]``) one after the other; return their results in order.

        The log entry of a group commit (``raftnode.groupcommit``). Each command runs
        exactly as if it had its own log entry: its own checks (fencing by owner and
        generation, coordinator epoch, store open, ...), its own result; a refused
        command returns its :class:`Rejected` and changes nothing, and the others
        still apply. A command that raises (a bug; commands return refusals) is
        answered ``Rejected(..., 500)`` instead of failing the whole entry on every
        member. A name that is not a replicated command (or is this one) is refused
        (400). Because entries name their commands, renaming a replicated command
        breaks the replay of journals holding batches of it, as renumbering does for
        plain entries.
        """
        results: list[dict[str, Any]] = []
        for name, args in entries:
            if name not in _batchable():
                results.append(Rejected(f"{name} is not a replicated command that can be batched", 400))
                continue
            try:
                results.append(getattr(self, name)(*args, _doApply=True))
            except Exception as exc:  # noqa: BLE001 - deterministic on every member; answered to its caller alone
                results.append(Rejected(f"{name} failed in apply: {type(exc).__name__}: {exc}", 500))
        return results

    # ------------------------------------------------------------ replicated: many statuses at once
    @replicated
    def _zzzz_put_statuses(self, worker_id: str, items: list[list]) -> list[dict[str, Any]]:
        """Record many statuses reported by ``worker_id``: ``items`` ``[[name, task or None, generation,
        status], ...]``; returns one result per item, in order, as :meth:`_put_status` gives it.

        Each item is applied exactly as its own ``_put_status`` (store open, connector known, fenced
        by owner and generation), so a fenced item fails alone. One log entry for what a worker
        reports at once: at 100,000 tasks the workers' one status write per task was most of what
        the leader did while every task started (benchmarks/scale). Named after
        :data:`BATCH_COMMAND` so that the commands before it keep their numbers.
        """
        return [self._put_status(name, task, worker_id, generation, status, _doApply=True)
                for name, task, generation, status in items]

    # ------------------------------------------------------------ replicated: many offset commits at once
    @replicated
    def _zzzzz_commit_offsets(self, worker_id: str, items: list[list]) -> list[dict[str, Any]]:
        """Write many tasks' offsets committed by ``worker_id``: ``items`` ``[[name, task, generation,
        entries], ...]`` (``entries`` as for :meth:`_commit_offsets`); returns one result per item, in
        order, as :meth:`_commit_offsets` gives it.

        Each item is applied exactly as its own ``_commit_offsets`` (store open, fenced by owner and
        generation), so a fenced item fails alone and writes nothing. One log entry for what an
        agent's task threads commit at once (``ControlPlaneClient`` gathers them). Named after
        ``_zzzz_put_statuses`` so that the commands before it keep their numbers.
        """
        return [self._commit_offsets(name, task, worker_id, generation, entries, _doApply=True)
                for name, task, generation, entries in items]

    # ------------------------------------------------------------ replicated: instances granted anew
    # Three commands named after every earlier one so that those keep their numbers (then come the two
    # ``_zzzzzzz_`` ones below; a command added later must sort after all of them).
    def _grant_anew(self, connectors: list[str], tasks: list[str]) -> int | None:
        """Apply-side helper: give the assigned instances among ``connectors`` (names) and ``tasks`` (keys
        ``name-i``) to their owners again at a new assignment generation, so that every write of an
        instance started before is refused as stale (:meth:`check_fence`). Returns the new generation,
        or ``None`` when none of them is assigned (nothing changes then).

        The owners stay; the generation the instances were granted at moves up. A worker's view names
        that generation per instance, so the worker restarts those instances and their new incarnations
        write at it. This is what Kafka Connect reaches with a rebalance after a task-config change and
        with zombie fencing (KIP-618), without transactions: the grant and the refusal of every older
        incarnation are one log entry.
        """
        old = self.assignment
        connectors = [k for k in connectors if k in old["connectors"]]
        tasks = [k for k in tasks if k in old["tasks"]]
        if not connectors and not tasks:
            return None
        generation = old["generation"] + 1
        assigned_at = dict(old["assigned_at"])
        for key in connectors + tasks:
            assigned_at[key] = generation
        granted = {(old["connectors"][k], k) for k in connectors} | {(old["tasks"][k], k.rpartition("-")[0])
                                                                     for k in tasks}
        for pair in sorted(granted):  # logged before the new assignment can be read
            self._placement_changes.record(self.view_version + 1, pair)
        self._assignment_step(generation, old["generation"], {}, {})  # the owners stay
        self.assignment = {**old, "generation": generation, "assigned_at": assigned_at}
        self.view_version += 1
        for name in set(connectors) | {k.rpartition("-")[0] for k in tasks}:
            self._listed_changed(name)
        return generation

    @staticmethod
    def _task_keys(name: str, *counts: int) -> list[str]:
        """Task keys ``name-0`` … of connector ``name``, up to the largest of ``counts``."""
        return [_task_key(name, i) for i in range(max(counts, default=0))]

    @replicated
    def _zzzzzz_put_task_configs(self, name: str, worker_id: str | None, generation: int,
                                 task_configs: list[dict[str, str]]) -> dict[str, Any]:
        """:meth:`_put_task_configs`, and when the configs replace others, the connector's tasks granted anew.

        A change of task configs may move work between task indices (the file source gives whole
        files to tasks by size rank): the old instance of task 1 may still hold a file that task 2
        now starts on from the committed offset. Both would pass fencing by owner and generation,
        and the slower one's commit would move the file's offset back (``benchmarks/chaos``,
        ``offsets-monotonic``). So the same entry that writes the new configs grants every assigned
        task of the connector anew (:meth:`_grant_anew`): instances started before it can no longer
        write, and those started after read offsets that include every write it let through. The
        first configs (none before) grant nothing: no task of the connector is assigned yet.
        Returns ``{"ok", "tasks": count, "generation": new generation or None}``.
        """
        rec = self.connectors.get(name)
        before = rec["tasks"] if rec is not None else []
        result = self._put_task_configs(name, worker_id, generation, task_configs, _doApply=True)
        if isinstance(result, Rejected):
            return result
        replaced = bool(before) and before != task_configs
        return {**result, "generation": self._grant_anew([], self._task_keys(name, len(before), len(task_configs)))
                if replaced else None}

    @replicated
    def _zzzzzz_regrant_tasks(self, name: str, count: int) -> dict[str, Any]:
        """Grant connector ``name``'s assigned tasks ``name-0`` … ``name-{count-1}`` anew (:meth:`_grant_anew`).

        For task configs kept outside Raft (a relational or plugin store), written just before: there
        the grant follows the write in a second step instead of sharing its entry. Returns ``{"ok",
        "generation": new generation or None}``.
        """
        return {"ok": True, "generation": self._grant_anew([], self._task_keys(name, int(count)))}

    @replicated
    def _zzzzzz_rejoin_member(self, epoch: int, node_id: str, info: dict[str, Any]) -> dict[str, Any]:
        """Member ``node_id`` came back as a new process (``info["incarnation"]`` changed): record ``info``
        and grant every connector and task it owns anew (:meth:`_grant_anew`).

        A worker killed and restarted within its session timeout keeps its assignment, and the
        commits its old process left in flight could otherwise land after the new process's tasks
        read their offsets. Proposed by the coordinator of ``epoch``; refused for a stale epoch.
        Returns ``{"ok", "generation": new generation or None}``.
        """
        if epoch < self.epoch:
            return Rejected(f"stale coordinator epoch {epoch} < {self.epoch}")
        self.members[node_id] = dict(info)
        self.view_version += 1
        a = self.assignment
        return {"ok": True, "generation": self._grant_anew(
            [k for k, owner in a["connectors"].items() if owner == node_id],
            [k for k, owner in a["tasks"].items() if owner == node_id])}

    # ------------------------------------------------------------ replicated: commits in their order
    # Two commands named after the three above (``_zzzzzzz_``); a command added later must sort after
    # ``_zzzzzzz_start_task``.
    @replicated
    def _zzzzzzz_commit_offsets(self, worker_id: str, items: list[list]) -> list[dict[str, Any]]:
        """:meth:`_zzzzz_commit_offsets` with a commit sequence number: ``items`` ``[[name, task, generation,
        seq or None, entries], ...]``; one result per item, in order.

        A commit request can outlive its sender's attempt: the member that took it forwards it again
        after a leader change, or proposes it again while it has no leader, while the agent, whose
        attempt timed out, has sent the same commit elsewhere and gone on to the next batch. The late
        copy then lands after a newer commit of the same task, with the same owner and generation,
        and moved the offsets back (``benchmarks/chaos``, ``offsets-monotonic``). An agent numbers its
        commits and task starts with one counter per process (``seq``), so among the task's writes at
        one generation a lower number is an older one: an item whose ``seq`` is below the task's
        :attr:`commit_floors` entry at its generation is refused (409) and writes nothing; the same
        number again (a retry of a commit that did land) is applied again, which changes nothing.
        Items without ``seq`` (agents from before it) are applied as by :meth:`_commit_offsets`.
        Checks in order: store open, fencing, then the sequence. An item that passes them leaves out
        each partition whose imported commit (:attr:`offset_orders`) it is late for (:func:`late`).
        """
        results: list[dict[str, Any]] = []
        for name, task, generation, seq, entries in items:
            key = _task_key(name, task) if task is not None else None
            floor = self.commit_floors.get(key) if seq is not None and key is not None else None
            if floor is not None and floor[0] == generation and seq < floor[1] \
                    and self.check_fence(name, task, worker_id, generation) is None \
                    and self._raft_store_closed() is None:
                results.append(Rejected(f"commit {seq} of task {key} at generation {generation} is older than "
                                        f"commit {floor[1]}, already applied or started from: a late copy"))
                continue
            orders = self.offset_orders.get(name) if seq is not None else None
            if orders:  # partitions imported with a newer commit of this generation keep their offsets
                entries = [e for e in entries
                           if not late(generation, seq, *orders.get(e[0], (None, None)))]
            result = self._commit_offsets(name, task, worker_id, generation, entries, _doApply=True)
            if seq is not None and key is not None and not isinstance(result, Rejected):
                self._raise_floor(key, generation, seq)
            results.append(result)
        return results

    def _raise_floor(self, key: str, generation: int, seq: int) -> None:
        """Apply-side helper: ``commit_floors[key]`` becomes ``[generation, seq]`` if that is later."""
        floor = self.commit_floors.get(key)
        if floor is None or generation > floor[0] or (generation == floor[0] and seq > floor[1]):
            self.commit_floors[key] = [generation, seq]

    @replicated
    def _zzzzzzz_start_task(self, name: str, task: int, worker_id: str, generation: int, seq: int) -> dict[str, Any]:
        """Task ``name-task`` starts at ``generation`` on ``worker_id``; its agent's counter is at ``seq``.

        Fenced like the task's writes. Raises the task's commit floor to ``seq``, so that a commit of
        an earlier instance at the same generation (a restart in the same agent process: an operator's
        restart, a failed or fenced task started again) that is still on its way is refused instead of
        landing after the new instance read its offsets. The agent reads the offsets after this entry
        applied, so they include every commit it let through. Kept whatever store is active (it is
        coordination state, like the assignment). Returns ``{"ok": True}``.
        """
        why = self.check_fence(name, task, worker_id, generation)
        if why:
            return Rejected(why)
        self._raise_floor(_task_key(name, task), generation, seq)
        return {"ok": True}

    @replicated
    def _zzzzzzzz_start_tasks(self, worker_id: str, items: list[list]) -> list[dict[str, Any]]:
        """Many task starts of ``worker_id`` in one entry: ``items`` ``[[name, task, generation, seq], ...]``;
        one result per item, in order, each exactly as :meth:`_zzzzzzz_start_task` gives it (a fenced
        start is refused alone and raises no floor).

        What an agent's task threads start at once after a rebalance (``ControlPlaneClient`` gathers
        them): one request and one log entry instead of one of each per task. Named after
        ``_zzzzzzz_start_task`` so that every earlier command keeps its number.
        """
        return [self._zzzzzzz_start_task(name, task, worker_id, generation, seq, _doApply=True)
                for name, task, generation, seq in items]


_BATCHABLE: frozenset[str] | None = None


def _batchable() -> frozenset[str]:
    """Names of the replicated commands of :class:`ClusterStateMachine` except :data:`BATCH_COMMAND`."""
    global _BATCHABLE
    if _BATCHABLE is None:
        _BATCHABLE = frozenset(
            name for name, value in vars(ClusterStateMachine).items()
            if getattr(value, "replicated", False) and getattr(value, "origName", None) == name
            and name != BATCH_COMMAND)
    return _BATCHABLE
