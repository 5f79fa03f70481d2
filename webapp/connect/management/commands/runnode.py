"""``python manage.py runnode``: start one RaftConnect node in the foreground.

Runs until SIGTERM or Ctrl-C, then stops the agent (tasks commit and stop),
the coordinator and Raft, in that order, and exits 0.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from raftnode import CommandRejected, RaftUnavailable
from raftnode.durability import check_space_at_start
from webapp import environment, gcpolicy
from webapp.connect.api.accounts import bootstrap_users
from webapp.connect import census, malloc
from webapp.connect.node import ConnectNode, NodeOptions
from webapp.connect.restserver import rest_server
from webapp.runtime import converter_defaults, file_access
from webapp.connect.nodeargs import add_node_arguments, with_default_port
from webapp.kafka import client_overrides
from webapp.connect.workerconfig import (PropertiesError, check_client_config, kafka_client_config_from_env,
                                         read_properties, report, worker_config)
from webapp.storage.base import StoreError

#: seconds between CPython's GIL hand-overs in a process that hosts a Raft member (default 0.005)
RAFT_SWITCH_INTERVAL_S = 0.001

log = logging.getLogger("raftconnect.node")


def ensure_admin_user() -> None:
    """Worker-only nodes: create or update the local admin user named by RAFTCONNECT_ADMIN_USER / _PASSWORD, if set.

    A Raft member makes it a replicated user instead (``accounts.bootstrap_users``).
    """
    user, password = environment.admin_credentials()
    if not user or not password:
        return
    model = get_user_model()
    obj, _ = model.objects.get_or_create(username=user)
    obj.is_staff = obj.is_superuser = True
    obj.set_password(password)
    obj.save()
    from webapp.connect.api.verified import remember_verified

    remember_verified(user, password, obj.password)  # the first request need not hash the password again


def raise_open_files_limit(wanted: int) -> tuple[int, int]:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) to its hard limit, as the JVM does
    for Kafka Connect at start (``-XX:+MaxFDLimit``); returns the ``(soft, hard)`` limits now in force.

    A node holds a socket per client connection (up to ``--rest-connection-limit``), its Raft peers,
    its database files and logs; a soft limit of 1,024, common by default, refuses connections with
    ``EMFILE`` before the REST server's own limit. Logs a warning when the limit stays below
    ``wanted`` descriptors. Never raises (an unsupported platform keeps its limits)."""
    import logging
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    except (ValueError, OSError):
        return -1, -1
    if soft != resource.RLIM_INFINITY and soft < wanted:
        logging.getLogger("raftconnect.node").warning(
            "open files limit is %d, below the %d the REST connection limit and the node's own files need: "
            "raise it (ulimit -n, LimitNOFILE=) or lower --rest-connection-limit", soft, wanted)
    return soft, hard


class Command(BaseCommand):
    help = "Start a RaftConnect node (REST API, Raft member and/or worker agent)."

    def add_arguments(self, parser) -> None:
        add_node_arguments(parser)

    def handle(self, *args, **o) -> None:
        from webapp.connect.api.fastpath import ConnectWSGIHandler

        application = ConnectWSGIHandler()  # what webapp.wsgi serves: Django with the REST fast path

        data_dir = os.environ[environment.DATA_DIR_ENV]
        try:  # before any thread starts: arenas made later obey the limit (webapp.connect.malloc)
            malloc.configure_from_env()
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            if o["config"]:  # its flags and variables were applied by prepare_runnode, before logging was set up
                report(worker_config(read_properties(o["config"])))
            # set by prepare_runnode from --config's Kafka client keys (producer./consumer./admin. included)
            client_config, _ = check_client_config(kafka_client_config_from_env())
            client_overrides.override_policy()  # Connect refuses to start with an unknown policy, so do we
            # read later by the agent and by each validation: a bad value stops the node now, with its name
            environment.offset_flush_interval_s()
            environment.offset_flush_timeout_s()
            environment.scheduled_rebalance_max_delay_ms()
            converter_defaults.from_environment()
        except (PropertiesError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        # raftconnect.file.allowed.paths: the flag (or the variable) becomes this process's variable, made
        # absolute, so the Herder here and the agent (which inherits the environment) read the same roots
        allowed = file_access.normalize(o["file_allowed_paths"])
        if allowed:
            os.environ[file_access.ENV] = allowed
        else:
            os.environ.pop(file_access.ENV, None)
        # raftconnect.jdbc.allowed.hosts: likewise one variable for the Herder here and the agent
        jdbc_hosts = ",".join(h.strip() for h in o["jdbc_allowed_hosts"].split(",") if h.strip())
        if jdbc_hosts:
            os.environ["RAFTCONNECT_JDBC_ALLOWED_HOSTS"] = jdbc_hosts
        else:
            os.environ.pop("RAFTCONNECT_JDBC_ALLOWED_HOSTS", None)
        options = NodeOptions(
            node_id=o["node_id"], roles=o["roles"],
            rest_address=with_default_port(o["rest_address"], 8083),
            raft_address=with_default_port(o["raft_address"], 7001),
            raft_peers=[with_default_port(p.strip(), 7001) for p in o["raft_peers"].split(",") if p.strip()],
            cluster=[with_default_port(c.strip(), 8083) for c in o["cluster"].split(",") if c.strip()],
            data_dir=data_dir, bootstrap_servers=o["bootstrap_servers"], weight=o["weight"],
            cluster_secret=environment.cluster_secret(),
            session_timeout_ms=o["session_timeout_ms"], heartbeat_interval_ms=o["heartbeat_interval_ms"],
            spark_master=o["spark_master"], celery_broker=environment.celery_broker(),
            metadata_store=o["metadata_store"], switch_hold_seconds=o["switch_hold_seconds"],
            rest_listen=with_default_port(o["rest_listen"], 8083) if o["rest_listen"] else None,
            kafka_client_config=client_config,
        )
        if o["weight"] <= 0:
            raise CommandError("--weight must be positive")
        if "raft" in options.roles:
            # The Raft thread shares the GIL with the REST threads; each time it blocks (poll, send,
            # journal write) it waits to get the GIL back, and CPython hands it over every switch
            # interval to one of the waiting threads. At 5 ms (the default) with 16 busy threads,
            # a 5 ms tick took 200 ms at the median and up to 1.06 s, past the election timeout,
            # and followers called elections against a live leader (benchmarks/scale/gil_ticks.py,
            # RESULTS.md; at 1 ms: 38 ms and 0.17 s).
            sys.setswitchinterval(RAFT_SWITCH_INTERVAL_S)
            try:  # before the database, the agent or anything else starts (RaftNode checks it again)
                check_space_at_start(os.path.join(data_dir, "raft"))
            except OSError as exc:
                raise CommandError(str(exc)) from exc
        try:  # times every garbage collection: a long one stalls Raft (webapp.gcpolicy)
            gcpolicy.install()
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", verbosity=0, interactive=False)
        if "raft" not in options.roles:
            ensure_admin_user()  # no replicated state here: this node authenticates with its own database
        try:
            node = ConnectNode(options)
        except (ValueError, RuntimeError, NotImplementedError, OSError, StoreError) as exc:
            raise CommandError(str(exc)) from exc
        # full garbage collections examine only what arrived since the last one, except on a
        # follower every few minutes and on a leader rarely: a long one stalls Raft (webapp.gcpolicy)
        freeze = gcpolicy.freeze_long_lived(lambda: node.raft is None or not node.raft.is_leader)
        # the agent boots (imports, engine processes, producer) while Raft elects and the stores
        # open: it joins the group through its heartbeats, which retry until the REST API answers
        try:  # off unless RAFTCONNECT_MEMORY_CENSUS_DIR is set (a diagnostic: webapp.connect.census)
            census.start_from_env(options.node_id, lambda: node.raft)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        node.start_agent()
        try:
            node.start_control_plane()
            if node.raft is not None:  # local users move into Raft once; the admin becomes a replicated user
                admin_user, admin_password = environment.admin_credentials()
                bootstrap_users(node, admin_user=admin_user, admin_password=admin_password)
        except (ValueError, RuntimeError, NotImplementedError, OSError, StoreError, RaftUnavailable,
                CommandRejected) as exc:
            node.stop_agent()
            raise CommandError(str(exc)) from exc
        freeze.freeze_now()  # the state start-up loaded lives on: not examined by the first full collection
        host, port = (options.rest_listen or options.rest_address).rsplit(":", 1)
        raise_open_files_limit(o["rest_connection_limit"] + 256)  # the connections, plus Raft, files, logs
        try:  # bound now: an address in use stops the node here, before it serves anything
            server = rest_server(application, kind=o["rest_server"], host=host, port=int(port),
                                 threads=o["rest_threads"], connection_limit=o["rest_connection_limit"])
        except (OSError, RuntimeError, ValueError) as exc:
            node.stop()
            raise CommandError(f"REST server on {host}:{port}: {exc}") from exc
        stopped = threading.Event()

        def finish(code: int = 0) -> None:
            try:
                node.stop()
            except Exception:
                log.exception("node %s: error while stopping", options.node_id)
                code = 1
            log.warning("node %s: stopped", options.node_id)
            logging.shutdown()
            # Everything durable is closed (agent stopped, Raft journal closed): end the process
            # now, whatever threads (REST requests, clients of other members) are still running.
            os._exit(code)

        def shutdown(signum, frame):
            if stopped.is_set():
                return
            stopped.set()
            log.warning("node %s: stopping (signal %s)", options.node_id, signum)
            threading.Thread(target=finish, daemon=True).start()

        signal.signal(signal.SIGTERM, shutdown)
        signal.signal(signal.SIGINT, shutdown)
        log.warning("node %s: REST on http://%s%s, Raft on %s, roles %s, data dir %s, file connectors may use %s",
                    options.node_id, options.rest_address,
                    f" (bound to {options.rest_listen})" if options.rest_listen else "",
                    options.raft_address, ",".join(options.roles), data_dir, ", ".join(file_access.policy().roots))
        server.run()
        if not stopped.is_set():  # the REST server ended by itself (its listening socket failed)
            stopped.set()
            log.error("node %s: the REST server stopped serving; stopping the node", options.node_id)
            finish(1)
        threading.Event().wait()  # the signal's finish() ends the process
