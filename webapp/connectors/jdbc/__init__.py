"""JDBC connectors on Spark: PostgreSQL and MySQL/MariaDB tables ⇄ Kafka topics.

Configs use the keys of Confluent's ``io.confluent.connect.jdbc.JdbcSourceConnector``
and ``JdbcSinkConnector`` (``connection.url`` in its ``jdbc:postgresql://``,
``jdbc:mysql://`` or ``jdbc:mariadb://`` form), so they migrate unchanged. No JDBC
driver is involved: the database is read and written with psycopg and PyMySQL
inside Spark's Python workers (:mod:`.dbio`).

Source (:class:`JdbcSourceConnector`): the tables of ``table.whitelist`` (or all
tables minus ``table.blacklist``), or one ``query``, split over the tasks. Per
micro-batch the driver finds the batch's upper bound with one indexed query
(the ``batch.max.rows``-th next row in ``mode`` order); Spark tasks then read
the rows up to that bound (an ``incrementing`` range split into value ranges,
one per core), convert them to the JsonConverter wire form in Arrow, the JVM
encodes each row (``to_json``) and the workers produce them idempotently. Only
after every record is acknowledged does the batch return its offset, which the
runtime commits through the leader. Offsets (Confluent's shapes): partition
``{"table": name}`` or ``{"query": "query"}``; offset ``{"incrementing": n}``,
``{"timestamp": ms, "timestamp_nanos": ns}`` or both. Delivery: at least once
(a batch interrupted after some acknowledgements is produced again).

Sink (:class:`JdbcSinkConnector`): explicit offset ranges of the assigned topic
partitions are read in Spark tasks (one per partition) and decoded with the
schema planned from a driver-side peek — in the same Python worker, by pyarrow's
JSON reader (``dbio.decode_batch``), or, when a field is a nested
struct/array/map written as JSON text, by ``from_json`` in the JVM — and each Spark
task writes its partition's records in **one database transaction** together
with the partition's next offset in ``__raftconnect_offsets`` of the target
database. The transaction first locks that row and checks that it still holds
the offset the batch started from, so a replayed or concurrent (zombie) batch
rolls back. On start the task resumes from the maximum of the metadata store's
and the target's offsets. Delivery: exactly once into the target table.

Transforms, ``errors.tolerance=all`` and (sink) a dead letter queue run through
:mod:`webapp.runtime.pipeline`: the source hands its rows to ``SourcePipeline`` in
their logical Arrow types; the sink decodes, transforms (``SinkPipeline.transform``)
and writes each partition in one Python stage (:class:`_TransformSpec`,
``dbio.write_routed_partition``), so records a filter drops or the DLQ takes
still advance the offset stored in the target transaction. Without them both keep
the paths above.

The package (issue 14 split the former ``jdbc.py`` and ``jdbc_io.py``, 3,200 lines
together), each module with one job:

================= =============================================================
module            owns
================= =============================================================
``config``        config keys, modes, the connection URL, allowed hosts, checks
``dialects``      column types ⇄ kinds ⇄ Connect schemas ⇄ DDL, per dialect
``jobs``          shipping ``dbio`` to Spark by value, a failed job's cause,
                  in-process jobs on the engine
``connectors``    ``JdbcSourceConnector``, ``JdbcSinkConnector``: validation,
                  task configs
``source_task``   ``JdbcSourceTask``: batch planning, reading, producing
``sink_records``  the sink's envelopes, transform stage and write functions
``sink_task``     ``JdbcSinkTask``: table and offset planning, the write paths
``dbio``          the database I/O, also run in Spark's workers (a package;
                  imports nothing of this project)
================= =============================================================

Imports point one way: ``dbio`` ← ``config`` ← ``dialects``, ``jobs`` ←
``connectors`` ← ``sink_records`` ← the tasks. The package depends on the plugin
API (``webapp.plugin``) and the runtime's and Kafka's declared helpers; it never
imports the web layer or the file connectors, and the runtime reaches it only
through the plugin registry (``pyproject.toml``'s import contracts). This
``__init__`` is its public face: the entry points name
``webapp.connectors.jdbc:JdbcSourceConnector`` and ``…:JdbcSinkConnector``
(``connector.class`` ``io.confluent.connect.jdbc.JdbcSourceConnector``, or
``JdbcSourceConnector`` / ``JdbcSource``), and it attaches each connector's task class.
"""
from __future__ import annotations

from .config import ALLOWED_HOSTS_ENV, MODES, allowed_hosts, parse_connection_url, shown_url, topic_creation_config
from .connectors import JdbcSinkConnector, JdbcSourceConnector
from .sink_task import JdbcSinkTask
from .source_task import JdbcSourceTask

__all__ = [
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "JdbcSinkConnector",
    "JdbcSinkTask",
    "parse_connection_url",
    "shown_url",
    "allowed_hosts",
    "ALLOWED_HOSTS_ENV",
    "topic_creation_config",
    "MODES",
]

# The runtime instantiates a connector's tasks through ``Connector.task_class`` (webapp.plugin).
JdbcSourceConnector.task_class = JdbcSourceTask
JdbcSinkConnector.task_class = JdbcSinkTask
