"""Kafka clients shared by a worker's tasks: the end-offset watcher, cached partition counts, pooled producers."""
from __future__ import annotations

import threading
import uuid

from confluent_kafka import Producer

from tools.launcher import wait_for
from webapp.kafka.clients import EndOffsetWatcher, ensure_topic_cached, partition_count_cached
from webapp.kafka.spark_io import PRODUCER_POOL, drop_pooled_producers, produce_function
from webapp.kafka.topics import ensure_topic


def test_a_watcher_wakes_only_the_tasks_whose_partitions_got_records(kafka_broker):
    cfg = kafka_broker.client_config()
    topic = f"watch-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 2)
    watcher = EndOffsetWatcher(cfg, interval=0.05)
    woken = {"a": threading.Event(), "b": threading.Event()}
    try:
        watcher.watch("a", [(topic, 0)], woken["a"].set)
        watcher.watch("b", [(topic, 1)], woken["b"].set)
        wait_for(lambda: not watcher.has_records({(topic, 0): 0, (topic, 1): 0}), 30,
                 what="the watcher to learn both partitions are empty")
        woken["a"].clear()
        woken["b"].clear()
        p = Producer(cfg)
        p.produce(topic, b"x", partition=1)
        assert p.flush(30) == 0
        assert woken["b"].wait(30)
        assert watcher.has_records({(topic, 1): 0}) and not watcher.has_records({(topic, 1): 1})
        assert not woken["a"].is_set()  # partition 0 did not move
        assert watcher.has_records({(topic, 0): None, ("never-seen", 0): 5})  # unknown: the task looks itself
        watcher.unwatch("a")
        watcher.unwatch("b")
        wait_for(lambda: watcher._thread is None, 30, what="the watcher thread to end with nothing to watch")
    finally:
        watcher.stop()


def test_partition_counts_are_cached_and_a_missing_topic_is_asked_again(kafka_broker):
    cfg = kafka_broker.client_config()
    topic = f"count-{uuid.uuid4().hex[:8]}"
    assert partition_count_cached(cfg, topic, missing_max_age=0.0) is None
    ensure_topic(cfg, topic, 3)
    assert partition_count_cached(cfg, topic, missing_max_age=0.0) == 3


def test_a_topic_created_here_is_seen_at_once_by_a_task_told_it_was_missing(kafka_broker):
    """A source task creates its topic; the sink task of the same worker must not trust the earlier 'missing'."""
    cfg = kafka_broker.client_config()
    topic = f"created-{uuid.uuid4().hex[:8]}"
    assert partition_count_cached(cfg, topic) is None  # remembered as missing for a second
    assert ensure_topic_cached(cfg, topic, 2) == 2
    assert partition_count_cached(cfg, topic) == 2  # not the cached None


def test_concurrent_produce_functions_share_a_pool_of_producers(kafka_broker):
    """Two pieces producing at once each take a producer; both go back to the pool, and are reused."""
    import sys

    import pyarrow as pa

    cfg = kafka_broker.client_config()
    topic = f"pool-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 1)
    for old in list(sys.__dict__.get("_raftconnect_kafka_producers", {})):  # earlier tests' configs: not ours
        for e in sys.__dict__["_raftconnect_kafka_producers"].pop(old):
            e["producer"].flush(1)
    fn = produce_function(topic, cfg)
    batch = pa.record_batch([pa.array([b"v"] * 100, pa.binary())], names=["value"])
    gate = threading.Barrier(2, timeout=30)

    def piece():
        def batches():
            gate.wait()  # both pieces hold a producer at this point
            yield batch
        return [b.column(0)[0].as_py() for b in fn(batches())]

    results = []
    threads = [threading.Thread(target=lambda: results.append(piece())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [[100], [100]]
    pools = sys.__dict__["_raftconnect_kafka_producers"]
    idle = [entries for entries in pools.values() if len(entries) >= 2]
    assert idle, "both producers went back to the pool"
    producers = {id(e["producer"]) for entries in idle for e in entries}
    assert [b.column(0)[0].as_py() for b in fn(iter([batch]))] == [100]
    assert {id(e["producer"]) for entries in pools.values() for e in entries} == producers  # reused, none new


def test_the_watcher_holds_its_refreshes_to_a_cpu_share_and_lends_its_figures():
    """A refresh that costs 10 ms of CPU is not repeated every 10 ms interval: at most CPU_SHARE_FLOWING of a
    core goes to refreshing; what it learnt answers end_offsets() without another request."""
    import time

    watcher = EndOffsetWatcher({"bootstrap.servers": "127.0.0.1:1"}, interval=0.01)
    calls = []

    def costly(tps):
        calls.append(time.monotonic())
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.01:
            pass
        return {tp: 7 for tp in tps}

    watcher._list_offsets = costly
    try:
        watcher.watch("a", [("t", 0), ("t", 1)], lambda: None)
        wait_for(lambda: len(calls) >= 3, 30, what="three refreshes")
        first = len(calls)
        wait_for(lambda: len(calls) >= first + 4, 30, what="four more refreshes")  # it keeps refreshing
        gaps = [b - a for a, b in zip(calls[first - 1:], calls[first:])]
        # each refresh costs 10 ms of CPU: the next starts at least 10 ms / CPU_SHARE_FLOWING (0.1 s) later, not
        # after the 10 ms interval (a loaded machine only makes the gaps longer)
        assert min(gaps) >= 0.01 / EndOffsetWatcher.CPU_SHARE_FLOWING - 0.005, gaps
        before = len(calls)
        assert watcher.end_offsets([("t", 0), ("t", 1)], max_age=60) == {("t", 0): 7, ("t", 1): 7}
        assert len(calls) == before  # served from the last refresh
    finally:
        watcher.stop()


def test_tasks_finding_the_count_cache_expired_together_send_one_metadata_request(kafka_broker, monkeypatch):
    import webapp.kafka.clients as clients

    cfg = kafka_broker.client_config()
    topic = f"single-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 2)
    real = clients.shared_admin_client(cfg)
    requests = []

    class Counting:
        def list_topics(self, *args, **kwargs):
            requests.append(1)
            return real.list_topics(*args, **kwargs)

    monkeypatch.setattr(clients, "shared_admin_client", lambda _cfg: Counting())
    monkeypatch.setattr(clients, "_counts", {})
    gate = threading.Barrier(8, timeout=30)
    counts = []

    def task():
        gate.wait()
        counts.append(partition_count_cached(cfg, topic))

    threads = [threading.Thread(target=task) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert counts == [2] * 8
    assert len(requests) == 1


def test_a_producer_that_wrote_to_many_topics_is_retired_from_the_pool(kafka_broker, monkeypatch):
    """Per-topic metadata would otherwise grow with every topic a long-lived worker ever wrote to."""
    import sys

    import pyarrow as pa

    import webapp.kafka.spark_io as spark_io

    monkeypatch.setattr(spark_io, "MAX_TOPICS_PER_PRODUCER", 2)
    cfg = {**kafka_broker.client_config(), "client.id": f"retire-{uuid.uuid4().hex[:6]}"}  # a pool of its own
    batch = pa.record_batch([pa.array([b"v"], pa.binary())], names=["value"])
    pools = sys.__dict__.setdefault("_raftconnect_kafka_producers", {})
    used = []
    for i in range(3):
        topic = f"retire-{uuid.uuid4().hex[:8]}"
        ensure_topic(cfg, topic, 1)
        assert [b.column(0)[0].as_py() for b in produce_function(topic, cfg)(iter([batch]))] == [1]
        mine = [e for key, entries in pools.items() if "retire-" in key for e in entries]
        used.append([id(e["producer"]) for e in mine])
    assert len(used[0]) == 1 and used[1] == used[0]  # one pooled producer, reused for a second topic
    assert used[2] == []  # a third topic: retired instead of going back to the pool


def test_a_sink_parks_only_after_a_read_found_nothing_and_until_an_end_offset_moves():
    from webapp.kafka.clients import SinkParking

    watcher = EndOffsetWatcher({"bootstrap.servers": "127.0.0.1:1"}, interval=60)
    watcher._list_offsets = lambda tps: {}
    parking = SinkParking(watcher, "sink-0", lambda: None)
    tps = [("t", 0), ("t", 1)]
    try:
        assert not parking.nothing_new(tps)  # end offsets unknown: read
        watcher._ends.update({("t", 0): 5, ("t", 1): 3})
        assert not parking.nothing_new(tps)  # nothing found empty yet: read
        parking.found_nothing()
        assert parking.nothing_new(tps) and parking.idle_delay() == SinkParking.SAFETY_NET_SECONDS
        watcher._ends[("t", 1)] = 4  # a record arrived
        assert not parking.nothing_new(tps) and parking.idle_delay() is None
        parking.moved()
        assert not parking.nothing_new(tps)  # after records moved: read again
    finally:
        parking.stop()
        watcher.stop()
    assert "sink-0" not in watcher._watches
    assert not SinkParking(None, "x", None).nothing_new(tps)  # outside a worker: never parks


def test_a_record_over_a_megabyte_needs_and_gets_connects_max_request_size(kafka_broker):
    """``producer.override.max.request.size`` (Connect's name) raises librdkafka's message.max.bytes."""
    import pyarrow as pa
    import pytest

    from webapp.kafka.spark_io import _CONSUMER_ONLY_PREFIXES, _client_config

    cfg = kafka_broker.client_config()
    topic = f"big-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 1)
    big = pa.record_batch([pa.array([b"x" * 2_000_000], pa.binary())], names=["value"])
    with pytest.raises(RuntimeError, match="max.request.size"):  # librdkafka's default limit: 1,000,000 bytes
        list(produce_function(topic, cfg)(iter([big])))
    raised = {"max.request.size": "4000000"}
    assert _client_config(cfg, {}, _CONSUMER_ONLY_PREFIXES, raised)["message.max.bytes"] == "4000000"
    assert [b.column(0)[0].as_py() for b in produce_function(topic, cfg, producer_config=raised)(iter([big]))] == [1]


def test_partition_reader_gives_each_records_own_offset_across_transaction_markers(kafka_broker):
    """Offsets are taken as a range when a batch is contiguous; commit markers leave gaps that must show."""
    import pyarrow as pa

    from webapp.kafka.spark_io import TopicPartitionRange, partition_reader

    cfg = kafka_broker.client_config()
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 1)
    p = Producer({**cfg, "transactional.id": f"reader-{topic}"})
    p.init_transactions(30)
    for j in range(3):  # each commit writes a control record, which consumers never see
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"v{j}{i}".encode(), partition=0)
        p.commit_transaction(30)
    plain = Producer(cfg)
    for i in range(3):
        plain.produce(topic, f"plain{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    reader = partition_reader([TopicPartitionRange(topic, 0, 0, 100)], cfg)
    got = pa.Table.from_batches(list(reader(iter([pa.record_batch([pa.array([0], pa.int64())], names=["id"])]))))
    values = [v.decode() for v in got.column("value").to_pylist()]
    offsets = got.column("kafka_offset").to_pylist()
    assert values == [f"v{j}{i}" for j in range(3) for i in range(4)] + ["plain0", "plain1", "plain2"]
    # 4 records then a marker, three times: 0-3, 5-8, 10-13, then the plain records from 15
    assert offsets == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17]
    assert set(got.column("kafka_topic").to_pylist()) == {topic} and set(got.column("kafka_partition").to_pylist()) == {0}


def test_the_producer_pool_evicts_the_least_recently_used_config(kafka_broker):
    """Five configs in a pool bounded at four: the one used longest ago goes, the one just used stays."""
    import sys

    import pyarrow as pa

    cfg = kafka_broker.client_config()
    topic = f"lru-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 1)
    batch = pa.record_batch([pa.array([b"v"], pa.binary())], names=["value"])
    drop_pooled_producers()  # start from an empty pool (earlier tests of this process left theirs)
    pools = sys.__dict__.setdefault(PRODUCER_POOL, {})
    configs = [{**cfg, "client.id": f"lru-{i}"} for i in range(5)]
    fns = [produce_function(topic, c) for c in configs]
    for fn in fns[:4]:
        assert [b.column(0)[0].as_py() for b in fn(iter([batch]))] == [1]
    first_key = next(iter(pools))
    assert [b.column(0)[0].as_py() for b in fns[0](iter([batch]))] == [1]  # config 0 used again: now the newest
    assert [b.column(0)[0].as_py() for b in fns[4](iter([batch]))] == [1]  # a fifth config: one must go
    assert len(pools) == 4 and first_key in pools  # config 0 stayed; config 1 (least recently used) went
    assert not any("lru-1" in key for key in pools)


def test_dropping_pooled_producers_closes_those_of_one_broker_or_all(kafka_broker):
    """The pool after a broker is gone: its producers are closed, another broker's stay (then all go)."""
    import sys

    import pyarrow as pa

    cfg = kafka_broker.client_config()
    topic = f"drop-{uuid.uuid4().hex[:8]}"
    ensure_topic(cfg, topic, 1)
    batch = pa.record_batch([pa.array([b"v"], pa.binary())], names=["value"])
    drop_pooled_producers()
    pools = sys.__dict__.setdefault(PRODUCER_POOL, {})
    assert list(produce_function(topic, {**cfg, "client.id": "drop-a"})(iter([batch])))
    # a second config naming other servers: built only (a producer connects lazily), as a stopped broker's would be
    gone = {**cfg, "bootstrap.servers": "127.0.0.1:1", "client.id": "drop-b"}
    pools[repr(sorted(gone.items()))] = [{"producer": Producer(gone), "state": {}, "servers": "127.0.0.1:1"}]
    assert drop_pooled_producers("127.0.0.1:1") == 1
    assert [e["servers"] for idle in pools.values() for e in idle] == [cfg["bootstrap.servers"]]
    assert drop_pooled_producers() == 1 and not pools
