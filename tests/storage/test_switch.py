"""Online metadata store switching: raft → PostgreSQL → MariaDB → raft under load, aborts, store outages.

The parts of a node that take part (Raft member, :class:`StoreSet`,
:class:`StoreRouter`, :class:`SwitchManager`) run in-process on real servers;
the load is many threads committing fenced offsets, statuses and configs
through the router as the internal REST endpoints do. A log of every
acknowledged write is the reference the final store is checked against.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest

from tools.launcher import wait_for
from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.kafka.embedded import free_port
from webapp.storage.base import OffsetCommit, StoreUnavailable
from webapp.storage.raft import RaftMetadataStore
from webapp.storage.switch import StoreRouter, StoreSet, SwitchManager, canonical, snapshot_digest

from .conftest import MARIADB_URL, PG_URL, drop_database, set_pg_connections, start_raft

WORKER = "w1"


@dataclass
class Parts:
    raft: object
    router: StoreRouter
    manager: SwitchManager
    dbs: dict[str, tuple[str, str]] = field(default_factory=dict)  # store name -> (kind, database)

    def assign(self, names: list[str]) -> int:
        generation = self.raft.state.assignment["generation"] + 1
        self.raft.propose("_set_assignment", self.raft.term, generation, {n: WORKER for n in names},
                          {f"{n}-0": WORKER for n in names})
        return generation

    def switch(self, target: str, timeout: float = 120.0) -> dict:
        self.manager.begin(target)
        return self.wait_done(timeout)

    def wait_done(self, timeout: float = 120.0) -> dict:
        wait_for(lambda: self.raft.state.switch["phase"] in ("completed", "aborted"), timeout,
                 what="the switch to end")
        return dict(self.raft.state.switch)


@pytest.fixture
def parts(tmp_path, django_db_blocker):
    suffix = uuid.uuid4().hex[:8]
    dbs = {"pg": ("postgresql", f"raftconnect_sw_{suffix}"), "maria": ("mysql", f"raftconnect_sw_{suffix}")}
    urls = {"pg": PG_URL.format(db=dbs["pg"][1]), "maria": MARIADB_URL.format(db=dbs["maria"][1]),
            # nothing listens here: a target that is down from the start
            "down": f"postgresql://postgres:s3cret-pw@127.0.0.1:{free_port()}/nowhere"}
    raft = start_raft(str(tmp_path / "raft"))
    stores = StoreSet(RaftMetadataStore(raft), urls, fence=raft.state.check_fence)
    router = StoreRouter(raft, stores)
    manager = SwitchManager(raft, router, progress_interval=0.2)
    manager.start()
    with django_db_blocker.unblock():
        try:
            yield Parts(raft, router, manager, dbs)
        finally:
            manager.stop()
            stores.close()
            raft.destroy()
            for kind, db in dbs.values():
                drop_database(kind, db)


class Load:
    """Threads writing through the router; ``acked`` logs the latest acknowledged value of everything written."""

    def __init__(self, parts: Parts, connectors: int, generation: int):
        self.parts = parts
        self.names = [f"load-{i}" for i in range(connectors)]
        self.generation = generation
        self.stop_event = threading.Event()
        self.offsets: dict[tuple[str, int], int] = {}
        self.statuses: dict[str, str] = {}
        self.configs: dict[str, str] = {}
        self.errors: list[BaseException] = []
        self.commits = 0
        self.longest_write = 0.0
        self.longest_at = 0.0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._offsets, args=(n,), daemon=True) for n in self.names]
        self.threads.append(threading.Thread(target=self._meta, daemon=True))

    def start(self) -> "Load":
        self.started = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        self.elapsed = time.monotonic() - self.started

    def _timed(self, fn) -> None:
        t0 = time.monotonic()
        fn()
        took = time.monotonic() - t0
        with self._lock:
            if took > self.longest_write:
                self.longest_write, self.longest_at = took, t0

    def _offsets(self, name: str) -> None:
        router, n = self.parts.router, 0
        try:
            while not self.stop_event.is_set():
                n += 1
                batch = [SourceOffset({"partition": p}, {"position": n}) for p in (0, 1)]
                self._timed(lambda: router.commit_offsets(ConnectorTaskId(name, 0), batch, worker_id=WORKER,
                                                          generation=self.generation))
                with self._lock:
                    self.offsets[(name, 0)] = self.offsets[(name, 1)] = n
                    self.commits += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def _meta(self) -> None:
        router, k = self.parts.router, 0
        try:
            while not self.stop_event.is_set():
                k += 1
                name = self.names[k % len(self.names)]
                state = "RUNNING" if k % 2 else "PAUSED"
                self._timed(lambda: router.put_status(name, 0, {"state": state, "trace": f"t{k}"},
                                                      worker_id=WORKER, generation=self.generation))
                self._timed(lambda: router.put_connector_config(
                    name, {"connector.class": "FileStreamSource", "version": str(k)}))
                with self._lock:
                    self.statuses[name] = f"{state}/t{k}"
                    self.configs[name] = str(k)
        except BaseException as exc:  # noqa: BLE001
            self.errors.append(exc)

    def check(self, store) -> None:
        """Every acknowledged value is in ``store`` with its latest value."""
        for name in self.names:
            got = {o.partition["partition"]: o.offset["position"] for o in store.get_offsets(name)}
            assert got == {0: self.offsets[(name, 0)], 1: self.offsets[(name, 1)]}, name
            rec = store.get_connector(name)
            assert rec is not None and rec.config.get("version") == self.configs.get(name, rec.config.get("version"))
            if name in self.statuses:
                st = store.get_statuses(name)["tasks"]["0"]
                assert f"{st['state']}/{st['trace']}" == self.statuses[name], name


def start_load(parts: Parts, connectors: int = 24) -> Load:
    load = Load(parts, connectors, 0)
    for name in load.names:
        parts.router.put_connector_config(name, {"connector.class": "FileStreamSource", "version": "0"})
        parts.router.put_task_configs(name, [{"task": "0"}], worker_id=None, generation=0)
    load.generation = parts.assign(load.names)
    load.start()
    wait_for(lambda: load.commits >= 200 or load.errors, 30, what="the load to start")
    return load


def test_switch_raft_postgresql_mariadb_raft_under_load_loses_nothing(parts, capsys):
    # metadata the load does not touch: deleted connectors keep their offsets, and a stopped connector
    parts.router.put_connector_config("kept-offsets", {"connector.class": "FileStreamSource"})
    parts.router.alter_offsets("kept-offsets", [SourceOffset({"file": "a"}, {"position": 7})])
    parts.router.remove_connector_config("kept-offsets")
    parts.router.put_connector_config("stopped", {"connector.class": "FileStreamSink"}, target_state="STOPPED")
    load = start_load(parts)
    reports = []
    try:
        for target in ("pg", "maria", "raft"):
            before = load.commits
            sw = parts.switch(target)
            assert sw["phase"] == "completed", sw
            assert parts.raft.state.active_store == target
            assert parts.raft.state.previous_store == sw["source"]
            assert load.commits > before, "writes stopped during the switch"
            digest = sw["progress"]["digest"]
            assert digest["offsets"]["count"] >= 2 * len(load.names) + 1
            reports.append((sw["source"], target, sw["progress"]["duration_s"], sw["progress"]["commit_stall_ms"]))
    finally:
        load.stop()
    assert not load.errors, load.errors
    load.check(parts.router)
    active = parts.router.active
    assert active.name == "raft"
    assert [o.offset for o in active.get_offsets("kept-offsets")] == [{"position": 7}]
    assert active.get_connector("kept-offsets") is None
    assert active.get_connector("stopped").target_state == "STOPPED"
    # the stores switched away from are read-only now: a late write there is refused
    old = parts.router.stores.get("maria")
    with pytest.raises(Exception, match="read-only"):
        old.put_target_state("stopped", "STARTED")
    with capsys.disabled():
        rate = load.commits / load.elapsed
        print(f"\n  store switch under load: {load.commits} offset commits in {load.elapsed:.1f} s "
              f"({rate:.0f}/s), longest single write {load.longest_write * 1000:.0f} ms")
        for source, target, duration, stall in reports:
            print(f"  {source} -> {target}: {duration:.2f} s, commit stall {stall:.0f} ms")


def test_metadata_holding_nul_survives_switches_through_every_backend(parts):
    """A config, a task's failure trace and an offset holding NUL (U+0000) go raft -> PostgreSQL ->
    MariaDB -> raft unchanged. PostgreSQL's ``text``/``jsonb`` cannot hold NUL: before its fields
    escaped it, the copy into PostgreSQL failed and the switch aborted."""
    router = parts.router
    config = {"connector.class": "FileStreamSource", "x\x00": "a\x00b \uffff0"}
    router.put_connector_config("nul", config)
    router.put_task_configs("nul", [{"task": "\x00"}], worker_id=None, generation=0)
    generation = parts.assign(["nul"])
    router.put_status("nul", 0, {"state": "FAILED", "trace": "bad byte \x00 in row"}, worker_id=WORKER,
                      generation=generation)
    router.commit_offsets(ConnectorTaskId("nul", 0), [SourceOffset({"key": "\x00"}, {"last": "z\x00"})],
                          worker_id=WORKER, generation=generation)
    expected = canonical(router.active.export_name("nul"))
    for target in ("pg", "maria", "raft"):
        sw = parts.switch(target)
        assert sw["phase"] == "completed", sw
        assert canonical(router.active.export_name("nul")) == expected, target
    assert router.get_connector("nul").config == config
    assert router.get_statuses("nul")["tasks"]["0"]["trace"] == "bad byte \x00 in row"


@pytest.mark.parametrize("target", ["maria", "raft"])
def test_a_late_copy_landing_after_a_switch_from_a_relational_store_moves_nothing_back(parts, target):
    """PostgreSQL -> MariaDB or Raft: the copied offsets keep the numbers of the commits that wrote them (the
    MariaDB rows' columns; on Raft ``offset_orders``, as its task floors know nothing of the commits
    PostgreSQL took), so a late copy of an older commit of the task, landing in the new store after the
    switch, leaves them; the task's next commit applies."""
    router = parts.router
    name = f"late-{target}"
    router.put_connector_config(name, {"connector.class": "FileStreamSource"})
    router.put_task_configs(name, [{"task": "0"}], worker_id=None, generation=0)
    assert parts.switch("pg")["phase"] == "completed"
    generation = parts.assign([name])
    task = ConnectorTaskId(name, 0)

    def commit(seq: int, position: int):
        return router.commit_offsets_many([OffsetCommit(task, [SourceOffset({"f": "a"}, {"pos": position})],
                                                        generation, seq)], worker_id=WORKER)

    assert commit(5, 1) == [None] and commit(6, 2) == [None]
    assert parts.switch(target)["phase"] == "completed"
    commit(5, 1)  # the late copy
    assert [o.offset for o in router.active.get_offsets(name)] == [{"pos": 2}]
    assert commit(7, 3) == [None]
    assert [o.offset for o in router.active.get_offsets(name)] == [{"pos": 3}]
    if target != "raft":
        assert parts.switch("raft")["phase"] == "completed"


def test_a_switch_recorded_as_completed_does_not_block_the_next_one_while_its_thread_returns(parts, monkeypatch):
    """Between ``completed`` in Raft and the end of the switch's thread, a new switch is not refused (409)."""
    finish, returned = parts.manager._finish, threading.Event()

    def slow_to_return(*args, **kwargs):
        finish(*args, **kwargs)  # records completed
        time.sleep(0.5)  # the thread's way out, made long
        returned.set()

    monkeypatch.setattr(parts.manager, "_finish", slow_to_return)
    assert parts.switch("pg")["phase"] == "completed"
    assert not returned.is_set()
    sw = parts.switch("raft")
    assert returned.is_set() and sw["phase"] == "completed" and sw["target"] == "raft"


def test_switch_to_a_store_that_is_down_aborts_and_keeps_the_source(parts):
    parts.router.put_connector_config("c", {"connector.class": "FileStreamSource"})
    before = snapshot_digest(parts.router.active)
    sw = parts.switch("down", timeout=60)
    assert sw["phase"] == "aborted"
    assert "not usable" in sw["error"] and "s3cret-pw" not in sw["error"]
    assert parts.raft.state.active_store == "raft"
    parts.router.put_target_state("c", "PAUSED")  # writes still go to the source
    assert parts.router.get_connector("c").target_state == "PAUSED"
    assert snapshot_digest(parts.router.active)["config"]["count"] == before["config"]["count"]


def test_target_going_down_during_copy_aborts_cleanly(parts):
    load = start_load(parts, connectors=8)
    try:
        parts.manager.hold_seconds = 3.0
        parts.manager.begin("pg")
        wait_for(lambda: parts.raft.state.switch["phase"] == "copy", 60, what="the copy phase")
        set_pg_connections(parts.dbs["pg"][1], allowed=False)
        sw = parts.wait_done(60)
    finally:
        load.stop()
        set_pg_connections(parts.dbs["pg"][1], allowed=True)
    assert sw["phase"] == "aborted", sw
    assert parts.raft.state.active_store == "raft"
    assert not load.errors, load.errors  # the source kept taking every write
    load.check(parts.router)


def test_active_store_down_fails_writes_with_503_and_recovers(parts):
    assert parts.switch("pg")["phase"] == "completed"
    parts.router.put_connector_config("c", {"connector.class": "FileStreamSource"})
    parts.router.alter_offsets("c", [SourceOffset({"p": 0}, {"o": 1})])
    set_pg_connections(parts.dbs["pg"][1], allowed=False)
    try:
        with pytest.raises(StoreUnavailable) as err:
            parts.router.alter_offsets("c", [SourceOffset({"p": 0}, {"o": 2})])
        assert err.value.http_status == 503
    finally:
        set_pg_connections(parts.dbs["pg"][1], allowed=True)

    def write_ok() -> bool:
        try:
            parts.router.alter_offsets("c", [SourceOffset({"p": 0}, {"o": 3})])
            return True
        except StoreUnavailable:
            return False

    wait_for(write_ok, 30, what="writes to recover")
    assert [o.offset for o in parts.router.get_offsets("c")] == [{"o": 3}]
    assert parts.router.get_connector("c") is not None


def test_rollback_aborts_a_running_switch_and_then_switches_back(parts):
    parts.router.put_connector_config("c", {"connector.class": "FileStreamSource"})
    parts.manager.hold_seconds = 30.0
    parts.manager.begin("pg")
    wait_for(lambda: parts.raft.state.switch["phase"] == "prepare", 30, what="prepare")
    parts.manager.rollback()
    sw = parts.wait_done(30)
    assert sw["phase"] == "aborted" and "operator" in sw["error"]
    assert parts.raft.state.active_store == "raft"
    parts.manager.hold_seconds = 0.0
    assert parts.switch("pg")["phase"] == "completed"
    parts.router.put_target_state("c", "PAUSED")
    parts.manager.rollback()  # back to the previous store, with the write made on pg
    assert parts.wait_done()["phase"] == "completed"
    assert parts.raft.state.active_store == "raft"
    assert parts.router.get_connector("c").target_state == "PAUSED"


def test_a_batch_of_statuses_marks_every_connector_it_names_for_the_copy(parts):
    """put_statuses writes several connectors at once: while a switch mirrors, each must be copied again."""
    from webapp.storage.base import StatusReport

    router = parts.router
    names = [f"s-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for n in names:
        router.put_connector_config(n, {"connector.class": "X"})
    generation = parts.assign(names)
    router.start_mirror(router.active)  # what a switch's copy phase does (only the marks matter here)
    try:
        outcomes = router.put_statuses([StatusReport(n, 0, {"state": "RUNNING", "trace": None}, generation)
                                        for n in names[:2]], worker_id=WORKER)
        assert outcomes == [None, None]
        assert router.take_pending() == {names[0]: {"statuses"}, names[1]: {"statuses"}}
    finally:
        router.stop_mirror()
    assert router.get_statuses(names[1])["tasks"]["0"]["state"] == "RUNNING"


def test_a_batch_of_offset_commits_marks_every_connector_it_names_for_the_copy(parts):
    """commit_offsets_many writes several connectors at once: while a switch mirrors, each must be copied again."""
    from webapp.plugin import ConnectorTaskId, SourceOffset
    from webapp.storage.base import OffsetCommit

    router = parts.router
    names = [f"o-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for n in names:
        router.put_connector_config(n, {"connector.class": "X"})
    generation = parts.assign(names)
    router.start_mirror(router.active)
    try:
        outcomes = router.commit_offsets_many([OffsetCommit(ConnectorTaskId(n, 0), [SourceOffset({"p": n}, {"o": 1})],
                                                            generation) for n in names[:2]], worker_id=WORKER)
        assert outcomes == [None, None]
        assert router.take_pending() == {names[0]: {"offsets"}, names[1]: {"offsets"}}
    finally:
        router.stop_mirror()
    assert [dict(o.offset) for o in router.get_offsets(names[1])] == [{"o": 1}]
