"""``python manage.py cluster``: a local developer cluster on loopback (``make cluster``).

Starts the embedded Kafka, three ``raft,worker`` nodes and one ``worker`` node,
prints their URLs, and stops everything on Ctrl-C or SIGTERM. Every node's file
connectors share ``<data dir>/files`` (``raftconnect.file.allowed.paths``), so a
connector's files are found whichever worker runs it, unless
``RAFTCONNECT_FILE_ALLOWED_PATHS`` says otherwise.
"""
from __future__ import annotations

import os
import secrets
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from tools.launcher import REPO_ROOT, LocalCluster
from webapp.runtime import file_access
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
        user = os.environ.get("RAFTCONNECT_ADMIN_USER", "admin")
        password = os.environ.get("RAFTCONNECT_ADMIN_PASSWORD", "admin")
        total = o["raft_nodes"] + o["worker_nodes"]
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        # one directory for every node's file connectors (each node's own default would differ per node)
        files = None if os.environ.get(file_access.ENV) else os.path.join(o["data_dir"], file_access.FILES_DIR)
        if files:
            os.makedirs(files, exist_ok=True)
        kafka = EmbeddedKafka(port=o["kafka_port"], log_dir=os.path.join(o["data_dir"], "kafka")).start()
        cluster = LocalCluster(
            data_dir=o["data_dir"], bootstrap_servers=kafka.bootstrap_servers, raft_nodes=o["raft_nodes"],
            worker_nodes=o["worker_nodes"], rest_ports=[o["rest_port"] + i for i in range(total)],
            raft_ports=[o["raft_port"] + i for i in range(o["raft_nodes"])],
            secret=os.environ.get("RAFTCONNECT_CLUSTER_SECRET") or secrets.token_urlsafe(24), auth=(user, password),
            file_allowed_paths=[files] if files else None)
        try:
            cluster.start()
            for node in cluster.nodes:
                self.stdout.write(f"{node.node_id} ({node.roles}): {node.url}  log: {node.log_path}")
            self.stdout.write(f"kafka: {kafka.bootstrap_servers}; REST user {user} / {password}")
            self.stdout.write(f"file connectors may use: {files or os.environ[file_access.ENV]}")
            self.stdout.write(self.style.SUCCESS("cluster is up; Ctrl-C stops it"))
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            self.stdout.write("stopping ...")
            cluster.stop()
            kafka.stop()
