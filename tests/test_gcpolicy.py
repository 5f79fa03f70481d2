"""The garbage collection policy: every collection timed and long ones reported; survivors of full ones frozen."""
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from webapp.gcpolicy import GC_PAUSE_SECONDS, GcPauseMonitor, LongLivedFreeze


def _observed(generation: int) -> float:
    return GC_PAUSE_SECONDS.labels(generation=str(generation))._sum.get()


def test_a_real_full_collection_is_counted_and_timed():
    mon = GcPauseMonitor().start()
    try:
        before = _observed(2)
        gc.collect(2)
        gc.collect(0)
    finally:
        mon.stop()
    assert mon.collections[2] >= 1 and mon.collections[0] >= 1
    assert mon.last_full_pause_s is not None and mon.last_full_pause_s > 0
    assert mon.max_pause_s[2] >= mon.last_full_pause_s
    assert mon.total_pause_s >= mon.last_full_pause_s + mon.max_pause_s[0]  # every pause summed
    assert _observed(2) > before
    gc.collect(2)  # after stop: no longer counted
    assert mon.figures()["collections"][2] == mon.collections[2]
    assert mon._callback not in gc.callbacks


def test_long_pauses_warn_once_per_interval_with_the_count_held_back(caplog):
    now = [100.0]
    mon = GcPauseMonitor(warn_after_s=0.5, warn_interval_s=60.0, clock=lambda: now[0])

    def collection(generation: int, seconds: float) -> None:
        mon._callback("start", {"generation": generation})
        now[0] += seconds
        mon._callback("stop", {"generation": generation, "collected": 0, "uncollectable": 0})

    with caplog.at_level(logging.WARNING, logger="webapp.gcpolicy"):
        collection(0, 0.001)  # short: no warning
        collection(2, 0.8)  # warned
        collection(2, 1.2)  # within the interval: held back
        collection(1, 0.6)  # held back too
        now[0] += 60
        collection(2, 0.7)  # warned, with the two held back
    messages = [r.getMessage() for r in caplog.records if r.name == "webapp.gcpolicy"]
    assert len(messages) == 2
    assert "generation-2" in messages[0] and "0.80 s" in messages[0] and "more such" not in messages[0]
    assert "0.70 s" in messages[1] and "2 more such pauses" in messages[1]
    assert mon.collections == [1, 1, 3]
    assert mon.figures()["max_pause_s"] == [0.001, 0.6, 1.2]
    assert mon.figures()["last_full_pause_s"] == 0.7
    assert mon.total_pause_s == pytest.approx(0.001 + 0.8 + 1.2 + 0.6 + 0.7)  # what raftnode.ticks subtracts


def test_a_stop_without_its_start_is_ignored():
    mon = GcPauseMonitor(clock=lambda: 5.0)
    mon._callback("stop", {"generation": 2})
    assert mon.collections == [0, 0, 0] and mon.last_full_pause_s is None


class _FakeGc:
    """What :class:`LongLivedFreeze` uses of ``gc``; ``blocks`` stands for the process's allocated blocks."""

    def __init__(self) -> None:
        self.callbacks: list = []
        self.tracked = 0  # objects a freeze would move to the permanent generation
        self.frozen = 0
        self.blocks = 0

    def freeze(self) -> None:
        self.frozen += self.tracked
        self.tracked = 0

    def unfreeze(self) -> None:
        self.tracked += self.frozen
        self.frozen = 0

    def full_collection(self, new: int = 0) -> None:
        self.tracked += new
        self.blocks += new
        for cb in list(self.callbacks):
            cb("start", {"generation": 2})
            cb("stop", {"generation": 2, "collected": 0, "uncollectable": 0})


def test_survivors_of_full_collections_are_frozen_and_thawed_by_time_and_growth():
    fake, now, leader = _FakeGc(), [0.0], [True]
    policy = LongLivedFreeze(lambda: not leader[0], growth=2.0, leader_growth=4.0, follower_thaw_s=300,
                             leader_thaw_s=3600, clock=lambda: now[0], blocks=lambda: fake.blocks,
                             gc_module=fake).start()
    fake.full_collection(500)  # examined everything: frozen, and the baseline
    assert fake.frozen == 500 and policy.baseline == 500 and policy.thaws == 0
    for _ in range(2):  # the next ones examine only the newcomers, which are frozen in turn
        fake.full_collection(400)
    assert fake.frozen == 1300 and fake.tracked == 0 and policy.thaws == 0  # 1,300 > 2 x 500: not a leader's valve
    fake.full_collection(900)  # 2,200 blocks > 4 x 500: thawed, so that the next one examines all
    assert policy.thaws == 1 and fake.frozen == 0 and fake.tracked == 2200
    fake.full_collection()  # the complete examination: a new baseline
    assert policy.baseline == 2200 and fake.frozen == 2200
    now[0] += 3599
    fake.full_collection(10)
    assert policy.thaws == 1  # a leader within its growth bound keeps its frozen set ...
    now[0] += 1
    fake.full_collection(10)
    assert policy.thaws == 2 and fake.frozen == 0  # ... for leader_thaw_s at most
    fake.full_collection()
    leader[0] = False
    now[0] += 299
    fake.full_collection(1)
    assert policy.thaws == 2
    now[0] += 1  # a follower thaws every follower_thaw_s
    fake.full_collection(1)
    assert policy.figures() == {"freezes": 10, "thaws": 3, "baseline_blocks": 2220}
    fake.full_collection()  # complete: baseline 2,222
    fake.full_collection(2223)  # a follower's valve is 2x
    assert policy.thaws == 4
    policy.stop()
    assert fake.callbacks == [] and fake.frozen == 0


def test_state_loaded_at_start_is_frozen_before_any_full_collection():
    fake = _FakeGc()
    policy = LongLivedFreeze(lambda: True, clock=lambda: 0.0, blocks=lambda: fake.blocks, gc_module=fake).start()
    fake.tracked = fake.blocks = 5000  # a snapshot and log loaded
    policy.freeze_now()
    assert fake.frozen == 5000 and policy.baseline == 5000 and policy.freezes == 1
    fake.full_collection(10)  # examines only the newcomers, and is not taken for a complete examination
    assert fake.frozen == 5010 and policy.baseline == 5000 and policy.thaws == 0


def test_young_collections_and_a_failing_check_leave_the_collector_alone(caplog):
    fake = _FakeGc()
    policy = LongLivedFreeze(lambda: 1 / 0, clock=lambda: 0.0, gc_module=fake).start()
    policy._callback("stop", {"generation": 1})
    assert policy.freezes == 0 and fake.frozen == 0
    fake.full_collection(10)
    with caplog.at_level(logging.ERROR, logger="webapp.gcpolicy"):
        fake.full_collection(10)  # may_pause raises: logged, nothing raised inside the collector
    assert "freeze policy failed" in caplog.text
    with pytest.raises(ValueError):
        LongLivedFreeze(lambda: True, growth=1.0)
    with pytest.raises(ValueError):
        LongLivedFreeze(lambda: True, leader_growth=0.5)


def test_a_real_full_collection_freezes_the_state_and_later_ones_examine_only_newcomers():
    """In a child process (a freeze there must not keep this test process's garbage)."""
    code = textwrap.dedent("""
        import gc, json
        from webapp.gcpolicy import LongLivedFreeze
        policy = LongLivedFreeze(lambda: False).start()
        gc.collect()  # the baseline: what the imports left
        state = [{"name": f"c{i}", "tasks": [i]} for i in range(100_000)]  # ~200,000 containers
        gc.collect()  # the blocks more than doubled: thawed ...
        gc.collect()  # ... and examined whole once more, then frozen
        after_first = {"frozen": gc.get_freeze_count(), "oldest": len(gc.get_objects(2))}
        class Cycle:
            pass
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        del a, b
        collected = gc.collect()  # young garbage cycles are still found
        state.append([1])
        gc.collect()
        print(json.dumps({**after_first, "collected": collected, "figures": policy.figures(),
                          "oldest_later": len(gc.get_objects(2))}))
    """)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["frozen"] >= 200_000  # the state left the collector's sight ...
    assert got["oldest"] < 1_000  # ... so the oldest generation a full collection examines is small
    assert got["collected"] >= 2  # the cycle made after the freeze was collected
    assert got["figures"]["freezes"] >= 5 and got["figures"]["thaws"] >= 1  # automatic ones may add to both
    assert got["oldest_later"] < 1_000


@pytest.mark.parametrize("raw, want", [("", None), ("50000,20,10", (50000, 20, 10)), (" 700, 10, 10 ", (700, 10, 10))])
def test_thresholds_come_from_the_environment(monkeypatch, raw, want):
    from webapp.gcpolicy import THRESHOLDS_ENV, thresholds_from_env

    monkeypatch.setenv(THRESHOLDS_ENV, raw)
    assert thresholds_from_env() == want


@pytest.mark.parametrize("raw", ["700,10", "a,b,c", "700,-1,10", "1,2,3,4"])
def test_bad_thresholds_are_refused_by_name(monkeypatch, raw):
    from webapp.gcpolicy import THRESHOLDS_ENV, thresholds_from_env

    monkeypatch.setenv(THRESHOLDS_ENV, raw)
    with pytest.raises(ValueError, match=THRESHOLDS_ENV):
        thresholds_from_env()



def test_a_collection_still_running_counts_in_the_pause_so_far():
    """A Raft tick that reads the pauses while another thread's collection (or its callback) runs sees it."""
    now = [10.0]
    mon = GcPauseMonitor(clock=lambda: now[0])
    mon._callback("start", {"generation": 2})
    now[0] += 0.3
    assert mon.paused_so_far() == pytest.approx(0.3) and mon.total_pause_s == 0.0
    mon._callback("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    now[0] += 5.0
    assert mon.paused_so_far() == pytest.approx(0.3) == mon.total_pause_s
