"""Connect's two state vocabularies, in one place: what an operator asks for and what a worker reports.

* :class:`TargetState` — the desired state of a connector (Connect's ``TargetState``):
  ``STARTED``, ``PAUSED``, ``STOPPED``. Stored with the connector's config.
* :class:`State` — the observed state of a connector or task instance (Connect's
  ``AbstractStatus.State``): ``UNASSIGNED``, ``RUNNING``, ``PAUSED``, ``STOPPED``,
  ``FAILED``, ``RESTARTING``. Stored in the status store, reported by workers.

Both are ``StrEnum``: a member equals, hashes and JSON-encodes as its name, so stored values,
REST bodies and heartbeats are byte-identical to the plain strings used before. Values handed
to the Raft log (pickled by pysyncobj) must be plain strings: pass ``member.value`` there
(``raftnode`` imports nothing from ``webapp``, so a journal must not name these classes).

A leaf module: imports only the standard library, so every layer (storage, coordinator,
runtime, the web layer) can import it. ``raftnode`` keeps its own literal default
(``"STARTED"``) for the same reason.
"""
from __future__ import annotations

from enum import StrEnum

__all__ = ["TargetState", "State", "TARGET_STATES", "STATES", "target_from_initial_state", "reported_state"]


class TargetState(StrEnum):
    """The desired state of a connector and its tasks (Connect's ``TargetState``)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class State(StrEnum):
    """The observed state of a connector or task instance (Connect's ``AbstractStatus.State``)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


#: Every target state's value, in Connect's order (plain strings, for messages and checks).
TARGET_STATES: tuple[str, ...] = tuple(s.value for s in TargetState)
#: Every observed state's value, in Connect's order (plain strings, for messages and checks).
STATES: tuple[str, ...] = tuple(s.value for s in State)

# POST /connectors' ``initial_state`` (KIP-980) names an observed state; absent means RUNNING
_INITIAL = {None: TargetState.STARTED, State.RUNNING: TargetState.STARTED, State.PAUSED: TargetState.PAUSED,
            State.STOPPED: TargetState.STOPPED}


def target_from_initial_state(initial_state: str | None) -> TargetState | None:
    """The target state for ``POST /connectors``' ``initial_state`` (``RUNNING``, ``PAUSED``,
    ``STOPPED`` or None for the default ``RUNNING``); None for any other value."""
    return _INITIAL.get(initial_state)


def reported_state(target: str) -> State:
    """The state a worker reports for a connector it has brought to ``target``
    (STARTED → RUNNING, PAUSED → PAUSED, STOPPED → STOPPED). Raises ``ValueError`` for an unknown target."""
    return {TargetState.STARTED: State.RUNNING, TargetState.PAUSED: State.PAUSED,
            TargetState.STOPPED: State.STOPPED}[TargetState(target)]
