"""Fixtures of the integration tests (nodes as processes against real services)."""
from __future__ import annotations

import pytest

from tools.launcher import LocalCluster
from webapp.kafka.embedded import EmbeddedKafka


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """A broker of the test module's own (EmbeddedKafka): its nodes' topics and any kill -9 stay within it.

    Module scope, unlike the session's ``kafka_broker``: these modules use fixed topic names and
    restart nodes against the broker; one broker per module keeps them apart.
    """
    with EmbeddedKafka(log_dir=tmp_path_factory.mktemp("kafka")) as k:
        yield k


@pytest.fixture
def members_and_a_worker(tmp_path):
    """A started cluster of three Raft members (role ``raft``) and one worker-only node, with no Kafka
    (nothing runs); stopped after the test."""
    cluster = LocalCluster(data_dir=str(tmp_path / "c"), bootstrap_servers="127.0.0.1:9", raft_nodes=3,
                           worker_nodes=1, raft_roles="raft").start()
    try:
        yield cluster
    finally:
        cluster.stop()
