"""The group coordinator: membership, sessions and assignment, run on the Raft leader.

Owns the leader-local liveness table (heartbeats are never logged), deciding
when to rebalance, committing each new assignment with its generation to Raft
*before* any agent hears of it, and telling agents what to run (Celery message
as the fast path, heartbeat replies as the repair path). Does not run tasks and
does not touch Kafka.

Lifecycle: :meth:`GroupCoordinator.start` starts one thread; on every Raft
leadership change the node calls :meth:`on_leader_change`. A new leader first
commits its epoch (the Raft term) and then gives every worker the committed
assignment gives work one session timeout of grace before declaring any dead.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from raftnode.state import STORE_RAFT, VIEW_CHANGES_KEPT, ChangeLog
from webapp.states import TargetState
from webapp.storage.base import MetadataStore

from .assignor import Assignment, WeightedRoundRobinAssignor
from .views import NOTHING_OWNED, Owned, ViewBuilder
from .viewdelta import DELTA_FROM, delta_answer

__all__ = ["GroupCoordinator", "Dispatcher", "NotCoordinator", "REBALANCE_DUTY", "REBALANCE_REST_MAX_S", "rest_after"]

log = logging.getLogger(__name__)

#: views remembered per worker as the start of a delta (:meth:`GroupCoordinator._note_given`): the newest
#: heartbeat answers and dispatches, a few generations apart at most, besides the one its report named
GIVEN_KEPT = 4


class NotCoordinator(Exception):
    """This node is not (yet) the active coordinator; ask the leader."""


class Dispatcher(Protocol):
    """Sends a worker its assignment view (fast path; may lose messages, delivers a worker's in order)."""

    def reaches(self, worker_id: str) -> bool:
        """Whether a view sent to ``worker_id`` can arrive (``send`` drops the others)."""

    def send(self, worker_id: str, view: dict[str, Any]) -> None:
        """Send ``view`` (a whole view or a delta, see :mod:`webapp.coordinator.viewdelta`) to ``worker_id``."""


class GroupCoordinator:
    """Kafka Connect's group coordinator + leader's assignment logic, on the Raft leader.

    Args:
        raft: the local Raft member.
        store: the active metadata store (connectors, task configs).
        node_id: this node's id (its worker, if any, has the same id).
        dispatcher: how views reach agents (``None``: heartbeat replies only).
        session_timeout_ms: a worker silent this long is removed (``session.timeout.ms``).
        leader_weight_cap: see :class:`WeightedRoundRobinAssignor`.
        clock: monotonic seconds, injectable for tests.
        scheduled_rebalance_max_delay_ms: how long the connectors and tasks of a worker that left (its
            session expired, or it said it leaves) wait for it to come back before they are reassigned
            (Connect's ``scheduled.rebalance.max.delay.ms``; 0, the default here: reassigned at once).
            Meanwhile they stay assigned to it, so a worker back in time (a rolling restart) gets its
            own back and nothing else moves.
    """

    def __init__(self, *, raft: RaftNode, store: MetadataStore, node_id: str,
                 dispatcher: Dispatcher | None = None, session_timeout_ms: int = 5000,
                 leader_weight_cap: float = 0.5, clock: Callable[[], float] = time.monotonic,
                 loop_interval: float = 0.1, scheduled_rebalance_max_delay_ms: int = 0):
        self.raft = raft
        self.store = store
        self.node_id = node_id
        self.dispatcher = dispatcher
        self.session_timeout = session_timeout_ms / 1000.0
        self.rebalance_delay = max(0, scheduled_rebalance_max_delay_ms) / 1000.0
        #: workers that left while they owned something, with when (clock()): held for rebalance_delay
        self._departed: dict[str, float] = {}
        self.assignor = WeightedRoundRobinAssignor(leader_weight_cap)
        self.clock = clock
        self.loop_interval = loop_interval
        # _lock guards the sessions, reports and view caches, and is held only briefly: every heartbeat,
        # status report and offset commit takes it. _rebalance_lock serializes rebalances (and their
        # reset at activation) and is held across the Raft commit of a generation, which under load
        # takes tens to hundreds of ms (benchmarks/scale: heartbeats waited 0.5 s behind it). Order:
        # _rebalance_lock before _lock, never the other way.
        self._lock = threading.RLock()
        self._rebalance_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leader_term: int | None = None  # term we must activate for
        self.epoch: int | None = None  # term we are active for
        self.last_seen: dict[str, float] = {}
        self.reported: dict[str, dict[str, Any]] = {}
        self._sent_views: dict[str, str] = {}
        self._inputs_sig: Any = None
        # worker -> (marker, view, digest, the assignment and quick key it was checked under): _cached_view
        self._views: dict[str, tuple[Any, dict[str, Any], str, Any, tuple]] = {}
        #: worker -> {digest: view} of the last views it was given (heartbeat answers and dispatches, newest
        #: last, at most GIVEN_KEPT): what a delta starts from
        self._given: dict[str, dict[str, dict[str, Any]]] = {}
        self._pokes = ChangeLog(VIEW_CHANGES_KEPT)  # pokes and the connector each named, numbered
        self.views = ViewBuilder(lambda: self.raft.state, store)
        self._owned_index: tuple[dict[str, Any], dict[str, Owned]] | None = None
        self._owned_lock = threading.Lock()  # one thread builds a new assignment's owner index, the others wait
        #: CPU seconds of the calling thread (injectable for tests): what the loop's rebalances cost
        self.cpu_clock: Callable[[], float] = time.thread_time
        self._rest_until = 0.0  # time.monotonic() before which the loop computes no generation

    # ------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the coordinator thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="group-coordinator", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread; waits at most one second."""
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(1.0)

    def on_leader_change(self, is_leader: bool, term: int) -> None:
        """Called from the Raft thread: only records the change (never proposes there) and takes no lock.

        The Raft thread must never wait for the coordinator: this took the coordinator's lock, which a
        rebalance held while it waited for its Raft commit, so a leader that lost its leadership
        mid-commit stopped its Raft thread until the commit timed out (10 s without answering votes
        or append-entries), and every election after it did the same (benchmarks/scale: a new term
        every ~15 s). Two plain attribute stores; readers take ``epoch`` once (:meth:`rebalance`) and
        :attr:`active` also asks Raft whether this member leads.
        """
        self._leader_term = term if is_leader else None
        if not is_leader:
            self.epoch = None
        self._wake.set()

    @property
    def active(self) -> bool:
        """Whether this node is the active coordinator (leader with committed epoch)."""
        return self.epoch is not None and self.raft.is_leader

    # ------------------------------------------------------------- membership
    def heartbeat(self, worker_id: str, member: dict[str, Any], running: dict[str, Any]) -> dict[str, Any]:
        """Record a worker's heartbeat (the first one is its join) and return its view.

        ``member``: ``{"rest_address", "weight", "roles"}``; ``running``:
        ``{"connectors": [...], "tasks": [...]}`` as the agent reports them.
        Returns the worker's assignment view plus ``session_timeout_ms``.
        Raises :class:`NotCoordinator` when not the active coordinator.

        A report may be a delta (``"tasks_delta": true``): ``tasks`` then holds only
        the entries that changed since the worker's previous report and
        ``task_keys`` every task it runs; it is merged into the previous report.
        When there is none to merge into (a new coordinator, a missing entry) the
        answer carries ``"report_full": true`` and the worker sends everything next.

        The answer may be a delta too: a report with ``"view_deltas": true`` whose ``view_digest``
        names one of the last :data:`GIVEN_KEPT` views this worker was given (heartbeat answers and
        dispatches) gets only the entries that changed since, ``delta_from`` naming that view
        (:mod:`webapp.coordinator.viewdelta`); the first heartbeat of a join, and a worker naming any
        other view, get the whole view.
        """
        if not self.active:
            raise NotCoordinator("this node is not the active group coordinator")
        known = self.raft.state.members.get(worker_id)
        wanted = {"roles": list(member.get("roles") or ["worker"]),
                  "rest_address": member.get("rest_address"),
                  "raft_address": member.get("raft_address"),
                  "weight": float(member.get("weight", 1.0))}
        incarnation = member.get("incarnation")
        if incarnation is not None:  # agents from before it was sent have none: they are never granted anew
            wanted["incarnation"] = str(incarnation)
        if known is not None and incarnation is not None and known.get("incarnation") != wanted["incarnation"]:
            self._rejoin(worker_id, wanted)
        elif known is None or any(known.get(k) != v for k, v in wanted.items()):
            self.raft.commands.register_member(node_id=worker_id, info=wanted)
        running = dict(running or {})
        report_full = False
        with self._lock:
            fresh = worker_id not in self.last_seen
            self.last_seen[worker_id] = self.clock()
            if fresh:
                self._departed.pop(worker_id, None)
            if running.pop("tasks_delta", False):
                keys = running.pop("task_keys", None) or []
                changed = running.get("tasks") or {}
                before = (self.reported.get(worker_id) or {}).get("tasks") or {}
                merged = {k: changed[k] if k in changed else before.get(k) for k in keys}
                report_full = any(v is None for v in merged.values())
                running["tasks"] = {k: v for k, v in merged.items() if v is not None}
            self.reported[worker_id] = running
        if fresh:
            log.info("coordinator: worker %s joined", worker_id)
            self._wake.set()
            self.rebalance()
        view, digest = self._cached_view(worker_id)
        extra = {"report_full": True} if report_full else {}
        held = running.get("view_digest")
        header = {"worker_id": worker_id, "generation": view["generation"], "epoch": view["epoch"], "digest": digest,
                  "session_timeout_ms": int(self.session_timeout * 1000), **extra}
        if not fresh and held == digest:
            # the worker runs from this very view: say so instead of sending thousands of task
            # configs every second (the worker re-applies the view it has)
            return {**header, "unchanged": True}
        base = None if fresh or not running.get("view_deltas") else self._given_view(worker_id, held)
        self._note_given(worker_id, digest, view)
        if base is not None:  # the worker holds a view it was given: send what changed (viewdelta)
            return delta_answer(base, view, {**header, DELTA_FROM: held})
        return {**view, **header}

    def _given_view(self, worker_id: str, digest: Any) -> dict[str, Any] | None:
        """The view with ``digest`` among the last ones ``worker_id`` was given, or ``None``."""
        return (self._given.get(worker_id) or {}).get(digest) if isinstance(digest, str) else None

    def _note_given(self, worker_id: str, digest: str, view: dict[str, Any]) -> None:
        """Remember that ``worker_id`` was given ``view`` (a delta may start from it later); keeps the
        newest :data:`GIVEN_KEPT` per worker and the one its last report named (dispatches start from
        it, however many generations came since). The dict is replaced, never changed in place:
        heartbeats and the loop's dispatch read it from other threads."""
        given = {d: v for d, v in (self._given.get(worker_id) or {}).items() if d != digest}
        given[digest] = view
        if len(given) > GIVEN_KEPT:
            kept = dict(list(given.items())[-GIVEN_KEPT:])
            held = (self.reported.get(worker_id) or {}).get("view_digest")
            if held in given and held not in kept:
                kept = {held: given[held], **kept}
            given = kept
        self._given[worker_id] = given

    def _rejoin(self, worker_id: str, info: dict[str, Any]) -> None:
        """Worker ``worker_id`` heartbeats as a new process (its ``incarnation`` changed): commit its new
        member record and grant every connector and task it owns anew, in one entry, before it hears
        its view (``ClusterStateMachine._zzzzzz_rejoin_member``).

        A worker killed and back within the session timeout is still in its session and keeps its
        assignment, so no rebalance fences its previous process, whose commits may still be on their
        way to the leader. Granted anew, the new process's instances start at a generation those
        commits no longer pass. Raises :class:`NotCoordinator` when this node stopped coordinating,
        and Raft's errors (the agent's next heartbeat tries again).
        """
        with self._rebalance_lock:  # one generation at a time: a rebalance's changes name their base
            epoch = self.epoch
            if epoch is None:
                raise NotCoordinator("this node is not the active group coordinator")
            result = self.raft.commands.zzzzzz_rejoin_member(epoch=epoch, node_id=worker_id, info=info)
        log.info("coordinator: worker %s is a new process (incarnation %s); %s", worker_id, info["incarnation"],
                 f"its instances are granted anew at generation {result['generation']}"
                 if result.get("generation") is not None else "it owns nothing")

    @property
    def _view_epoch(self) -> int:
        """Pokes so far, for the loop (the views track them per connector)."""
        return self._pokes.last

    def _view_marker(self) -> tuple[int, int]:
        """What the loop watches before rebalancing: the state machine's ``view_version`` (assignment,
        configs, task configs, restarts, members: not the status reports and offset commits that make up
        most of the log under load) and the pokes (a metadata store other than Raft changes without a
        Raft write). Each cached view has its own, narrower marker (:meth:`_worker_marker`)."""
        return (self.raft.state.view_version, self._view_epoch)

    def _worker_marker(self, worker_id: str, assignment: dict[str, Any] | None = None) -> tuple:
        """What ``worker_id``'s view is made of, cheaply: the assignment's generation and epoch, the
        record keys of the connectors it names (:meth:`ViewBuilder.record_key`: their Raft versions,
        changes that touch every view, the pokes for them) and the restart counters of its instances.
        A change to another worker's connectors leaves it as it was: at 5,000 connectors over 50
        workers, rebuilding every view for each connector's task configs took half of the leader's time.
        ``assignment``: the committed one this is for (default: the state's now)."""
        st = self.raft.state
        a = st.assignment if assignment is None else assignment
        owned = self._owned(a).get(worker_id, NOTHING_OWNED)
        restarts, record_key = st.restarts, self.views.record_key
        return (a["generation"], a["epoch"], tuple(record_key(n) for n in owned.names),
                tuple(restarts.get(k, 0) for k in owned.connectors), tuple(restarts.get(k, 0) for k in owned.tasks))

    def _cached_view(self, worker_id: str) -> tuple[dict[str, Any], str]:
        """``(worker_view, its digest)``, reassembled only when something it is made of moved, and then
        from the connector fragments that did not change (:class:`ViewBuilder`).

        What the cached view was checked under is kept with it: the committed assignment (the same
        object) and a quick key, the state's ``view_version`` (configs, task configs, restarts,
        members, assignments) and snapshot count and the pokes (:meth:`_view_marker`'s parts). In a
        steady cluster none of them moves between heartbeats, and the view is answered as it is: at
        100 workers of 1,000 tasks, a third of the leader's time went to heartbeats that changed
        nothing (benchmarks/scale). The quick key is read before the assignment, so a view is never
        kept under a newer key than the assignment it was made for.

        When they moved, the logs of what moved them are asked (:meth:`_touched`): the connectors
        changed since (the state's :meth:`~raftnode.state.ClusterStateMachine.view_changes_since`
        and the pokes') and the connectors of the instances new assignments gave this worker, took
        from it or granted it anew
        (:meth:`~raftnode.state.ClusterStateMachine.placement_changes_since`). If none concerns this
        worker's view, it is the one it had, with the new generation and epoch
        (:meth:`ViewBuilder.regenerate`): a create changes the views of the ~11 workers that get its
        instances, while every new generation walked all 100 workers' views (0.4-0.55 s at 10,000
        connectors, ``benchmarks/scale/views.py``). If some do, only those connectors' parts are
        made again (:meth:`ViewBuilder.build` with ``touched``): while 100,000 tasks were placed,
        each generation gave most workers a few, and the marker and the build then looked up every
        connector and task of each view. Only when the logs do not reach back (a whole assignment,
        thousands of changes since, a snapshot) is the :meth:`_worker_marker` computed, and decides.
        """
        st = self.raft.state
        quick = (st.view_version, st.snapshots_loaded, self._view_epoch)
        assignment = st.assignment
        hit = self._views.get(worker_id)
        if hit is not None and hit[4][1] == quick[1]:
            if hit[3] is assignment and hit[4] == quick:
                return hit[1], hit[2]
            touched = self._touched(worker_id, assignment, hit[3], hit[4])
            if touched is not None and not touched:
                if hit[3] is assignment:
                    self._views[worker_id] = (hit[0], hit[1], hit[2], assignment, quick)
                    return hit[1], hit[2]
                regenerated = self.views.regenerate(worker_id, hit[1], hit[2], assignment)
                if regenerated is not None:  # a new generation that moved nothing of this worker's
                    view, digest = regenerated
                    marker = None if hit[0] is None else (assignment["generation"], assignment["epoch"], *hit[0][2:])
                    self._views[worker_id] = (marker, view, digest, assignment, quick)
                    return view, digest
            elif touched:
                patched = self.views.build(worker_id, assignment, self._owned(assignment).get(worker_id, NOTHING_OWNED),
                                           touched=touched, since=hit[2])
                if patched is not None:  # no marker: the next check that cannot use the logs builds anew
                    self._views[worker_id] = (None, patched[0], patched[1], assignment, quick)
                    return patched
        marker = self._worker_marker(worker_id, assignment)
        if hit is not None and hit[0] is not None and hit[0] == marker:
            view, digest = hit[1], hit[2]
        else:
            view, digest = self._build_view(worker_id, assignment)
        self._views[worker_id] = (marker, view, digest, assignment, quick)
        return view, digest

    def _touched(self, worker_id: str, assignment: dict[str, Any], checked_assignment: dict[str, Any],
                 checked: tuple) -> set[str] | None:
        """Names of the connectors of ``worker_id``'s view whose parts may differ between the view checked
        under ``checked_assignment`` and the quick key ``checked`` (``(view_version, snapshots,
        pokes)``) and its view under ``assignment``: those named by a command applied since or a
        poke and in the view, and those of instances placed on or taken from the worker since
        (when ``assignment`` is another one). An empty set: the view is the one it had. ``None``
        when a log does not reach back that far."""
        st = self.raft.state
        changed = st.view_changes_since(checked[0])
        poked = self._pokes.since(checked[2])
        if changed is None or poked is None:
            return None
        touched: set[str] = set()
        if checked_assignment is not assignment:
            placed = st.placement_changes_since(checked[0])
            if placed is None:
                return None
            touched = {name for worker, name in placed if worker == worker_id}
        changed |= poked
        if changed:
            touched |= self._owned(assignment).get(worker_id, NOTHING_OWNED).name_set & changed
        return touched

    def _build_view(self, worker_id: str, assignment: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        """``(view, digest)`` of ``worker_id`` for ``assignment`` (default: the committed one now;
        :meth:`ViewBuilder.build`)."""
        a = self.raft.state.assignment if assignment is None else assignment
        return self.views.build(worker_id, a, self._owned(a).get(worker_id, NOTHING_OWNED))

    def _forget_view(self, worker_id: str) -> None:
        """Drop ``worker_id``'s cached view and its fragments (it left or its session expired)."""
        self._views.pop(worker_id, None)
        self._given.pop(worker_id, None)
        self.views.forget(worker_id)

    def touch(self, worker_id: str) -> None:
        """Count any signed request from a known, live worker as proof of life.

        Offset commits and status reports prove the worker runs as much as a
        heartbeat does; under CPU pressure (e.g. a JVM starting on the same host)
        they keep a busy worker's session from expiring between late heartbeats.
        A worker whose session already expired must heartbeat to rejoin.
        """
        with self._lock:
            if worker_id in self.last_seen:
                self.last_seen[worker_id] = self.clock()

    def leave(self, worker_id: str) -> None:
        """A worker leaves the group voluntarily; its tasks move at once, or after ``rebalance_delay``
        unless it is back by then."""
        with self._lock:
            if self.last_seen.pop(worker_id, None) is not None:
                self._depart(worker_id)
            self.reported.pop(worker_id, None)
            self._sent_views.pop(worker_id, None)
            self._forget_view(worker_id)
        log.info("coordinator: worker %s left", worker_id)
        self.rebalance()

    def _depart(self, worker_id: str) -> None:
        """Note that ``worker_id`` left now, when departures are held and it owns something (under ``_lock``;
        a walk of the assignment, once per departure)."""
        if self.rebalance_delay > 0:
            a = self.raft.state.assignment
            if worker_id in a["connectors"].values() or worker_id in a["tasks"].values():
                self._departed[worker_id] = self.clock()

    def held_workers(self) -> tuple[str, ...]:
        """Workers that left less than ``rebalance_delay`` ago and are not back, sorted: their connectors
        and tasks stay theirs until then (:meth:`rebalance`). Forgets the others."""
        return tuple(sorted(self.held_for()))

    def held_for(self) -> dict[str, float]:
        """``{worker: seconds until its work is reassigned}`` of the :meth:`held_workers`."""
        if not self._departed:
            return {}
        now = self.clock()
        with self._lock:
            for w, left in list(self._departed.items()):
                if now - left >= self.rebalance_delay or w in self.last_seen:
                    del self._departed[w]
            return {w: left + self.rebalance_delay - now for w, left in self._departed.items()}

    def live_workers(self) -> dict[str, float]:
        """``{worker_id: weight}`` of workers with a live session."""
        members = self.raft.state.members
        with self._lock:
            return {w: float(members.get(w, {}).get("weight", 1.0)) for w in self.last_seen
                    if "worker" in members.get(w, {}).get("roles", ["worker"])}

    # ------------------------------------------------------------- assignment
    def _desired_items(self) -> tuple[list[str], list[str]]:
        """``(connector names, task keys "name-i")`` that must be assigned, in name and task order.

        Records come through :meth:`ViewBuilder.record`, the cache the views use, so a rebalance
        reads only the connectors that changed since the last one: at 10,000 connectors × 10 tasks
        it copied every record with its task configs out of the store, 0.3 s of the leader's CPU
        for each rebalance, one after every create (benchmarks/scale). Errors: the store's.
        """
        connectors, tasks = [], []
        record = self.views.record
        for name in self.store.connector_names():
            rec = record(name)
            if rec is None:
                continue
            connectors.append(name)
            if rec.target_state != TargetState.STOPPED:
                tasks.extend(f"{name}-{i}" for i in range(len(rec.tasks)))
        return connectors, tasks

    def rebalance(self) -> bool:
        """Compute and commit a new assignment if inputs changed; returns whether one was committed.

        Only the active coordinator does anything. Errors from Raft are logged and
        retried by the loop.
        """
        if not self.active:
            return False
        with self._rebalance_lock:
            epoch = self.epoch  # read once: a leader change may clear it meanwhile (under _lock only)
            if epoch is None:
                return False
            workers = self.live_workers()
            held = self.held_workers()
            connectors, tasks = self._desired_items()
            current = self.raft.state.assignment
            sig = (tuple(sorted(workers.items())), self._leader_worker(), tuple(connectors), tuple(tasks),
                   current["generation"], current["epoch"], held)
            if sig == self._inputs_sig:
                return False
            prev = Assignment(dict(current["connectors"]), dict(current["tasks"]))
            kept = Assignment({}, {})
            if held:  # a departed worker's items stay its own, out of the assignor's pools, until it is due
                kept, connectors, tasks, base = self._hold(set(held), prev, connectors, tasks)
            else:
                base = prev
            new = self.assignor.assign(workers=workers, leader_worker=self._leader_worker(),
                                       connectors=connectors, tasks=tasks, previous=base)
            if held:
                new = Assignment({**new.connectors, **kept.connectors}, {**new.tasks, **kept.tasks})
            if new == prev and current["epoch"] == epoch:
                self._inputs_sig = sig
                return False
            generation = current["generation"] + 1
            try:
                connector_changes, task_changes = new.changes_from(prev)
                self.raft.commands.set_assignment(epoch=epoch, generation=generation, connectors=connector_changes,
                                                  tasks=task_changes, base_generation=current["generation"])
            except (RaftUnavailable, CommandRejected) as exc:
                log.warning("coordinator: assignment generation %s not committed: %s", generation, exc)
                return False
            self._inputs_sig = None  # recompute signature against the new generation next time
            log.info("coordinator: generation %s: %d connectors, %d tasks over %d workers (moved %d)%s",
                     generation, len(new.connectors), len(new.tasks), len(workers),
                     Assignment.moved_in((connector_changes, task_changes), prev),
                     f"; {len(kept.connectors)} connectors and {len(kept.tasks)} tasks held for departed "
                     f"worker(s) {', '.join(held)} (scheduled.rebalance.max.delay.ms)" if held else "")
        self.dispatch()
        return True

    @staticmethod
    def _hold(held: set[str], prev: Assignment, connectors: list[str], tasks: list[str]
              ) -> tuple[Assignment, list[str], list[str], Assignment]:
        """Split the desired items for held workers: ``(kept, connectors, tasks, base)`` where ``kept`` is
        what ``held`` workers own of the desired items (it stays theirs), ``connectors`` / ``tasks`` the
        rest for the assignor and ``base`` the previous assignment without the held workers' items."""
        kept_c = {c: prev.connectors[c] for c in connectors if prev.connectors.get(c) in held}
        kept_t = {t: prev.tasks[t] for t in tasks if prev.tasks.get(t) in held}
        base = Assignment({k: w for k, w in prev.connectors.items() if w not in held},
                          {k: w for k, w in prev.tasks.items() if w not in held})
        return (Assignment(kept_c, kept_t), [c for c in connectors if c not in kept_c],
                [t for t in tasks if t not in kept_t], base)

    def _leader_worker(self) -> str | None:
        members = self.raft.state.members
        me = members.get(self.node_id)
        if me is not None and "worker" in me.get("roles", []):
            return self.node_id
        return None

    def worker_view(self, worker_id: str) -> dict[str, Any]:
        """What ``worker_id`` must run now (JSON), from the committed assignment.

        Shape: ``{"worker_id", "generation", "epoch", "connectors": {name:
        {"config", "target_state", "generation", "tasks": [task configs], "restart"}},
        "tasks": {"name-i": {"connector", "task", "config", "target_state",
        "generation", "restart"}}}``. A task's ``config`` is the connector config overlaid
        with the task config; ``restart`` is the instance's restart counter in Raft
        (the worker restarts an instance when it changes).
        """
        return self._build_view(worker_id)[0]

    def _owned(self, assignment: dict[str, Any]) -> dict[str, Owned]:
        """``{worker_id: what it runs}`` (:class:`~webapp.coordinator.views.Owned`) of ``assignment``; made
        once per committed assignment (a new generation replaces the dict), so building every worker's
        view is one pass over the assignment instead of one per worker, and a view's build looks up
        only the connectors it makes.

        Made from the last one when the state knows the steps between their generations
        (:meth:`~raftnode.state.ClusterStateMachine.assignment_steps`) and they changed at most a
        quarter of the tasks (:func:`_patched_index`): only the workers they name are made again.
        Else from the whole assignment (~70 ms at 100,000 tasks, at every generation while
        benchmarks/scale placed its tasks)."""
        cached = self._owned_index
        if cached is not None and cached[0] is assignment:
            return cached[1]
        # one build per assignment: every heartbeat thread that met a new generation built its own copy
        # (~45 ms each at 100,000 tasks), 10% of the leader's time while 100 workers started their
        # tasks (benchmarks/scale)
        with self._owned_lock:
            cached = self._owned_index
            if cached is not None and cached[0] is assignment:
                return cached[1]
            index = None
            if cached is not None:
                before, previous = cached
                if before["connectors"] is assignment["connectors"] and before["tasks"] is assignment["tasks"]:
                    index = previous  # a grant anew: the same owners
                elif before["generation"] < assignment["generation"]:
                    steps = self.raft.state.assignment_steps(before["generation"], assignment["generation"])
                    if steps is not None and sum(len(c) + len(t) for c, t in steps) <= len(assignment["tasks"]) // 4:
                        index = _patched_index(before, previous, steps)
            if index is None:
                index = _index_of(assignment)
            self._owned_index = (assignment, index)
            self.views.prune(assignment["connectors"])
        return index

    def dispatch(self, force: bool = False) -> None:
        """Send each live worker its view if it changed since last sent (or ``force``): as a delta from the
        view its last report named (:meth:`_dispatch_message`) when it can arrive, else whole; a view that
        can arrive is remembered as given (:meth:`_note_given`), so a heartbeat naming it gets a delta.

        The base is the view the worker said it holds, not the newest one it was given: a heartbeat
        answer still on its way was the base once, the Celery message came first and was dropped, and
        the view came by the next heartbeat instead (``tests/integration/test_celery_delivery.py``,
        d005f1f). An agent keeps the views it named in its last heartbeats
        (``Worker.NAMED_VIEWS_KEPT``), so a message from the one its newest report named applies
        whatever the heartbeats brought meanwhile.

        Every worker's view is built here, also those the dispatcher cannot reach (their heartbeat
        replies then find it built). Building only the reachable ones, and the others on their
        heartbeats, was tried: the loop got to the next generation sooner, generations came more
        often, and every one moved most views while 100,000 tasks were placed, so more views were
        built in all. At 10,000 connectors the bring-up took 552 s instead of 426 s and the creates
        ran at 51/s instead of 75/s (benchmarks/scale).
        """
        if self.dispatcher is None or not self.active:
            return
        for worker_id in list(self.live_workers()):
            view, digest = self._cached_view(worker_id)
            if force or self._sent_views.get(worker_id) != digest:
                try:
                    reaches = self.dispatcher.reaches(worker_id)
                    self.dispatcher.send(worker_id, self._dispatch_message(worker_id, view, digest,
                                                                           delta=reaches and not force))
                    self._sent_views[worker_id] = digest
                    if reaches:
                        self._note_given(worker_id, digest, view)
                except Exception:
                    log.exception("coordinator: could not send assignment to %s", worker_id)

    def _dispatch_message(self, worker_id: str, view: dict[str, Any], digest: str, *, delta: bool) -> dict[str, Any]:
        """What the fast path sends ``worker_id`` for ``view``: when ``delta`` (the message can arrive and
        is not forced), the entries that changed since the view its last report named (``view_digest``;
        :mod:`webapp.coordinator.viewdelta`) if that report asked for deltas and the view is still
        remembered as given (an empty delta when it is this view: the agent passes over it); else the
        whole view. At 100 workers of
        1,000 tasks a generation that moves a few tasks on each cost the leader ~0.6 s of CPU and
        ~90 MiB of messages whole, ~16 ms and 0.1 MiB as deltas (benchmarks/scale/dispatch.py)."""
        report = self.reported.get(worker_id) or {}
        held = report.get("view_digest")
        base = self._given_view(worker_id, held) if delta and report.get("view_deltas") else None
        if base is None:
            return {**view, "digest": digest}
        header = {k: v for k, v in view.items() if k not in ("connectors", "tasks")}
        return delta_answer(base, view, {**header, "digest": digest, DELTA_FROM: held})

    # ------------------------------------------------------------------ loop
    def _activate(self, term: int) -> None:
        self.raft.commands.become_coordinator(epoch=term, leader=self.node_id)
        now = self.clock()
        a = self.raft.state.assignment
        owners = set(a["connectors"].values()) | set(a["tasks"].values())
        with self._rebalance_lock, self._lock:
            self.epoch = term
            # Grace: every worker the committed assignment still gives work gets one full session before
            # it can expire. Not every registered member: members stay registered after their session
            # expired, and counting a long-dead one live moved tasks onto it at every leader change and
            # back once it expired (benchmarks/scale: 3,025 of 5,000 tasks, twice, after a restart). A
            # live worker that owns nothing joins with its next heartbeat and nothing has to move for it.
            # Two sessions, not one: after a leader change every worker must find the new leader
            # (through a member that now forwards) while all of them rejoin at once; at 100 workers
            # and 100,000 tasks some took longer than one session, expired, and 4,324 tasks moved away
            # and back a few seconds later (benchmarks/scale). Kafka Connect waits up to
            # scheduled.rebalance.max.delay.ms (5 min) for a departed worker for the same reason; here
            # that delay (rebalance_delay, default 0) starts when the grace runs out.
            grace = now + self.session_timeout
            self.last_seen = {w: grace for w, m in self.raft.state.members.items()
                              if "worker" in m.get("roles", []) and w in owners}
            self._departed.clear()  # the grace above covers them: one that does not come back departs then
            self._sent_views.clear()
            self._views.clear()  # each marker names the epoch: views are reassembled from fragments
            self._given.clear()
            if not self.views.still_valid(self.raft.state.active_store == STORE_RAFT):
                self.views.clear()
            self._inputs_sig = None
        log.info("coordinator: active for epoch %s", term)

    def expire_sessions(self) -> list[str]:
        """Remove workers silent for longer than the session timeout; returns their ids."""
        now = self.clock()
        with self._lock:
            dead = [w for w, t in self.last_seen.items() if now - t > self.session_timeout]
            for w in dead:
                del self.last_seen[w]
                self._depart(w)
                self.reported.pop(w, None)
                self._sent_views.pop(w, None)
                self._forget_view(w)
        for w in dead:
            log.warning("coordinator: worker %s session expired", w)
        return dead

    def _run(self) -> None:
        last_marker, last_full = None, 0.0
        while not self._stop.is_set():
            woken = self._wake.wait(self.loop_interval)
            if woken:
                # changes often come in bursts (a connector's task configs, many creates): gather
                # them for up to 200 ms while they keep coming, then compute one generation for all
                first = time.monotonic()
                self._wake.clear()
                while time.monotonic() - first < 0.2 and self._wake.wait(0.02):
                    self._wake.clear()
            self._wake.clear()
            try:
                term = self._leader_term
                if term is not None and self.raft.is_leader and self.epoch != term:
                    self._activate(term)
                if self.active:
                    self.expire_sessions()
                    # rebalance and dispatch read every connector: only when something may have
                    # changed (a poke, a replicated write that can change a view, a member came or
                    # went) or every 5 s, so neither an idle cluster of thousands of tasks nor a busy
                    # one's status reports and offset commits make it rebuild anything here
                    marker = (self._view_marker(), tuple(sorted(self.live_workers())), self.held_workers())
                    now = time.monotonic()
                    if woken or marker != last_marker or now - last_full >= 5.0:
                        if now < self._rest_until:  # what comes meanwhile is gathered into this generation
                            self._stop.wait(self._rest_until - now)
                            if self._stop.is_set():
                                break
                            self._wake.clear()
                            marker = (self._view_marker(), tuple(sorted(self.live_workers())),
                                      self.held_workers())
                        spent = self.cpu_clock()
                        self.rebalance()
                        self.dispatch()
                        spent = self.cpu_clock() - spent
                        last_marker, last_full = marker, time.monotonic()
                        self._rest_until = last_full + rest_after(spent)
            except (RaftUnavailable, CommandRejected) as exc:
                log.warning("coordinator: %s", exc)
            except Exception:
                log.exception("coordinator loop error")

    def poke(self, name: str | None = None) -> None:
        """Ask the loop to re-evaluate now, after a change to connector ``name``'s config, target state or
        task configs (``None``: any connector's, e.g. a store switch). A metadata store other than Raft
        changes without a Raft write: only the views naming ``name`` are rebuilt for it."""
        self.views.changed(name)
        self._pokes.add(name)  # after the views' own mark: a view checked under this poke re-reads the record
        self._wake.set()


#: the loop's rebalances and dispatches take at most this share of the time (see rest_after)
REBALANCE_DUTY = 0.25
#: the longest rest after one, in seconds
REBALANCE_REST_MAX_S = 2.0


def rest_after(cpu_s: float) -> float:
    """Seconds the coordinator's loop rests after a rebalance and dispatch that took ``cpu_s`` seconds of
    its thread's CPU, before it computes the next generation: ``cpu_s * (1 / REBALANCE_DUTY - 1)`` (3x),
    at most :data:`REBALANCE_REST_MAX_S`. What arrives meanwhile goes into that next generation.

    A rebalance is a walk of every connector and task (the desired items, the assignor, the changes)
    under the leader's one GIL, ~0.1-0.2 s at 100,000 tasks, and every generation moves the views of
    the workers it places instances on. While 10,000 connectors were created and their tasks placed,
    the loop started the next generation as soon as the last one was dispatched: when views got
    cheaper, generations came twice as often, each placing half as much, and the bring-up took 437 s
    instead of 364 s (benchmarks/scale). Bounding the loop's share of the time keeps the generations
    in proportion to their cost; a cluster of a few hundred tasks rebalances in a few ms and rests
    as long (the 200 ms a burst is gathered for dominates).
    """
    return min(max(cpu_s, 0.0) * (1.0 / REBALANCE_DUTY - 1.0), REBALANCE_REST_MAX_S)


def _owned_of(connectors: list[str], tasks: list[str], nums: dict[str, tuple[int, ...]]) -> Owned:
    names = sorted(set(connectors).union(nums))
    return Owned(connectors, tasks, names, frozenset(names), frozenset(connectors), nums)


def _index_of(assignment: dict[str, Any]) -> dict[str, Owned]:
    """``{worker_id: Owned}`` of the whole ``assignment`` (``GroupCoordinator._owned``), in its order."""
    parts: dict[str, tuple[list[str], list[str], dict[str, tuple[int, ...]]]] = {}
    for name, owner in assignment["connectors"].items():
        (parts.get(owner) or parts.setdefault(owner, ([], [], {})))[0].append(name)
    for key, owner in assignment["tasks"].items():
        part = parts.get(owner) or parts.setdefault(owner, ([], [], {}))
        part[1].append(key)
        name, _, num = key.rpartition("-")
        nums = part[2]
        # tuples of ints, not lists: the collector stops tracking them, where 100,000 lists kept
        # until the next assignment made full collections come sooner (benchmarks/scale/views.py)
        nums[name] = nums.get(name, ()) + (int(num),)
    return {owner: _owned_of(*part) for owner, part in parts.items()}


def _patched_index(before: dict[str, Any], index: dict[str, Owned],
                   steps: list[tuple[dict[str, str | None], dict[str, str | None]]]) -> dict[str, Owned]:
    """:func:`_index_of` of the assignment that ``steps`` (``ClusterStateMachine.assignment_steps``) make
    of ``before``, from ``index`` (``before``'s): only the workers an instance moved to or from are made
    again, the others keep their entries (shared, never changed in place: other threads read them).

    The same instances per worker as the whole walk; a worker's lists may be in another order (what
    it was given since comes last), which no reader depends on: views are compared and digested as
    sets (``ViewBuilder.build``)."""
    owners: tuple[dict[str, str | None], dict[str, str | None]] = ({}, {})  # key -> owner after the steps so far
    # worker -> [connectors removed, tasks removed, connectors added, tasks added, nums]
    work: dict[str, list] = {}

    def part(worker: str) -> list:
        p = work.get(worker)
        if p is None:
            o = index.get(worker)
            p = work[worker] = [set(), set(), {}, {}, dict(o.nums) if o is not None else {}]
        return p

    for step in steps:
        for pool, (changes, was, now) in enumerate(zip(step, (before["connectors"], before["tasks"]), owners)):
            for key, owner in changes.items():
                old = now[key] if key in now else was.get(key)
                if old == owner:
                    continue
                now[key] = owner
                num = name = None
                if pool == 1:
                    name, _, digits = key.rpartition("-")
                    num = int(digits)
                if old is not None:
                    p = part(old)
                    if key in p[2 + pool]:
                        del p[2 + pool][key]  # given since, and taken again
                    else:
                        p[pool].add(key)
                    if pool == 1:
                        rest = tuple(n for n in p[4][name] if n != num)
                        if rest:
                            p[4][name] = rest
                        else:
                            del p[4][name]
                if owner is not None:
                    p = part(owner)
                    p[2 + pool][key] = None
                    if pool == 1:
                        p[4][name] = p[4].get(name, ()) + (num,)
    out = dict(index)
    for worker, (gone_connectors, gone_tasks, new_connectors, new_tasks, nums) in work.items():
        o = index.get(worker)
        connectors = [k for k in o.connectors if k not in gone_connectors] if o is not None else []
        tasks = [k for k in o.tasks if k not in gone_tasks] if o is not None else []
        connectors.extend(new_connectors)
        tasks.extend(new_tasks)
        if connectors or tasks:
            out[worker] = _owned_of(connectors, tasks, nums)
        else:
            out.pop(worker, None)
    return out
