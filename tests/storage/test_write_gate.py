"""``WriteGate`` (the store router's shared/exclusive lock): writes share it, a switch's exclusive hold
waits for the writes in progress and holds new ones back, an interrupted exclusive wait lets them
go, and many writers passing through it concurrently all get in and out."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.storage.switch import WriteGate


def _holder(side, entered: threading.Event, leave: threading.Event) -> threading.Thread:
    """A thread holding ``side()`` (``gate.shared`` or ``gate.exclusive``): sets ``entered`` once in,
    leaves when ``leave`` is set."""
    def hold() -> None:
        with side():
            entered.set()
            leave.wait(10)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    return t


def test_shared_holders_do_not_exclude_each_other():
    gate = WriteGate()
    leave = threading.Event()
    entered = [threading.Event() for _ in range(3)]
    threads = [_holder(gate.shared, e, leave) for e in entered]
    assert all(e.wait(5) for e in entered)  # all three inside at once
    assert gate._shared == 3
    leave.set()
    for t in threads:
        t.join(5)
    assert gate._shared == 0


def test_exclusive_waits_for_shared_holders_and_new_writes_wait_for_it():
    gate = WriteGate()
    first_in, first_leave = threading.Event(), threading.Event()
    first = _holder(gate.shared, first_in, first_leave)
    assert first_in.wait(5)

    exclusive_in, exclusive_leave = threading.Event(), threading.Event()
    ex = _holder(gate.exclusive, exclusive_in, exclusive_leave)
    wait_for(lambda: gate._waiting == 1, 5, what="the exclusive side to wait")
    assert not exclusive_in.is_set()  # a write is still inside

    # a write arriving now waits behind the exclusive side (it is preferred)
    late_in, late_leave = threading.Event(), threading.Event()
    late = _holder(gate.shared, late_in, late_leave)
    assert not late_in.wait(0.2)

    first_leave.set()  # the last write in leaves: the exclusive side goes in, the late write still waits
    assert exclusive_in.wait(5)
    assert not late_in.is_set()
    exclusive_leave.set()
    assert late_in.wait(5)
    assert gate.longest_wait > 0.0  # the late write's stall is recorded
    late_leave.set()
    for t in (first, ex, late):
        t.join(5)
    assert (gate._shared, gate._exclusive, gate._waiting) == (0, False, 0)


def test_an_interrupted_exclusive_wait_lets_held_back_writes_in():
    gate = WriteGate()
    first_in, first_leave = threading.Event(), threading.Event()
    first = _holder(gate.shared, first_in, first_leave)
    assert first_in.wait(5)

    class Interrupted(Exception):
        pass

    outcome: list[BaseException] = []
    interrupt = threading.Event()
    real_wait = gate._cond.wait

    def wait(timeout=None):
        if threading.current_thread() is not ex:
            return real_wait(timeout)  # a held-back write: only a notify lets it go on
        real_wait(0.05)  # the exclusive side's wait ends as a KeyboardInterrupt would end it
        if interrupt.is_set():
            raise Interrupted()

    def take_exclusive() -> None:
        try:
            with gate.exclusive():
                pass
        except Interrupted as exc:
            outcome.append(exc)

    gate._cond.wait = wait
    ex = threading.Thread(target=take_exclusive, daemon=True)
    ex.start()
    wait_for(lambda: gate._waiting == 1, 5, what="the exclusive side to wait")
    late_in, late_leave = threading.Event(), threading.Event()
    late = _holder(gate.shared, late_in, late_leave)  # held back behind the waiting exclusive side
    assert not late_in.wait(0.2)
    interrupt.set()
    ex.join(5)
    assert outcome and gate._waiting == 0 and not gate._exclusive
    assert late_in.wait(5)  # the held-back write went in while the first is still inside
    first_leave.set()
    late_leave.set()
    for t in (first, late):
        t.join(5)
    gate._cond.wait = real_wait
    assert gate._shared == 0


def test_many_writers_and_a_switch_all_get_through():
    gate = WriteGate()
    inside = [0]
    count_lock = threading.Lock()
    errors: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        for _ in range(2000):
            with gate.shared():
                with count_lock:
                    inside[0] += 1
                if gate._exclusive:
                    errors.append("a write ran while the exclusive side held the gate")
                with count_lock:
                    inside[0] -= 1

    def switcher() -> None:
        while not stop.is_set():
            with gate.exclusive():
                if inside[0]:
                    errors.append(f"the exclusive side went in with {inside[0]} write(s) inside")

    writers = [threading.Thread(target=writer, daemon=True) for _ in range(16)]
    sw = threading.Thread(target=switcher, daemon=True)
    sw.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join(60)
    stop.set()
    sw.join(10)
    assert not any(t.is_alive() for t in writers + [sw]), "a writer or the switch is stuck"
    assert errors == []
    assert (gate._shared, gate._exclusive, gate._waiting) == (0, False, 0)
