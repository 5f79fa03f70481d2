"""Backup and restore: a one-node cluster's export restored into a fresh 3-member cluster resumes from its offsets."""
from __future__ import annotations

import json

import pytest

from tests.kafka_helpers import read_topic
from tools.demo import SOURCE_CLASS
from tools.launcher import ConnectHTTPError, LocalCluster, wait_for
from webapp.kafka.embedded import EmbeddedKafka

pytestmark = pytest.mark.integration

BACKUP, RESTORE = "/raftconnect/v1/backup", "/raftconnect/v1/restore"


def _source(path, topic):
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic, "tasks.max": "1"}


def _positions(client, name) -> dict[str, int]:
    return {json.dumps(o["partition"], sort_keys=True): int(next(iter(o["offset"].values())))
            for o in client.offsets(name)["offsets"]}


def test_an_export_restored_into_a_fresh_cluster_resumes_from_its_offsets(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(100)))
    with EmbeddedKafka(log_dir=tmp_path / "kafka") as kafka:
        old = LocalCluster(data_dir=str(tmp_path / "old"), bootstrap_servers=kafka.bootstrap_servers, raft_nodes=1,
                           file_allowed_paths=[str(tmp_path)]).start()
        try:
            c = old.nodes[0].client()
            c.create_connector("src", _source(data, "bk"))
            c.request("POST", "/connectors", json={"name": "held", "config": _source(data, "held"),
                                                   "initial_state": "PAUSED"})
            wait_for(lambda: len(read_topic(kafka.bootstrap_servers, "bk", timeout=30)) == 100, 120,
                     what="the 100 rows in the topic")
            committed = wait_for(lambda: _positions(c, "src") or None, 60, what="src to commit its offsets")
            wait_for(lambda: _positions(c, "src") == committed and max(committed.values()) > 0, 30,
                     what="src's offsets to settle")
            document = c.request("GET", BACKUP)
        finally:
            old.stop()
        by_name = {e["name"]: e for e in document["connectors"]}
        assert document["format"] == "raftconnect-backup" and document["version"] == 1
        assert set(by_name) == {"src", "held"}
        assert by_name["held"]["target_state"] == "PAUSED" and by_name["src"]["target_state"] == "STARTED"
        assert by_name["src"]["config"]["topic"] == "bk" and len(by_name["src"]["tasks"]) == 1
        assert {json.dumps(o["partition"], sort_keys=True): int(next(iter(o["offset"].values())))
                for o in by_name["src"]["offsets"]} == committed
        assert [u["username"] for u in document["users"]] == ["admin"]
        assert document["users"][0]["password"].startswith(("pbkdf2_", "argon2", "scrypt"))

        new = LocalCluster(data_dir=str(tmp_path / "new"), bootstrap_servers=kafka.bootstrap_servers, raft_nodes=3,
                           file_allowed_paths=[str(tmp_path)]).start()
        try:
            leader = new.leader()
            follower = next(n for n in new.nodes if n is not leader).client()
            tampered = {**document, "connectors": document["connectors"][:1]}
            with pytest.raises(ConnectHTTPError) as bad:
                follower.request("POST", RESTORE, json=tampered)
            assert bad.value.status == 400 and "sha256" in str(bad.value)
            summary = follower.request("POST", RESTORE, json=document)  # forwarded to the leader
            assert summary["connectors"] == 2 and summary["users"] == {"created": [], "kept": ["admin"]}
            with pytest.raises(ConnectHTTPError) as again:
                follower.request("POST", RESTORE, json=document)
            assert again.value.status == 409 and "held" in str(again.value) and "src" in str(again.value)
            for node in new.nodes:
                wait_for(lambda: sorted(node.client().connectors()) == ["held", "src"], 30,
                         what=f"{node.node_id} to serve the restored connectors")
                assert _positions(node.client(), "src") == committed
            wait_for(lambda: follower.all_running("src", tasks=1), 120, what="src RUNNING in the new cluster")
            wait_for(lambda: follower.status("held")["connector"]["state"] == "PAUSED", 60,
                     what="the restored PAUSED connector reported PAUSED")
            # the restored task goes on from its offset: only the appended rows reach the topic
            with open(data, "a") as fh:
                fh.writelines(f"{i},row {i}\n" for i in range(100, 120))
            wait_for(lambda: len(read_topic(kafka.bootstrap_servers, "bk", timeout=30)) >= 120, 120,
                     what="the appended rows in the topic")
            wait_for(lambda: max(_positions(follower, "src").values()) > max(committed.values()), 60,
                     what="src to commit past the restored offset")
            values = [json.loads(v)["payload"]["id"] for v in read_topic(kafka.bootstrap_servers, "bk", timeout=30)]
            assert sorted(values) == list(range(120)), "rows were read twice or lost"
        finally:
            new.stop()
