"""``python manage.py cluster``: a local developer cluster on loopback (``make cluster``).

Starts the embedded Kafka, three ``raft,worker`` nodes and one ``worker`` node,
prints their URLs, and stops everything on Ctrl-C or SIGTERM.
"""
from __future__ import annotations

import os
import secrets
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from webapp.connect.launcher import REPO_ROOT, NodeProcess
from webapp.kafka.embedded import EmbeddedKafka


class Command(BaseCommand):
    help = "Run 3 raft,worker nodes + 1 worker node + embedded Kafka on loopback until Ctrl-C."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--raft-nodes", type=int, default=3)
        parser.add_argument("--worker-nodes", type=int, default=1)
        parser.add_argument("--rest-port", type=int, default=8083, help="first REST port")
        parser.add_argument("--raft-port", type=int, default=7001, help="first Raft port")
        parser.add_argument("--kafka-port", type=int, default=9092)
        parser.add_argument("--data-dir", default=str(REPO_ROOT / "var" / "cluster"))

    def handle(self, *args, **o) -> None:
        secret = os.environ.get("RAFTCONNECT_CLUSTER_SECRET") or secrets.token_urlsafe(24)
        user = os.environ.get("RAFTCONNECT_ADMIN_USER", "admin")
        password = os.environ.get("RAFTCONNECT_ADMIN_PASSWORD", "admin")
        n = o["raft_nodes"]
        raft = [f"127.0.0.1:{o['raft_port'] + i}" for i in range(n)]
        rest = [f"127.0.0.1:{o['rest_port'] + i}" for i in range(n + o["worker_nodes"])]
        kafka = EmbeddedKafka(port=o["kafka_port"], log_dir=os.path.join(o["data_dir"], "kafka")).start()
        nodes: list[NodeProcess] = []
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            for i in range(n + o["worker_nodes"]):
                is_raft = i < n
                extra = (["--raft-peers", ",".join(p for j, p in enumerate(raft) if j != i)] if is_raft
                         else ["--cluster", ",".join(rest[:n])])
                node = NodeProcess(node_id=f"node-{i + 1}", rest_port=o["rest_port"] + i,
                                   raft_port=o["raft_port"] + i if is_raft else 0,
                                   data_dir=os.path.join(o["data_dir"], f"node-{i + 1}"),
                                   bootstrap_servers=kafka.bootstrap_servers,
                                   roles="raft,worker" if is_raft else "worker", extra_args=extra,
                                   env={"RAFTCONNECT_CLUSTER_SECRET": secret}, auth=(user, password))
                nodes.append(node.start(wait=False))
            for node in nodes:
                node.wait_healthy(120)
                self.stdout.write(f"{node.node_id} ({node.roles}): {node.url}  log: {node.log_path}")
            self.stdout.write(f"kafka: {kafka.bootstrap_servers}; REST user {user} / {password}")
            self.stdout.write(self.style.SUCCESS("cluster is up; Ctrl-C stops it"))
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            self.stdout.write("stopping ...")
            for node in reversed(nodes):
                node.stop()
            kafka.stop()
