"""How long CPython's cyclic garbage collector holds every thread of a node, and keeping it short.

Owns :class:`GcPauseMonitor` (a ``gc.callbacks`` hook that times each collection, exports the
pauses as the ``raftconnect_gc_pause_seconds{generation}`` histogram, keeps the longest per
generation for the memory census and warns when one came close to the Raft election timeout) and
:class:`LongLivedFreeze` (the policy that keeps full collections from examining the long-lived
state every time). ``runnode`` installs both for the node's process (:func:`install`,
:func:`freeze_long_lived`). Must not import the node: the policy is handed ``may_pause``.

Why: a collection runs with the GIL held, so while it runs no thread of the process moves, the
Raft thread included. A full (generation 2) collection examines every container object the
process tracks, and a leader at 10,000 connectors, 100,000 tasks and 100 workers tracks millions:
``benchmarks/scale`` measured 70 full collections in 9 minutes on the leader, up to 0.92 s each,
against 1-2 s of election timeout (a leader that sends nothing that long is voted out although it
is alive; every request waits as long). CPython starts a full collection once the objects that
survived into the oldest generation since the last one reach a quarter of those that survived it;
under steady churn (heartbeats, statuses) that is every few seconds, and each examines the whole
state again. :class:`LongLivedFreeze` moves the survivors of each full collection out of the
collector's sight (``gc.freeze``), so the next ones examine only what arrived since.
"""
from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from typing import Any, Callable

from prometheus_client import Histogram

__all__ = ["GC_PAUSE_SECONDS", "THRESHOLDS_ENV", "GcPauseMonitor", "LongLivedFreeze", "freeze_long_lived", "install",
           "pause_seconds", "status", "thresholds_from_env"]

log = logging.getLogger(__name__)

#: Seconds each collection held the process, by generation (0, 1, 2; 2 is a full collection).
GC_PAUSE_SECONDS = Histogram("raftconnect_gc_pause_seconds",
                             "Seconds each cyclic garbage collection held every thread of the node",
                             ["generation"],
                             buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0))


class GcPauseMonitor:
    """Times every collection of this process through ``gc.callbacks`` (see the module docstring).

    Args:
        warn_after_s: a pause at least this long is logged at WARNING (at most once per
            ``warn_interval_s``, with how many such pauses were held back).
        warn_interval_s: seconds between two such warnings.
        clock: ``time.perf_counter`` (a parameter for tests).

    Figures (read them from any thread): ``collections`` and ``max_pause_s``, each a list of
    three (per generation) since :meth:`start`; ``last_full_pause_s`` (seconds, ``None`` before
    the first full collection). A collection runs on whichever thread allocated last, so the
    callback keeps its start time in the monitor: collections never overlap (the GIL and
    CPython's ``collecting`` flag). A pause is an upper bound: the interpreter may let other
    threads run between the start callback's clock read and the collection itself.
    """

    def __init__(self, warn_after_s: float = 0.5, warn_interval_s: float = 60.0, clock=time.perf_counter) -> None:
        self.warn_after_s = warn_after_s
        self.warn_interval_s = warn_interval_s
        self._clock = clock
        self._children = [GC_PAUSE_SECONDS.labels(generation=str(g)) for g in range(3)]
        self.collections = [0, 0, 0]
        self.max_pause_s = [0.0, 0.0, 0.0]
        self.last_full_pause_s: float | None = None
        #: ``(seconds of every finished collection's pause since start, clock of the running one's start or None)``,
        #: replaced in one assignment so that a thread reading it between the callbacks (CPython may switch
        #: threads inside a callback) never sees a pause half-counted (:meth:`paused_so_far`); the stop callback
        #: takes the running collection's start from it
        self._pauses: tuple[float, float | None] = (0.0, None)
        self._last_warning = float("-inf")
        self._held_back = 0
        self._installed = False

    def start(self) -> GcPauseMonitor:
        """Hook into ``gc.callbacks`` (once); returns the monitor."""
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True
        return self

    def stop(self) -> None:
        """Unhook (tests)."""
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    @property
    def total_pause_s(self) -> float:
        """Seconds of every finished collection's pause since :meth:`start`, summed."""
        return self._pauses[0]

    def paused_so_far(self) -> float:
        """Seconds spent in collections since :meth:`start`, the one running now (or whose callback has not
        finished) included: what ``raftnode.ticks`` subtracts from a gap between Raft ticks."""
        total, running = self._pauses
        return total + (self._clock() - running if running is not None else 0.0)

    def figures(self) -> dict[str, Any]:
        """``{"collections": [n0, n1, n2], "max_pause_s": [s0, s1, s2], "last_full_pause_s": s | None}``."""
        return {"collections": list(self.collections), "max_pause_s": [round(s, 4) for s in self.max_pause_s],
                "last_full_pause_s": None if self.last_full_pause_s is None else round(self.last_full_pause_s, 4)}

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        # Runs inside the collector: no allocation-heavy work, never raises.
        total, started = self._pauses
        if phase == "start":
            self._pauses = (total, self._clock())
            return
        if started is None:
            return
        pause = self._clock() - started
        self._pauses = (total + pause, None)
        generation = info.get("generation", 2)
        self.collections[generation] += 1
        if pause > self.max_pause_s[generation]:
            self.max_pause_s[generation] = pause
        if generation == 2:
            self.last_full_pause_s = pause
        self._children[generation].observe(pause)
        if pause >= self.warn_after_s:
            now = self._clock()
            if now - self._last_warning >= self.warn_interval_s:
                held, self._held_back, self._last_warning = self._held_back, 0, now
                log.warning("a generation-%d garbage collection held every thread of this node for %.2f s "
                            "(a Raft leader sends nothing meanwhile; followers elect after 1-2 s)%s",
                            generation, pause, f"; {held} more such pauses since the last warning" if held else "")
            else:
                self._held_back += 1


class LongLivedFreeze:
    """Freeze the survivors of every full collection; thaw them now and then so they are examined again.

    After each full (generation 2) collection, every object the collector tracks is moved to
    its permanent generation (``gc.freeze``): later collections, full ones included, examine
    only the objects tracked since. Frozen objects are still freed by reference counting when
    the last reference goes (a replaced status, a deleted connector); only *cyclic* garbage
    among them waits, until a thaw (``gc.unfreeze``) hands them back so that the next full
    collection examines everything and frees it. A thaw comes:

    * every ``follower_thaw_s`` seconds while ``may_pause()`` says a long pause harms nothing
      (this member follows: a follower's pause delays no election, and it reads the leader's
      messages before its own election deadline, ``raftnode.node._SyncObj``);
    * every ``leader_thaw_s`` seconds otherwise, so a leader that never changes still gets
      its complete examination: cyclic garbage waits at most that long anywhere;
    * when the process's allocated blocks (``sys.getallocatedblocks``, a cheap stand-in for the
      frozen set, whose exact count is a walk of millions of objects) outgrow ``growth`` times
      what they were after the last complete examination (``leader_growth`` times while a pause
      is not harmless): a safety valve should garbage cycles pile up faster than the thaws find
      them. A leader's valve is wider because its state grows most while connectors are created
      and tasks assigned, and at 2x a scale run's leader thawed 3 times on the way, the last
      examination pausing it 1.04 s.

    Safety is the collector's: an object referenced from a frozen one counts as referenced
    from outside, as from any object the collection does not examine.

    Args:
        may_pause: whether a full pause is harmless now (``runnode``: not the Raft leader).
        growth / leader_growth: allocated blocks over the baseline that bring a thaw (> 1), by ``may_pause()``.
        follower_thaw_s / leader_thaw_s: longest seconds between two thaws, by ``may_pause()``.
        clock: ``time.monotonic``; ``blocks``: ``sys.getallocatedblocks``; ``gc_module``:
            ``gc`` (all three for tests).

    Figures (:meth:`figures`): freezes, thaws, the blocks baseline.
    """

    def __init__(self, may_pause: Callable[[], bool], *, growth: float = 2.0, leader_growth: float = 4.0,
                 follower_thaw_s: float = 300.0, leader_thaw_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic, blocks: Callable[[], int] = sys.getallocatedblocks,
                 gc_module: Any = gc) -> None:
        if growth <= 1 or leader_growth <= 1:
            raise ValueError("growth and leader_growth must be above 1")
        self._may_pause = may_pause
        self.growth = growth
        self.leader_growth = leader_growth
        self.follower_thaw_s = follower_thaw_s
        self.leader_thaw_s = leader_thaw_s
        self._clock = clock
        self._blocks = blocks
        self._gc = gc_module
        self.baseline: int | None = None  # allocated blocks right after the last complete examination
        self._complete = True  # the next full collection examines everything (nothing frozen)
        self._last_thaw = clock()
        self.freezes = self.thaws = 0
        self._installed = False

    def start(self) -> LongLivedFreeze:
        """Hook into ``gc.callbacks``; returns the policy."""
        if not self._installed:
            self._gc.callbacks.append(self._callback)
            self._installed = True
        return self

    def stop(self) -> None:
        """Unhook and thaw everything (tests)."""
        if self._installed:
            self._gc.callbacks.remove(self._callback)
            self._installed = False
        self._gc.unfreeze()

    def freeze_now(self) -> None:
        """Freeze every object tracked now, without a collection first.

        For state just built that will live on: ``runnode`` calls it once start-up has loaded the
        Raft snapshot and log, so that the first full collection after a restart does not examine
        all of it (1.0 s on a member at 10,000 connectors, right when a new leader takes over).
        Garbage cycles among those objects wait for the next thaw, as any frozen ones do.
        """
        self._gc.freeze()
        self.freezes += 1
        self.baseline, self._complete = self._blocks(), False

    def figures(self) -> dict[str, Any]:
        """``{"freezes", "thaws", "baseline_blocks"}`` since start."""
        return {"freezes": self.freezes, "thaws": self.thaws, "baseline_blocks": self.baseline}

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        # At the end of a full collection every survivor is in the oldest generation and the young
        # ones are empty: the moment to freeze. The collector's lists are consistent again here.
        if phase != "stop" or info.get("generation") != 2:
            return
        try:
            self._gc.freeze()
            self.freezes += 1
            if self._complete:  # this collection examined everything: the new baseline
                self.baseline, self._complete = self._blocks(), False
                return
            interval, growth = ((self.follower_thaw_s, self.growth) if self._may_pause()
                                else (self.leader_thaw_s, self.leader_growth))
            if self._clock() - self._last_thaw >= interval or self._blocks() > self.baseline * growth:
                self._gc.unfreeze()  # the next full collection examines everything again
                self._complete, self._last_thaw = True, self._clock()
                self.thaws += 1
        except Exception:  # noqa: BLE001 - never raise inside the collector
            log.exception("garbage collection freeze policy failed")


_monitor: GcPauseMonitor | None = None
_policy: LongLivedFreeze | None = None
_install_lock = threading.Lock()


#: ``"threshold0,threshold1,threshold2"`` for ``gc.set_threshold`` (unset: CPython's 700,10,10)
THRESHOLDS_ENV = "RAFTCONNECT_GC_THRESHOLDS"


def thresholds_from_env() -> tuple[int, int, int] | None:
    """The collector thresholds :data:`THRESHOLDS_ENV` asks for, or ``None`` when it is unset.

    Errors: ``ValueError`` naming the variable when it is not three non-negative integers.
    """
    raw = os.environ.get(THRESHOLDS_ENV, "").strip()
    if not raw:
        return None
    try:
        values = tuple(int(v) for v in raw.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 0:
        raise ValueError(f"{THRESHOLDS_ENV} must be three non-negative integers (threshold0,threshold1,threshold2), "
                         f"e.g. 700,10,10; got {raw!r}")
    return values  # type: ignore[return-value]


def install() -> GcPauseMonitor:
    """The process's pause monitor, started on the first call; applies :data:`THRESHOLDS_ENV` if set.

    Errors: ``ValueError`` for a bad :data:`THRESHOLDS_ENV`.
    """
    global _monitor
    thresholds = thresholds_from_env()
    with _install_lock:
        if thresholds is not None:
            gc.set_threshold(*thresholds)
        if _monitor is None:
            _monitor = GcPauseMonitor().start()
        return _monitor


def freeze_long_lived(may_pause: Callable[[], bool], **options: Any) -> LongLivedFreeze:
    """Start the process's :class:`LongLivedFreeze` (once; later calls return the first)."""
    global _policy
    with _install_lock:
        if _policy is None:
            _policy = LongLivedFreeze(may_pause, **options).start()
        return _policy


def pause_seconds() -> float:
    """Seconds this process has spent in garbage collections since the monitor started (0 before
    :func:`install`): ``RaftConfig.pause_seconds`` of a node's Raft member."""
    monitor = _monitor
    return monitor.paused_so_far() if monitor is not None else 0.0


def status() -> dict[str, Any] | None:
    """This process's collector figures: the monitor's (:meth:`GcPauseMonitor.figures`) with
    ``"freeze"`` (:meth:`LongLivedFreeze.figures`, ``None`` without the policy); ``None`` unmonitored.
    Cheap (no walk of objects): ``GET /raftconnect/v1/raft`` and the memory census show it."""
    if _monitor is None:
        return None
    return {**_monitor.figures(), "freeze": _policy.figures() if _policy is not None else None}
