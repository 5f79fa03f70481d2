"""The runtime's SinkTask base (:mod:`webapp.runtime.sink_task`): assignment, explicit-offset ranges and offset
bookkeeping, without Kafka (partition counts and the sink's writes are stand-ins)."""
from __future__ import annotations

import pytest

import webapp.kafka.clients as clients
from webapp.plugin import ConnectException, ConnectorTaskId, SourceOffset, TaskContext, partition_key
from webapp.runtime.sink_task import PartitionDone, SinkTask

PARTITIONS = {"a": 4, "b": 2}


class RecordingSink(SinkTask):
    """Writes nothing: answers each topic's ranges with what ``plan`` says and remembers the ranges."""

    def __init__(self, context, config, plan=None):
        super().__init__(context, config)
        self.plan = plan or {}
        self.seen: list = []

    def start(self) -> None:
        self.start_sink([t.strip() for t in self.config["topics"].split(",")], int(self.config["batch.max.rows"]))

    def put_topic(self, topic, ranges):
        self.seen.append([(r.topic, r.partition, r.start, r.max_records) for r in ranges])
        return [PartitionDone(r.partition, *self.plan[(topic, r.partition)]) for r in ranges
                if (topic, r.partition) in self.plan]


@pytest.fixture(autouse=True)
def partition_counts(monkeypatch):
    monkeypatch.setattr(clients, "partition_count_cached", lambda conf, topic, **kw: PARTITIONS.get(topic))


def _task(tmp_path, index=1, count=2, offsets=None, plan=None, **config):
    ctx = TaskContext(ConnectorTaskId("sink", index), None, {"bootstrap.servers": "nowhere:9092"}, str(tmp_path),
                      dict(offsets or {}))
    cfg = {"topics": "a,b,missing", "batch.max.rows": "10", "task.index": str(index), "task.count": str(count),
           **config}
    task = RecordingSink(ctx, cfg, plan)
    task.start()
    return task


def _offset(topic, partition, offset):
    part = {"kafka_topic": topic, "kafka_partition": partition}
    return partition_key(part), SourceOffset(part, {"kafka_offset": offset})


def test_assignment_is_every_countth_partition_of_each_topic(tmp_path):
    assert _task(tmp_path, index=1, count=2).assigned() == [("a", 1), ("a", 3), ("b", 1)]
    assert _task(tmp_path, index=0, count=3).assigned() == [("a", 0), ("a", 3), ("b", 0)]
    with pytest.raises(ConnectException, match=r"task.index=2 must be in \[0, task.count=2\)"):
        _task(tmp_path, index=2, count=2)


def test_a_batch_reads_from_the_committed_offsets_and_hands_back_the_next_ones(tmp_path):
    offsets = dict([_offset("a", 1, 40), _offset("b", 1, 7), _offset("other", 1, 99)])
    task = _task(tmp_path, offsets=offsets, plan={("a", 1): (5, 45), ("a", 3): (0, None), ("b", 1): (2, 9)})
    result = task.run_batch()
    # 10 rows over three partitions: 4 each; no committed offset: from the start (None)
    assert task.seen == [[("a", 1, 40, 4), ("a", 3, None, 4)], [("b", 1, 7, 4)]]
    assert result.records == 7
    assert [(o.partition["kafka_topic"], o.partition["kafka_partition"], o.offset["kafka_offset"])
            for o in result.offsets] == [("a", 1, 45), ("b", 1, 9)]
    task.seen.clear()
    task.plan = {}
    assert task.run_batch() is None  # nothing moved
    assert task.seen == [[("a", 1, 45, 4), ("a", 3, None, 4)], [("b", 1, 9, 4)]]


def test_a_failing_topic_hands_back_nothing(tmp_path):
    task = _task(tmp_path, plan={("a", 1): (5, 45)})

    def boom(topic, ranges):
        if topic == "b":
            raise RuntimeError("write failed")
        return [PartitionDone(1, 5, 45)]

    task.put_topic = boom
    with pytest.raises(Exception, match="write failed"):
        task.run_batch()
    assert task._next == {}  # offsets move only with a batch that completed


def test_a_task_with_no_existing_topic_has_nothing_to_do(tmp_path):
    task = _task(tmp_path, topics="missing")
    assert task.assigned() == [] and task.run_batch() is None and task.seen == []


def test_peek_reads_ahead_from_the_range_starts_and_can_leave_tombstones_out(tmp_path, kafka_broker):
    """The driver-side read every sink plans its schema from (real broker): start offsets, limit, tombstones."""
    from confluent_kafka import Producer

    from webapp.kafka.spark_io import TopicPartitionRange
    from webapp.kafka.topics import ensure_topic

    topic = "peek-" + tmp_path.name[-12:].replace("_", "-")
    ensure_topic(kafka_broker.client_config(), topic, 1)
    p = Producer(kafka_broker.client_config())
    for i, value in enumerate([b"v0", None, b"v2", b"v3"]):
        p.produce(topic, value=value, key=f"k{i}".encode(), headers=[("h", b"x")], timestamp=1_700_000_000_000 + i)
    assert p.flush(30) == 0
    ctx = TaskContext(ConnectorTaskId("sink", 0), None, kafka_broker.client_config(), str(tmp_path), {})
    task = RecordingSink(ctx, {"topics": topic, "batch.max.rows": "10"})
    task.start()

    every, saw = task.peek([TopicPartitionRange(topic, 0, 1, 10)], 10, timeout=10.0)
    assert saw and [(r.offset, r.key, r.value) for r in every] == [(1, b"k1", None), (2, b"k2", b"v2"),
                                                                     (3, b"k3", b"v3")]
    assert every[1].timestamp == 1_700_000_000_002 and every[1].headers == [{"key": "h", "value": b"x"}]
    values, saw = task.peek([TopicPartitionRange(topic, 0, None, 10)], 2, timeout=10.0, skip_nulls=True)
    assert saw and [r.value for r in values] == [b"v0", b"v2"]  # the tombstone is read but neither kept nor counted
    nothing, saw = task.peek([TopicPartitionRange(topic, 0, 4, 10)], 10, timeout=10.0)
    assert nothing == [] and not saw
