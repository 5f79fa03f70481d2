"""A produce that cannot reach Kafka says which address it tried (librdkafka's "Local: ..." errors name none)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from webapp.kafka.embedded import free_port
from webapp.kafka.spark_io import produce_function


def test_delivery_failure_names_the_bootstrap_servers():
    servers = f"127.0.0.1:{free_port()}"  # nothing listens there
    produce = produce_function("t", {"bootstrap.servers": servers},
                               producer_config={"message.timeout.ms": "1500", "enable.idempotence": "false"},
                               flush_timeout=10)
    with pytest.raises(RuntimeError) as info:
        list(produce(iter([pa.record_batch([pa.array(["x"])], names=["value"])])))
    assert servers in str(info.value) and str(info.value).startswith("[kafka]")
