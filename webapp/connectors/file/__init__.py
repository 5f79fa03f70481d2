"""File connectors on Spark: CSV / JSON-lines / Parquet files ⇄ Kafka topics.

Source (:class:`FileSourceConnector`): reads a file or the files of a directory.
Per batch the driver only plans newline-aligned byte ranges (csv/json) or row
ranges (parquet); Spark's Python workers read and parse them with pyarrow (C++,
column types inferred once per file), the JVM encodes each row as a Connect
``JsonConverter`` value, and the workers produce them to ``topic``.

Sink (:class:`FileSinkConnector`): reads explicit offset ranges of the
``topics``' partitions inside Spark tasks, decodes the JsonConverter values in the
JVM (``from_json``) and writes each batch as files into ``path`` — staged by
Spark under ``path/_staging/`` and then renamed into ``path`` with deterministic
names, so that ``path`` only ever holds complete, committed data files.

Offsets (Connect style):

* source csv/json: partition ``{"filename": <abs path>}`` (whole file) or
  ``{"filename", "range.start", "range.end"}`` (a byte range of a split file) →
  ``{"position": <byte offset of the next line>}``, like Kafka's FileStreamSource;
* source parquet: partition ``{"filename"}`` or ``{"filename", "range.start",
  "range.end"}`` (row-group indices) → ``{"row": <next row index in the file>}``;
* sink: ``{"kafka_topic": t, "kafka_partition": p}`` → ``{"kafka_offset": next}``.

Paths: every ``path`` (and every file a source directory expands to) must
resolve under the worker setting ``raftconnect.file.allowed.paths`` and never
into the node's data directory (:mod:`webapp.runtime.file_access`). It is
checked when a connector is validated or created, when it splits its work, when
a task starts and before each batch opens its files or writes its output.

Delivery: the source is at-least-once (a batch that failed after some records
were acknowledged is produced again). The sink is exactly-once into ``path`` for
a given start offset: an output file is named
``<topic>+<partition>+<start offset>-<last offset>.<ext>`` (offsets zero-padded
to 20 digits) and a re-run of an uncommitted batch replaces the files of the
previous attempt that started at the same offset.

The package (issue 14 split the former 1,800-line ``file.py``), each module
with one job:

================= =============================================================
module            owns
================= =============================================================
``config``        config keys, formats, task-config keys, config helpers
``connectors``    ``FileSourceConnector``, ``FileSinkConnector``: validation,
                  task configs (source splits)
``source_task``   ``FileSourceTask``: planning, parsing, producing
``sink_task``     ``FileSinkTask``: reading, Spark passes, staging, commit
``sink_local``    the sink's in-process decode-and-write pieces (no Spark)
================= =============================================================

Imports point one way: ``config`` ← ``connectors`` ← the tasks. The package
depends on the plugin API (``webapp.plugin``) and the runtime's and Kafka's
declared helpers it calls (``file_access``, ``converters``, ``engine``, ``pipeline``,
...); it never imports the web layer or the JDBC connectors, and the runtime
reaches it only through the plugin registry
(``pyproject.toml``'s import contracts). This ``__init__`` is its public face:
the entry points name ``webapp.connectors.file:FileSourceConnector`` and
``…:FileSinkConnector``, and it attaches each connector's task class.
"""
from __future__ import annotations

from .config import SINK_FORMATS, SOURCE_FORMATS
from .connectors import FileSinkConnector, FileSourceConnector
from .sink_task import FileSinkTask
from .source_task import FileSourceTask

__all__ = [
    "FileSourceConnector",
    "FileSourceTask",
    "FileSinkConnector",
    "FileSinkTask",
    "SOURCE_FORMATS",
    "SINK_FORMATS",
]

# The runtime instantiates a connector's tasks through ``Connector.task_class`` (webapp.plugin).
FileSourceConnector.task_class = FileSourceTask
FileSinkConnector.task_class = FileSinkTask
