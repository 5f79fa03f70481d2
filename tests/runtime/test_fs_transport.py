"""The embedded Celery broker's filesystem transport writes whole message files only."""
from __future__ import annotations

import os
import threading

from kombu import Connection

from webapp.celery import configure_broker
from webapp.runtime.fs_transport import Channel, Transport


def _connection(tmp_path) -> Connection:
    conf = configure_broker(None, str(tmp_path))
    return Connection(conf["broker_url"], transport=conf["broker_transport"],
                      transport_options=conf["broker_transport_options"])


def test_the_node_broker_uses_the_atomic_transport(tmp_path):
    with _connection(tmp_path) as conn:
        assert conn.get_transport_cls() is Transport
        assert isinstance(conn.default_channel, Channel)


def test_connecting_logs_no_warning(tmp_path, caplog):
    """A folder has no host: no "No hostname was supplied" WARNING on each node's and agent's start."""
    with caplog.at_level("WARNING", logger="kombu"), _connection(tmp_path) as conn:
        conn.connect()
        conn.default_channel._put("q", {"n": 1})
        assert conn.default_channel._get("q") == {"n": 1}
        with conn.clone() as other:  # what Celery's producer pool and the worker's consumer do
            other.default_channel._put("q", {"n": 2})
        assert conn.default_channel._get("q") == {"n": 2}
    assert [r.getMessage() for r in caplog.records if r.name.startswith("kombu")] == []


def test_consumers_never_see_a_message_being_written(tmp_path):
    """A reader racing a writer gets every message whole (with kombu's own _put, ~5 % of these came back empty)."""
    with _connection(tmp_path) as conn:
        channel = conn.default_channel
        total, got, errors = 300, [], []
        done = threading.Event()

        def read():
            from queue import Empty

            while len(got) < total and not done.is_set():
                try:
                    got.append(channel._get("q"))
                except Empty:
                    continue
                except Exception as exc:  # noqa: BLE001 - what the old transport raised (JSONDecodeError)
                    errors.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        for i in range(total):
            channel._put("q", {"body": "x" * 20_000, "n": i})
        reader.join(60)
        done.set()
        assert errors == []
        assert sorted(m["n"] for m in got) == list(range(total))
        assert not [f for f in os.listdir(channel.data_folder_out) if f.endswith(".tmp")]
