"""Running a store switch on the leader, phase by phase, and finishing or rolling back one a dead leader left.

Owns :class:`SwitchManager` (the phases are described in the package docstring). Must not route
ordinary writes (:mod:`.router`) or build stores (:mod:`.stores`).
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from raftnode.state import STORE_RAFT, SWITCH_RUNNING

from ..base import KINDS, MetadataStore, StoreError
from .digest import Digest, canonical, export, import_into
from .router import StoreRouter
from .stores import SwitchError, UnknownStore

__all__ = ["SwitchManager"]

log = logging.getLogger("webapp.storage.switch")  # one logger name for the switch, whatever the module

#: Names copied and verified per batch (one stripe-lock set, one export and one import each).
BATCH = 50
#: Catch-up rounds before the commit holds writes back (each copies what was written during the last).
_CATCH_UP_ROUNDS = 5


class _Aborted(Exception):
    pass


class SwitchManager:
    """Runs store switches on the leader and finishes or rolls back ones a dead leader left (module docstring).

    Args:
        raft: the local Raft member.
        router: the node's :class:`StoreRouter` (its :class:`StoreSet` names the targets).
        hold_seconds: time each phase is held before the next (0 in production;
            drills and tests use it to act in a chosen phase).
        progress_interval: seconds between progress records in Raft.
    """

    def __init__(self, raft: RaftNode, router: StoreRouter, *, hold_seconds: float = 0.0,
                 progress_interval: float = 0.5):
        self.raft = raft
        self.router = router
        self.hold_seconds = hold_seconds
        self.progress_interval = progress_interval
        self._lock = threading.Lock()
        self._running: str | None = None  # id of the switch this process runs
        self._abort = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the watcher that finishes or rolls back switches left by a previous leader."""
        if self._watch is None:
            self._watch = threading.Thread(target=self._watch_loop, name="store-switch-watch", daemon=True)
            self._watch.start()

    def stop(self) -> None:
        """Stop the watcher and ask a running switch to abort."""
        self._stop.set()
        self._abort.set()

    # ------------------------------------------------------------ API
    def status(self) -> dict[str, Any]:
        """The ``GET /raftconnect/v1/metadata-store`` body.

        Shape: ``{"active": name, "previous": name | None, "stores": [{"name", "backend", "url",
        "source", "active": bool, ...}] (see :meth:`StoreSet.describe`; no passwords), "switch":
        {...} | None (as in :class:`raftnode.state.ClusterStateMachine`), "rollback":
        {"possible", "action", "target", "reason"} (see :meth:`rollback_plan`)}``.
        """
        st = self.raft.state
        self.router.stores.prune()  # close what was removed at run time
        stores = [dict(s, active=s["name"] == st.active_store) for s in self.router.stores.describe()]
        if st.active_store not in {s["name"] for s in stores}:
            stores.append({"name": st.active_store, "backend": None, "url": None, "source": None, "active": True,
                           "error": "the active store is not configured on this node"})
        switch = None
        if st.switch is not None:
            switch = json.loads(json.dumps(st.switch))
        return {"active": st.active_store, "previous": st.previous_store, "stores": stores, "switch": switch,
                "rollback": self.rollback_plan()}

    def rollback_plan(self) -> dict[str, Any]:
        """What :meth:`rollback` would do now: ``{"possible": bool, "action": "abort" | "switch_back" | None,
        "target": store name | None, "reason": plain-language sentence}``.

        Possible while a switch runs before its commit point (abort it: its source stays active),
        and after a completed switch whose source is still configured (switch back to it). Not after
        an aborted switch (its source never stopped being active), nor while a committed switch
        finishes, nor when the previous store was removed.
        """
        st = self.raft.state
        sw = st.switch
        if sw is None:
            return {"possible": False, "action": None, "target": None, "reason": "No switch has run yet."}
        if sw["phase"] in SWITCH_RUNNING:
            return {"possible": True, "action": "abort", "target": sw["source"],
                    "reason": f"Cancels the switch to {sw['target']}: {sw['source']} stays the active store "
                              "and keeps every write."}
        if sw["phase"] == "committed":
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The switch to {sw['target']} is committed and finishing; roll back once it completed."}
        if sw["phase"] == "aborted":
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The last switch was rolled back: {sw['source']} has been the active store throughout."}
        previous = st.previous_store
        if not previous or previous != sw["source"]:
            return {"possible": False, "action": None, "target": None,
                    "reason": "There is no previous metadata store to go back to."}
        if previous != STORE_RAFT and self.router.stores.source(previous) is None:
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The previous store {previous} has been removed."}
        return {"possible": True, "action": "switch_back", "target": previous,
                "reason": f"Switches back to {previous}: a new switch copies everything written to "
                          f"{st.active_store} since, then {previous} is active again."}

    def begin(self, target: str) -> dict[str, Any]:
        """Start switching to ``target`` (leader only); returns :meth:`status` once the switch is recorded.

        Errors: :class:`SwitchError` — 400 bad name or already active, 404 unknown
        store, 409 a switch is already running, 503 not the leader.
        """
        if not isinstance(target, str) or not target.strip():
            raise SwitchError('Request body must be {"target": "<store name>"}', 400)
        target = target.strip().lower()
        if self.router.stores.source(target) is None:
            raise UnknownStore(target, self.router.stores.names())
        if not self.raft.is_leader:
            raise SwitchError("this node is not the Raft leader", 503)
        with self._lock:
            running, thread = self._running, self._thread
        sw = self.raft.state.switch
        if running is not None and thread is not None and sw is not None and sw["id"] == running \
                and sw["phase"] in ("completed", "aborted"):
            thread.join(timeout=5.0)  # recorded as ended, its thread is returning: not a running switch
        with self._lock:
            if self._running is not None:
                raise SwitchError(f"switch {self._running} is still running on this leader", 409)
            switch_id = uuid.uuid4().hex[:12]
            term = self.raft.term
            source = self.raft.state.active_store
            self._running = switch_id  # before proposing, so the watcher never takes it for an orphan
            try:
                self.raft.commands.begin_switch(epoch=term, switch_id=switch_id, source=source, target=target,
                                                now=time.time())
            except CommandRejected as exc:
                self._running = None
                raise SwitchError(exc.reason, 400 if exc.code == 400 else 409) from exc
            except RaftUnavailable as exc:
                self._running = None
                raise SwitchError(str(exc), 503) from exc
            self._abort.clear()
            self._thread = threading.Thread(target=self._run, args=(switch_id, term, source, target),
                                            name=f"store-switch-{switch_id}", daemon=True)
            self._thread.start()
        log.info("store switch %s: %s -> %s started", switch_id, source, target)
        return self.status()

    def rollback(self) -> dict[str, Any]:
        """Roll back: abort the running switch, or switch back to the previous store after a completed one.

        Errors: :class:`SwitchError` — 409 nothing to roll back (no switch, the last one was
        aborted, a committed switch still finishing, the previous store removed; the message is
        :meth:`rollback_plan`'s reason), 503 not the leader.
        """
        if not self.raft.is_leader:
            raise SwitchError("this node is not the Raft leader", 503)
        sw = self.raft.state.switch
        plan = self.rollback_plan()
        if plan["action"] == "abort":
            with self._lock:
                running = self._running == sw["id"]
                self._abort.set()
            if not running:
                self._propose_abort(sw["id"], "rolled back by an operator")
            elif self._thread is not None:
                self._thread.join(30)
            return self.status()
        if not plan["possible"]:
            raise SwitchError(plan["reason"], 409)
        return self.begin(plan["target"])

    # ------------------------------------------------------------ the switch

    def _propose_abort(self, switch_id: str, reason: str) -> None:
        try:
            self.raft.commands.abort_switch(epoch=self.raft.term, switch_id=switch_id, reason=reason, now=time.time())
            log.warning("store switch %s aborted: %s", switch_id, reason)
        except (CommandRejected, RaftUnavailable) as exc:
            log.warning("store switch %s: could not record the abort (%s); the next leader will", switch_id, exc)

    def _check(self, term: int) -> None:
        if self._abort.is_set():
            raise _Aborted("rolled back by an operator")
        if self.raft.term != term or not self.raft.is_leader:
            raise _Aborted("this node lost Raft leadership")

    def _hold(self, term: int) -> None:
        deadline = time.monotonic() + self.hold_seconds
        while time.monotonic() < deadline:
            self._check(term)
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        self._check(term)

    def _run(self, switch_id: str, term: int, source_name: str, target_name: str) -> None:
        progress: dict[str, Any] = {}
        router = self.router
        t_start = time.monotonic()
        try:
            source = router.stores.get(source_name)
            # 1. prepare
            try:
                target = router.stores.get(target_name)
                router.claim_store(target)
                target.clear()
            except StoreError as exc:
                raise _Aborted(f"target store {target_name} is not usable: {exc}") from exc
            self._hold(term)
            # 2. copy while dual-writing
            router.gate.longest_wait = 0.0
            with router.gate.exclusive():
                router.start_mirror(target)
            names = source.all_names()
            progress = {"names_total": len(names), "names_copied": 0,
                        "prepare_s": round(time.monotonic() - t_start, 3)}
            log.info("store switch %s: copy (%d names), prepare took %.2f s", switch_id, len(names),
                     progress["prepare_s"])
            self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                            now=time.time())
            last = time.monotonic()
            for i in range(0, len(names), BATCH):
                self._check(term)
                chunk = names[i:i + BATCH]
                import_into(target, export(source, chunk))
                self._catch_up(source, target)  # written meanwhile (this batch's names included): copy again
                progress["names_copied"] = i + len(chunk)
                if time.monotonic() - last >= self.progress_interval:
                    self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                            now=time.time())
                    last = time.monotonic()
            if self.hold_seconds:  # a drill holds the phase: show it finished, not as last sampled
                self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                                now=time.time())
            self._hold(term)
            # 3. verify
            progress["names_verified"] = 0
            progress["copy_s"] = round(time.monotonic() - t_start - progress["prepare_s"], 3)
            log.info("store switch %s: verify, copy took %.2f s", switch_id, progress["copy_s"])
            self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                            now=time.time())
            names = sorted(set(source.all_names()) | set(target.all_names()))
            progress["names_total"] = len(names)
            digest = Digest()
            for i in range(0, len(names), BATCH):
                self._check(term)
                self._catch_up(source, target)
                chunk = names[i:i + BATCH]
                a, b = export(source, chunk), export(target, chunk)
                for sa, sb in zip(a, b):
                    ca, cb = canonical(sa), canonical(sb)
                    if ca != cb:  # maybe written since the catch-up: look again with its writes held back
                        with router.stripes([sa.name]):
                            kinds = router.discard_pending(sa.name)
                            snap = export(source, [sa.name])
                            if kinds:
                                import_into(target, snap, tuple(k for k in KINDS if k in kinds))
                            ca = canonical(snap[0])
                            cb = canonical(export(target, [sa.name])[0])
                    if ca != cb:
                        kinds = [k for k in KINDS if ca[k] != cb[k]]
                        raise _Aborted(f"verify failed: {sa.name} differs in {', '.join(kinds)}")
                    digest.add(sa.name, ca)
                progress["names_verified"] = i + len(chunk)
                if time.monotonic() - last >= self.progress_interval:
                    self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                            now=time.time())
                    last = time.monotonic()
            progress["verify_s"] = round(time.monotonic() - t_start - progress["prepare_s"] - progress["copy_s"], 3)
            if self.hold_seconds:
                self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                                now=time.time())
            self._hold(term)
            # 4. commit: the single log entry that changes the active store. Catch up while
            # writes flow, so that what is left to copy with writes held back is small.
            for _ in range(_CATCH_UP_ROUNDS):
                if router.pending_count() <= BATCH:
                    break
                self._catch_up(source, target)
            t0 = time.monotonic()
            with router.gate.exclusive():
                self._check(term)
                progress["names_caught_up_at_commit"] = self._catch_up(source, target)
                self.raft.commands.commit_switch(epoch=term, switch_id=switch_id, digest=digest.result(), now=time.time())
                router.stop_mirror()
            progress["commit_stall_ms"] = round((time.monotonic() - t0) * 1000, 1)
            # only the wait at the write gate; a write may also wait for its stripe, the mirror and the CPU
            progress["longest_gate_wait_ms"] = round(router.gate.longest_wait * 1000, 1)
            log.info("store switch %s: %s is now the active metadata store", switch_id, target_name)
            self._finish(switch_id, term, source, progress, t_start)
        except Exception as exc:
            with router.gate.exclusive():
                router.stop_mirror()
            sw = self.raft.state.switch
            if sw is not None and sw["id"] == switch_id and sw["phase"] == "committed":
                log.warning("store switch %s: committed, but finishing failed (%s); the watcher retries",
                            switch_id, exc)
            else:
                reason = str(exc) if isinstance(exc, (_Aborted, StoreError)) else f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, (_Aborted, StoreError)):
                    log.exception("store switch %s failed", switch_id)
                self._propose_abort(switch_id, reason)
        finally:
            with self._lock:
                if self._running == switch_id:
                    self._running = None

    def _catch_up(self, source: MetadataStore, target: MetadataStore) -> int:
        """Copy the names written since the last catch-up from ``source`` to ``target``; returns how many.

        Reads the source without stripe locks: a write landing meanwhile marks
        its name pending again, for the next catch-up (see :meth:`StoreRouter.take_pending`).
        Names are imported in batches of :data:`BATCH`, grouped by the kinds written.

        Errors: the stores' (:class:`StoreError`), which abort the switch.
        """
        pending = self.router.take_pending()
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, kinds in pending.items():
            groups.setdefault(tuple(k for k in KINDS if k in kinds), []).append(name)
        for kinds, names in groups.items():
            names.sort()
            for i in range(0, len(names), BATCH):
                import_into(target, export(source, names[i:i + BATCH]), kinds)
        return len(pending)

    def _finish(self, switch_id: str, term: int, source: MetadataStore | None, progress: dict[str, Any],
                t_start: float | None = None) -> None:
        """After the commit point: make the old store read-only, then record ``completed``."""
        self._hold(term)
        if source is not None:
            try:
                self.router.claim_store(source, read_only=True)
            except StoreError as exc:
                # Unreachable old store: nobody can write it now either; its lease is
                # checked again by any writer, whose claim would need a newer term.
                log.warning("store switch %s: could not mark %s read-only: %s", switch_id, source.name, exc)
                progress["old_store_read_only"] = False
        if t_start is not None:
            progress["duration_s"] = round(time.monotonic() - t_start, 3)
        self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="completed", progress=progress,
                                        now=time.time())
        log.info("store switch %s completed", switch_id)

    # ------------------------------------------------------------ recovery
    def recover(self) -> None:
        """On the leader: roll back an unfinished switch this process is not running, or finish a committed one."""
        if not self.raft.is_leader:
            return
        sw = self.raft.state.switch
        if sw is None or sw["phase"] in ("completed", "aborted"):
            return
        with self._lock:
            if self._running == sw["id"]:
                return
        if sw["phase"] in SWITCH_RUNNING:
            self._propose_abort(sw["id"], f"the leader changed during phase {sw['phase']}; rolled back")
        elif sw["phase"] == "committed":
            try:
                source = self.router.stores.get(sw["source"])
            except (StoreError, SwitchError) as exc:
                log.warning("store switch %s: old store %s unreachable: %s", sw["id"], sw["source"], exc)
                source = None
            progress = dict(sw.get("progress") or {})
            progress.pop("digest", None)
            hold, self.hold_seconds = self.hold_seconds, 0.0
            try:
                self._finish(sw["id"], self.raft.term, source, progress)
            finally:
                self.hold_seconds = hold

    def _watch_loop(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.recover()
            except (CommandRejected, RaftUnavailable, StoreError, _Aborted) as exc:
                log.debug("store switch watcher: %s", exc)
            except Exception:
                log.exception("store switch watcher error")

