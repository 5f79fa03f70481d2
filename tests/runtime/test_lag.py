"""Per-task figures the agent reports: the records/s window and a sink task's consumer lag (real Kafka)."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from tools.launcher import wait_for
from webapp.plugin import SourceOffset
from webapp.kafka.topics import ensure_topic
from webapp.runtime.lag import SinkLagMonitor
from webapp.runtime.task_metrics import TaskMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sink_offset(topic: str, partition: int, next_offset: int) -> SourceOffset:
    return SourceOffset({"kafka_topic": topic, "kafka_partition": partition}, {"kafka_offset": next_offset})


def test_records_per_second_is_over_the_recent_window_and_falls_to_zero_when_idle():
    clock = Clock()
    m = TaskMetrics(clock=clock)
    for _ in range(10):  # 100 records/s for 60 s
        clock.now += 6
        m.batch_done(600, 1.0)
    assert m.records == 6000 and m.batches == 10
    assert m.records_per_second() == pytest.approx(100, rel=0.01)
    clock.now += 6
    m.batch_done(6000, 1.0)  # a burst: 1000 records/s over its 6 s
    assert m.records_per_second() == pytest.approx((4 * 600 + 6000) / 30, rel=0.01)  # batches after t-30 s
    clock.now += TaskMetrics.RATE_WINDOW + 1
    assert m.records_per_second() == 0
    assert m.as_json()["records_per_second"] == 0 and "lag" not in m.as_json()


def test_committed_sink_positions_are_remembered_per_partition():
    m = TaskMetrics()
    m.batch_done(5, 0.1, (sink_offset("t", 0, 3), sink_offset("t", 1, 2)))
    m.batch_done(4, 0.1, (sink_offset("t", 0, 7), SourceOffset({"file": "a"}, {"position": 9})))
    assert m.sink_positions == {("t", 0): 7, ("t", 1): 2}


@pytest.mark.integration
def test_sink_lag_is_end_offset_minus_committed_position(kafka_broker):
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    conf = kafka_broker.client_config()
    ensure_topic(conf, topic, 2)
    producer = Producer(conf)
    for i in range(10):  # 5 records per partition, one record per batch: the embedded broker (Tansu)
        producer.produce(topic, value=b"x", partition=i % 2)  # reports the last batch's base offset + 1
        assert producer.flush(30) == 0                        # as the high watermark, Kafka the last offset + 1
    busy, idle = TaskMetrics(), TaskMetrics()
    busy.batch_done(3, 0.1, (sink_offset(topic, 0, 2), sink_offset(topic, 1, 1)))
    monitor = SinkLagMonitor(conf, lambda: [busy, idle], interval=0.2)
    monitor.start()
    try:
        wait_for(lambda: busy.lag == (5 - 2) + (5 - 1), 30, what="lag of the sink task")
        assert idle.lag is None  # nothing committed yet: unknown, not zero
        busy.batch_done(7, 0.1, (sink_offset(topic, 0, 5), sink_offset(topic, 1, 5)))
        wait_for(lambda: busy.lag == 0, 30, what="lag after catching up")
        assert busy.as_json()["lag"] == 0
    finally:
        monitor.stop()


def test_unreachable_kafka_leaves_the_lag_unknown():
    m = TaskMetrics()
    m.batch_done(1, 0.1, (sink_offset("t", 0, 1),))
    m.lag = 5
    SinkLagMonitor({"bootstrap.servers": "127.0.0.1:1"}, lambda: [m], timeout=0.5).refresh()
    assert m.lag is None
