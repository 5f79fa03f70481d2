"""EmbeddedKafka and the topic helpers against the real Tansu broker (no mocks)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from webapp.kafka.embedded import EmbeddedKafka, EmbeddedKafkaError, free_port
from webapp.kafka.topics import TopicError, ensure_topic, partition_count
from tests.kafka_helpers import read_topic

ROOT = Path(__file__).resolve().parents[2]


def test_broker_round_trip_and_topic_helpers(kafka_broker):
    conf = kafka_broker.client_config()
    assert partition_count(conf, "emb-missing") is None
    assert ensure_topic(conf, "emb-rt", 3) == 3
    assert ensure_topic(conf, "emb-rt", 8) == 3  # existing topic is left alone
    assert partition_count(conf, "emb-rt") == 3

    delivered = []
    p = Producer({**conf, "enable.idempotence": True,
                  "on_delivery": lambda err, msg: delivered.append(err)})
    for i in range(300):
        p.produce("emb-rt", str(i).encode(), partition=i % 3)
    assert p.flush(30) == 0
    assert delivered == [None] * 300
    values = read_topic(kafka_broker.bootstrap_servers, "emb-rt")
    assert sorted(int(v) for v in values) == list(range(300))


def test_ensure_topic_rejects_bad_arguments(kafka_broker):
    with pytest.raises(TopicError, match="partitions must be >= 1"):
        ensure_topic(kafka_broker.client_config(), "emb-bad", 0)
    with pytest.raises(TopicError, match="bootstrap.servers"):
        ensure_topic({}, "emb-bad", 1)


def test_start_stop_context_manager_with_fixed_port(tmp_path):
    port = free_port()
    with EmbeddedKafka(port=port, log_dir=tmp_path) as k:
        assert k.bootstrap_servers == f"127.0.0.1:{port}"
        assert k.is_running()
        assert ensure_topic(k.client_config(), "t", 1) == 1
        pid = k.pid
        log = Path(k.log_path)
    assert not k.is_running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert log.exists() and log.parent == tmp_path
    k.stop()  # idempotent


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(EmbeddedKafkaError, match="already in use"):
            EmbeddedKafka(port=s.getsockname()[1], log_dir=tmp_path).start()


def test_broker_that_dies_at_startup_reports_log_tail(tmp_path):
    script = tmp_path / "fake-broker"
    script.write_text("#!/bin/sh\necho 'boom: cannot start'\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(EmbeddedKafkaError) as err:
        EmbeddedKafka(port=free_port(), log_dir=tmp_path, binary=str(script)).start()
    assert "exited with code 3" in str(err.value)
    assert "boom: cannot start" in str(err.value)


def test_startup_timeout_reports_log_tail(tmp_path):
    script = tmp_path / "silent-broker"
    script.write_text("#!/bin/sh\necho 'listening nowhere'\nexec sleep 60\n")
    script.chmod(0o755)
    k = EmbeddedKafka(port=free_port(), log_dir=tmp_path, binary=str(script), startup_timeout=1.5)
    with pytest.raises(EmbeddedKafkaError, match="not ready after") as err:
        k.start()
    assert "listening nowhere" in str(err.value)
    assert not k.is_running()


def test_command_line_runs_until_sigterm(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webapp.kafka.embedded", "--port", str(port), "--log-dir", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline().strip()  # printed once the broker answers metadata
        assert line == f"127.0.0.1:{port}", proc.stderr.read() if not line else line
        assert ensure_topic({"bootstrap.servers": line}, "cli", 2) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with socket.socket() as s:  # the broker child is gone too: its port is free again
        s.bind(("127.0.0.1", port))
