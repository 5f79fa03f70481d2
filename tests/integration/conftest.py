"""Fixtures of the integration tests (nodes as processes against real services)."""
from __future__ import annotations

import pytest

from webapp.kafka.embedded import EmbeddedKafka


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """A broker of the test module's own (EmbeddedKafka): its nodes' topics and any kill -9 stay within it.

    Module scope, unlike the session's ``kafka_broker``: these modules use fixed topic names and
    restart nodes against the broker; one broker per module keeps them apart.
    """
    with EmbeddedKafka(log_dir=tmp_path_factory.mktemp("kafka")) as k:
        yield k
