"""A worker process joins before it runs anything: its incarnation rides on its heartbeats, and views
that reach it by another path before a heartbeat of its own was answered are dropped (they may be older
than the grant that fences its previous process)."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.runtime.worker import Worker


class JoinClient:
    """Stands in for the control plane: answers heartbeats with a view of ``generation``."""

    def __init__(self, generation: int):
        self.generation = generation
        self.members: list[dict] = []

    def heartbeat(self, member, running, timeout=2.0):
        self.members.append(dict(member))
        return {"worker_id": "w1", "generation": self.generation, "epoch": 1, "connectors": {}, "tasks": {},
                "digest": "d", "session_timeout_ms": 5000}


def view(generation: int) -> dict:
    return {"worker_id": "w1", "generation": generation, "epoch": 1, "connectors": {}, "tasks": {}, "digest": "v"}


def make_worker(tmp_path, client) -> Worker:
    return Worker(worker_id="w1", client=client, member={"rest_address": "h:1"}, kafka_config={},
                  data_dir=str(tmp_path), spark_factory=lambda: None, heartbeat_interval=3600)


def heartbeat_once(w: Worker, client: JoinClient) -> None:
    """Run the heartbeat loop until its first answer was applied, then stop it (the reconcile thread is not
    started: applied views stay pending, where the test reads them). Stopping once the client had only
    seen the request raced the loop: a stopping worker drops the view it is handed."""
    answered = threading.Event()

    def apply_assignment(view, via="celery"):
        Worker.apply_assignment(w, view, via=via)
        if via == "heartbeat":
            answered.set()

    w.apply_assignment = apply_assignment
    thread = threading.Thread(target=w._heartbeat_loop, daemon=True)
    thread.start()
    wait_for(answered.is_set, 10, interval=0.01, what="a heartbeat's answer applied")
    w._stop.set()
    thread.join(10)
    w._stop.clear()
    del w.apply_assignment


def test_views_by_celery_wait_for_this_process_to_join(tmp_path):
    client = JoinClient(generation=7)
    w = make_worker(tmp_path, client)
    w.apply_assignment(view(3), via="celery")  # queued for an earlier process of this worker
    assert w._pending is None and w.first_delivered_by["celery"] == 0
    heartbeat_once(w, client)
    assert client.members[0] == {"rest_address": "h:1", "incarnation": w.incarnation}
    assert w._pending["generation"] == 7  # the heartbeat's own answer
    w.apply_assignment(view(8), via="celery")
    assert w._pending["generation"] == 8  # joined: Celery is the fast path again
    # cut off from the coordinator for longer than a session: fenced, and only a heartbeat answer counts again
    w.fence_all()
    w.apply_assignment(view(9), via="celery")
    assert w._pending["generation"] == 8


def test_each_process_of_a_worker_has_its_own_incarnation(tmp_path):
    first, second = (make_worker(tmp_path, JoinClient(1)) for _ in range(2))
    assert first.incarnation != second.incarnation and len(first.incarnation) == 32
    assert first.member["incarnation"] == first.incarnation


class BrokenClient:
    """A control plane client whose every call fails inside this process (not a transport error)."""

    def heartbeat(self, member, running, timeout=2.0):
        raise TypeError("list indices must be integers or slices, not tuple")


def test_a_heartbeat_failing_inside_the_process_still_fences_after_the_session_timeout(tmp_path):
    w = make_worker(tmp_path, BrokenClient())
    fenced = threading.Event()

    def fence_all():
        w.connectors.clear()
        fenced.set()

    w.fence_all = fence_all
    w.connectors["c1"] = {"generation": 1}  # running work of a generation the coordinator will reassign
    w.session_timeout = 5.0
    w._last_contact -= 6.0  # silent past the session timeout
    assert run_loop_until(w, fenced.is_set, 10)
    assert not w.connectors


class UnreachableClient:
    """A control plane that does not answer (a transport error, not this process's own failure)."""

    def __init__(self) -> None:
        self.calls = 0

    def heartbeat(self, member, running, timeout=2.0):
        from webapp.runtime.client import ControlPlaneUnavailable

        self.calls += 1
        raise ControlPlaneUnavailable("127.0.0.1:8083: connection refused")


def run_loop_until(w: Worker, condition, timeout: float) -> bool:
    """Run ``w``'s heartbeat loop until ``condition()`` or ``timeout`` s; whether the condition held."""
    thread = threading.Thread(target=w._heartbeat_loop, daemon=True)
    thread.start()
    try:
        return bool(wait_for(condition, timeout, interval=0.01, what="the condition"))
    except TimeoutError:
        return False
    finally:
        w._stop.set()
        thread.join(10)


def test_heartbeats_failing_inside_the_process_for_three_sessions_ask_for_a_new_process_once(tmp_path):
    broken: list[str] = []
    w = Worker(worker_id="w1", client=BrokenClient(), member={"rest_address": "h:1"}, kafka_config={},
               data_dir=str(tmp_path), spark_factory=lambda: None, heartbeat_interval=3600, on_broken=broken.append)
    w.session_timeout = 0.2  # retried every 0.2 s after a failure: called past 3 x 0.2 s of them
    assert run_loop_until(w, lambda: broken, 10)
    assert broken == ["TypeError: list indices must be integers or slices, not tuple"]
    assert w.on_broken is None  # once


def test_an_unreachable_coordinator_is_not_this_process_s_fault(tmp_path):
    broken: list[str] = []
    client = UnreachableClient()
    w = Worker(worker_id="w1", client=client, member={"rest_address": "h:1"}, kafka_config={},
               data_dir=str(tmp_path), spark_factory=lambda: None, heartbeat_interval=3600, on_broken=broken.append)
    w.session_timeout = 0.2
    # 8 failed heartbeats, ~1.4 s: past 3 session timeouts
    assert run_loop_until(w, lambda: client.calls >= 8, 10)
    assert broken == [] and w.on_broken is not None


def test_restart_agent_ends_its_own_process_with_sigterm(tmp_path):
    """What the agent passes as ``on_broken``: its process gets SIGTERM (Celery's warm shutdown there; the
    node's watchdog then starts a new agent)."""
    import os
    import signal
    import subprocess
    import sys

    code = ("import django; django.setup()\n"
            "from webapp.runtime.agent import restart_agent\n"
            "restart_agent('TypeError: broken')\n"
            "import time; time.sleep(30)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE",
                                                                                       "tools.settings")})
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-2000:]
    assert "restarting the agent: every heartbeat failed inside this process (TypeError: broken)" in proc.stderr


def test_a_failing_fence_does_not_end_the_loop_before_the_restart(tmp_path):
    broken: list[str] = []
    w = Worker(worker_id="w1", client=BrokenClient(), member={"rest_address": "h:1"}, kafka_config={},
               data_dir=str(tmp_path), spark_factory=lambda: None, heartbeat_interval=3600, on_broken=broken.append)

    def fence_all():
        raise OSError("the process is broken here too")

    w.fence_all = fence_all
    w.connectors["c1"] = {"generation": 1}
    w.session_timeout = 0.2
    w._last_contact -= 1.0
    assert run_loop_until(w, lambda: broken, 10)


def test_a_failing_fence_after_a_transport_error_does_not_end_the_loop(tmp_path):
    """The control plane unreachable past the session timeout and the fence failing too: the loop goes on
    trying (and fencing) instead of ending with the work left running."""
    client = UnreachableClient()
    w = make_worker(tmp_path, client)
    fences: list[int] = []

    def fence_all():
        fences.append(client.calls)
        raise OSError("the process is broken here too")

    w.fence_all = fence_all
    w.connectors["c1"] = {"generation": 1}
    w.session_timeout = 0.2
    w._last_contact -= 1.0
    assert run_loop_until(w, lambda: len(fences) >= 3, 10)  # tried again after each failed fence
