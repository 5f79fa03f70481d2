"""Read barriers in flights: concurrent linearizable reads on one member share their no-op entries.

A read barrier (:meth:`raftnode.RaftNode.read_barrier`) serves a caller once a no-op entry proposed
*after* the caller arrived is applied on this member. So callers that arrive while one barrier is
in flight can all be served by the next one: a flight's first caller proposes it as soon as the
flight before it is done, and every caller arriving until then joins it. A burst of N reads (the
tasks of a worker starting after a rebalance, each reading its offsets) costs about two entries
instead of N; a lone read proposes at once. No timer, no fixed delay: the same leader/follower
shape as the group commit (``raftnode.groupcommit``).

Must not import Django or anything from ``webapp``.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["ReadBarriers"]


class _Flight:
    """One barrier entry and the callers it serves."""

    __slots__ = ("previous", "callers", "done", "error")

    def __init__(self, previous: _Flight | None) -> None:
        #: the flight proposed before this one; waited for, then dropped (no chain of old flights is kept)
        self.previous = previous
        self.callers = 1
        self.done = threading.Event()
        self.error: Exception | None = None


class ReadBarriers:
    """Serve read barriers, sharing entries between concurrent callers (see module docstring).

    Args:
        propose: ``propose(timeout_s)`` commits one no-op entry and returns once it is applied on
            this member; raises ``unavailable`` (or anything else) when it cannot in time.
        unavailable: the exception class raised to a caller whose barrier did not complete in time.
    """

    def __init__(self, propose: Callable[[float], None], unavailable: type[Exception]) -> None:
        self._propose = propose
        self._unavailable = unavailable
        self._lock = threading.Lock()
        #: the flight taking callers, not proposed yet (its first caller waits for the one before)
        self._open: _Flight | None = None
        #: the newest flight proposed, maybe still in flight
        self._last: _Flight | None = None
        #: barrier entries proposed (tests, diagnostics)
        self.proposed = 0

    def wait(self, timeout: float) -> None:
        """Return once a barrier proposed after this call began is applied here; at most ``timeout`` seconds.

        Errors: ``unavailable`` (a new instance per caller) when it is not, or the proposal failed.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            flight = self._open
            lead = flight is None
            if lead:
                flight = self._open = _Flight(self._last)
            else:
                flight.callers += 1
        if lead:
            self._lead(flight, deadline, timeout)
        elif not flight.done.wait(max(0.0, deadline - time.monotonic())):
            raise self._unavailable(f"Raft read barrier not applied on this member within {timeout:g} s")
        if flight.error is not None:
            raise self._unavailable(str(flight.error))

    def _lead(self, flight: _Flight, deadline: float, timeout: float) -> None:
        """Propose ``flight`` once the flight before it is done; record the outcome for its callers."""
        try:
            previous, flight.previous = flight.previous, None
            if previous is not None and not previous.done.wait(max(0.0, deadline - time.monotonic())):
                raise self._unavailable(f"Raft read barrier not applied on this member within {timeout:g} s "
                                        "(the one before it is still in flight)")
            with self._lock:  # callers from now on need a barrier proposed after them: the next flight
                self._open = None
                self._last = flight
            self.proposed += 1
            self._propose(max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - every caller of the flight shares its outcome
            flight.error = exc
            with self._lock:
                if self._open is flight:  # gave up before proposing: later callers start afresh
                    self._open = None
        finally:
            flight.done.set()
