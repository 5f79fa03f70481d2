"""Where a batch's data work runs: in the agent process, or as a Spark job.

Owns the task engine's data plane:

* :class:`BatchEngine` — per batch, the choice between running a task's
  per-piece Arrow functions (the same generator functions Spark's ``mapInArrow``
  calls) **in-process** on a small shared thread pool, or as **one Spark job**.
  Measured on the 2-core machines here (docs/ARCHITECTURE.md, "Task engine"):
  starting the agent's SparkSession costs ~6 s, its first job ~4 s and every
  later job ~0.35 s of fixed cost, while an in-process 50,000-row batch of the
  demo's flights costs ~0.3 s in all. So ``raftconnect.task.engine=auto`` (the
  default) runs a batch in-process unless it is planned to be at least
  ``raftconnect.spark.min.batch.rows`` rows (default 1,000,000), and the Spark
  session is only created when a batch needs it. ``local`` / ``spark`` force one
  path (a Spark cluster's executors only do work on the ``spark`` path).
* :func:`encode_values` — Connect JsonConverter values of an Arrow batch, the
  in-process twin of the JVM's ``to_json`` in
  :func:`webapp.runtime.converters.encode_value_column` (polars' JSON writer; no
  per-row Python).
* :func:`partition_index` — the piece a function is running, in either path.
* :class:`LazySpark` — the SparkSession proxy tasks see in their context.

Must not import Django or talk to the control plane; tasks decide what a piece
is, this module only decides where it runs.
"""
from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from webapp import environment

__all__ = [
    "BatchEngine",
    "PhaseTimes",
    "phase",
    "timed",
    "use_phases",
    "LazySpark",
    "ENGINE_KEY",
    "SPARK_MIN_ROWS_KEY",
    "ENGINE_MODES",
    "partition_index",
    "encode_values",
    "local_encodable",
    "engine_config_errors",
]

#: Connector config key choosing the execution path of its tasks' batches.
ENGINE_KEY = "raftconnect.task.engine"
#: Connector config key: in ``auto`` mode, planned batch size (rows) from which a batch runs on Spark.
SPARK_MIN_ROWS_KEY = "raftconnect.spark.min.batch.rows"
ENGINE_MODES = ("auto", "local", "spark")

log = logging.getLogger(__name__)

_DEFAULT_SPARK_MIN_ROWS = 1_000_000
_local = threading.local()


class PhaseTimes:
    """Seconds one task's batches spent per phase, summed over the pieces that ran in parallel.

    Phases: ``read`` (source rows parsed or queried), ``encode`` (JsonConverter
    values), ``produce`` (sent and acknowledged), ``consume`` (records read from
    Kafka), ``decode`` (values parsed into columns), ``write`` (files or tables
    written), ``commit`` (offsets committed through the leader), ``spark`` (a
    whole batch run as a Spark job). Thread-safe; read by the heartbeat.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        #: bumped by every :meth:`add` (readers cache what they built from an unchanged version)
        self.version = 0

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.version += 1

    def as_json(self) -> dict[str, float]:
        """``{phase: seconds}`` (3 decimals); ``produce`` is a source piece's time not spent reading or encoding."""
        with self._lock:
            out = {k: v for k, v in self.seconds.items() if not k.startswith("_")}
            if "_piece" in self.seconds:
                out["produce"] = max(0.0, self.seconds["_piece"] - self.seconds.get("_source", 0.0))
            if "_sink" in self.seconds:  # a JDBC sink partition: read, decode and write in one pass
                out["write"] = out.get("write", 0.0) + max(0.0, self.seconds["_sink"] - self.seconds.get("consume", 0.0))
        return {k: round(v, 3) for k, v in out.items()}


def use_phases(times: "PhaseTimes | None") -> None:
    """Account the calling thread's :func:`phase` / :func:`timed` work to ``times`` (None: nowhere)."""
    _local.phases = times


class phase:  # noqa: N801 - used as a context manager, reads like one
    """``with phase("encode"): ...`` adds the block's wall time to the thread's :class:`PhaseTimes`."""

    __slots__ = ("name", "t0")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> "phase":
        import time

        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        import time

        times = getattr(_local, "phases", None)
        if times is not None:
            times.add(self.name, time.perf_counter() - self.t0)


def timed(iterable: Iterable[Any], name: str) -> Iterator[Any]:
    """``iterable``, with the time spent producing each item added to phase ``name``."""
    import time

    it = iter(iterable)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            times = getattr(_local, "phases", None)
            if times is not None:
                times.add(name, time.perf_counter() - t0)
            return
        times = getattr(_local, "phases", None)
        if times is not None:
            times.add(name, time.perf_counter() - t0)
        yield item


def partition_index() -> int:
    """Index of the piece the calling function runs (Spark's partition id, or the in-process piece).

    Raises:
        RuntimeError: called outside a piece function.
    """
    idx = getattr(_local, "piece", None)
    if idx is not None:
        return idx
    from pyspark import TaskContext as SparkTaskContext  # inside a Spark Python worker

    ctx = SparkTaskContext.get()
    if ctx is None:
        raise RuntimeError("partition_index() called outside a batch piece")
    return ctx.partitionId()


class LazySpark:
    """Stands for the agent's SparkSession and creates it on first attribute access.

    Tasks keep ``context.spark`` as before; a task whose batches all run
    in-process never starts a JVM. ``started`` tells without starting it.
    """

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._session = None
        self._lock = threading.Lock()
        self._creating = False
        self._error: str | None = None  # why the last attempt to create the session failed

    @property
    def started(self) -> bool:
        return self._session is not None

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` shows of the session, without starting it or calling into the JVM.

        ``{"state": "not_started"}`` until a batch needs Spark, ``"starting"`` while
        the JVM starts, ``"ok"`` while it runs, ``"down"`` after it stopped or the
        last start failed (with ``"error"``).
        """
        from .spark import is_running

        session = self._session
        if session is not None:
            return {"state": "ok"} if is_running(session) else {"state": "down", "error": "the SparkContext stopped"}
        if self._creating:
            return {"state": "starting"}
        if self._error is not None:
            return {"state": "down", "error": self._error}
        return {"state": "not_started"}

    def session(self):
        """The real SparkSession (created now if needed); binds the calling thread's pending job group."""
        with self._lock:
            if self._session is None:
                self._creating = True
                try:
                    self._session = self._factory()
                    self._error = None
                except Exception as exc:
                    self._error = f"the SparkSession could not start: {type(exc).__name__}: {exc}"[:500]
                    raise
                finally:
                    self._creating = False
            session = self._session
        pending = getattr(_local, "job_group", None)
        if pending is not None and getattr(_local, "bound_group", None) != pending[0]:
            group, description, on_bound = pending
            sc = session.sparkContext
            sc.setJobGroup(group, description, interruptOnCancel=True)
            _local.bound_group = group
            on_bound(sc)
        return session

    @staticmethod
    def use_job_group(group: str | None, description: str = "", on_bound: Callable[[Any], None] = lambda sc: None):
        """Run the calling thread's Spark jobs in ``group`` from now on (None: forget it).

        Spark job groups are per thread (PySpark's pinned thread mode) and pool
        threads run many tasks, so a task names its group before each step; the
        group is bound to the thread's SparkContext when the step first touches
        Spark (``on_bound(sc)`` is then called, e.g. to keep ``sc`` for cancelling).
        """
        _local.job_group = None if group is None else (group, description, on_bound)

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "use_job_group":
            raise AttributeError(name)
        return getattr(self.session(), name)


def engine_config_errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    """Per-key errors of a connector's engine keys (``raftconnect.task.engine``, ``raftconnect.spark.min.batch.rows``)."""
    errors: dict[str, list[str]] = {}
    mode = config.get(ENGINE_KEY)
    if mode is not None and str(mode).strip().lower() not in ENGINE_MODES:
        errors[ENGINE_KEY] = [f"Invalid value {mode} for configuration {ENGINE_KEY}: "
                              f"String must be one of: {', '.join(ENGINE_MODES)}"]
    rows = config.get(SPARK_MIN_ROWS_KEY)
    if rows is not None:
        try:
            ok = int(rows) >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            errors[SPARK_MIN_ROWS_KEY] = [f"Invalid value {rows} for configuration {SPARK_MIN_ROWS_KEY}: "
                                          "Value must be a whole number of rows, at least 1"]
    return errors


def _env_mode() -> str:
    mode = environment.task_engine()
    return mode if mode in ENGINE_MODES else "auto"


def _die_with_parent(parent: int) -> None:
    """Worker process initializer: exit as soon as the agent is gone (even after a kill -9 of it).

    A thread checks every 0.5 s whether this process was re-parented. (Linux's
    PR_SET_PDEATHSIG would fire when the *thread* that spawned the worker ends —
    the pool spawns from whichever thread submits first — so it cannot be used.)
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _run_in_process(payload: bytes, piece: int) -> tuple[Any, dict[str, float]]:
    """A piece in one of the engine's worker processes: ``(then's result, phase seconds)``."""
    import pyarrow as pa
    from pyspark import cloudpickle

    fn, then = cloudpickle.loads(payload)
    times = PhaseTimes()
    _local.piece, _local.phases = piece, times
    try:
        out = fn(iter([pa.record_batch([pa.array([piece], pa.int64())], names=["id"])]))
        result = then(piece, iter(out))
    finally:
        _local.piece, _local.phases = None, None
    return result, dict(times.seconds)


def warm_producer(kafka_config: Mapping[str, Any] | None) -> None:
    """Create this process's pooled producer for the default producer config now.

    An idempotent producer spends ~0.5–1 s getting its producer id before its
    first delivery; warmed, a worker's first batch does not wait for that.
    """
    if not kafka_config or "bootstrap.servers" not in kafka_config:
        return
    from webapp.kafka.spark_io import produce_function

    for _ in produce_function("__raftconnect_warm__", kafka_config)(iter(())):
        pass


def _warm_process(kafka_config: Mapping[str, Any] | None = None) -> int:
    """Import the in-process path's libraries in a new worker process (so its first piece does not)."""
    import importlib

    for name in ("pyarrow.csv", "pyarrow.json", "pyarrow.parquet", "pyarrow.compute", "polars", "confluent_kafka",
                 "webapp.kafka.spark_io", "pyspark.cloudpickle"):
        importlib.import_module(name)
    try:
        warm_producer(kafka_config)
    except Exception:  # Kafka not reachable yet: the first batch creates it
        pass
    return os.getpid()


class BatchEngine:
    """Runs batch pieces in-process or on Spark (one per agent, shared by its tasks).

    Args:
        spark: the agent's :class:`LazySpark` (or a SparkSession, or None in tools and tests
            that never use the Spark path).
        threads: size of the in-process piece pool (default: CPU cores, at least 2). Pieces
            of one batch run in parallel there; pyarrow, polars and librdkafka release the
            GIL for their heavy parts.
        mode: the worker's default for ``raftconnect.task.engine`` (``RAFTCONNECT_TASK_ENGINE``).
        spark_min_rows: the worker's default for ``raftconnect.spark.min.batch.rows``.
        kafka_config: the worker's librdkafka settings (worker processes warm a producer with them).
    """

    #: longest wait of a batch for worker processes that are starting (seconds)
    WARM_WAIT_SECONDS = 10.0

    def __init__(self, spark: Any = None, *, threads: int | None = None, mode: str | None = None,
                 spark_min_rows: int | None = None, kafka_config: Mapping[str, Any] | None = None):
        self.spark = spark
        self.kafka_config = dict(kafka_config or {})
        self.threads = max(2, threads or os.cpu_count() or 2)
        self.mode = mode or _env_mode()
        if self.mode not in ENGINE_MODES:
            raise ValueError(f"{ENGINE_KEY} must be one of {', '.join(ENGINE_MODES)}, got {self.mode!r}")
        self.spark_min_rows = spark_min_rows or environment.spark_min_batch_rows(_DEFAULT_SPARK_MIN_ROWS)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        #: worker processes for pieces that ship whole (source pieces): ``RAFTCONNECT_ENGINE_PROCESSES``,
        #: default the CPU cores; 0 runs every piece on the thread pool
        self.processes = environment.engine_processes()
        self._procs = None
        self._procs_warm = False
        self._warming = threading.Event()  # set while no warm-up is in progress
        self._warming.set()
        self._closed = False
        self._last_rewarm = float("-inf")
        #: batches run per path since start, {"local": n, "spark": n} (for metrics and tests)
        self.batches = {"local": 0, "spark": 0}

    # -- choosing ---------------------------------------------------------------------
    def use_spark(self, config: Mapping[str, str], rows: int | None = None, *, local_ok: bool = True) -> bool:
        """Whether a batch of about ``rows`` rows of a task with ``config`` runs as a Spark job.

        ``local_ok`` is False when the task has no in-process path for this batch
        (e.g. nested values, transforms): then Spark it is, whatever the mode.
        Raises ValueError for an unknown ``raftconnect.task.engine``.
        """
        spark = self.would_use_spark(config, rows, local_ok=local_ok)
        self.batches["spark" if spark else "local"] += 1
        return spark

    def would_use_spark(self, config: Mapping[str, str], rows: int | None = None, *, local_ok: bool = True) -> bool:
        """:meth:`use_spark` without counting the batch (for planning before the batch is decided)."""
        mode = (config.get(ENGINE_KEY) or self.mode).strip().lower()
        if mode not in ENGINE_MODES:
            raise ValueError(f"{ENGINE_KEY} must be one of {', '.join(ENGINE_MODES)}, got {mode!r}")
        if not local_ok or mode == "spark":
            spark = True
        elif mode == "local" or self.spark is None:
            spark = False
        else:
            threshold = int(config.get(SPARK_MIN_ROWS_KEY) or self.spark_min_rows)
            spark = rows is not None and rows >= threshold
        return spark

    def parallelism(self, spark: bool) -> int:
        """How many pieces a batch is worth splitting into on the chosen path."""
        if spark:
            return max(1, int(self.spark.sparkContext.defaultParallelism))
        return self.threads

    # -- running ----------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="piece")
            return self._pool

    def _process_pool(self, *, wait: bool = False):
        """The engine's worker processes, or None while they are not started and warm yet.

        Spawned (a fork of the threaded agent is unsafe) and warmed by :meth:`warm`;
        until then pieces run on the thread pool rather than wait for them
        (``wait=True`` creates the pool at once).
        """
        if self.processes <= 0:
            return None
        if not wait and not self._warming.is_set():
            # the processes are starting (the agent just started): a batch waits for them rather
            # than run its pieces under the agent's GIL at a third of the speed (they are warm ~1 s
            # after the agent starts here)
            self._warming.wait(self.WARM_WAIT_SECONDS)
        with self._pool_lock:
            if self._procs is None and wait:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                self._procs = ProcessPoolExecutor(max_workers=self.processes,
                                                  mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_die_with_parent, initargs=(os.getpid(),))
                self._procs_warm = False
            return self._procs if (wait or getattr(self, "_procs_warm", False)) else None

    def warm(self) -> None:
        """Start the worker processes now and import their libraries (the agent calls this at start).

        Batches use them from when every process answered; a pool that broke is
        started again by the next call.
        """
        self._warming.clear()
        try:
            self._warm_processes()
        finally:
            self._warming.set()

    def _warm_processes(self) -> None:
        pool = self._process_pool(wait=True)
        if pool is None:
            return
        for f in [pool.submit(_warm_process, self.kafka_config) for _ in range(self.processes)]:
            try:
                f.result(timeout=120)
            except Exception:
                log.warning("the engine's worker processes did not start; pieces run on threads", exc_info=True)
                with self._pool_lock:
                    if self._procs is pool:
                        self._procs = None
                pool.shutdown(wait=False, cancel_futures=True)
                return
        with self._pool_lock:
            if self._procs is pool:
                self._procs_warm = True

    def run_pieces(self, fn: Callable[[Iterator[Any]], Iterable[Any]], n: int,
                   then: Callable[[int, Iterator[Any]], Any] | None = None, *, processes: bool = False) -> list[Any]:
        """Run ``fn`` for pieces ``0..n-1`` in-process, in parallel; results in piece order.

        ``fn`` is a ``mapInArrow``-style function: it gets an iterator of Arrow
        batches whose first column holds its piece ids and yields Arrow batches;
        :func:`partition_index` inside it returns the piece. ``then(i, batches)``
        consumes piece ``i``'s output in the same pool thread (e.g. encodes and
        produces it) and its return value is the piece's result; without it the
        result is the list of batches. The first exception of any piece is raised
        after every piece has ended (no piece keeps running unobserved).
        """
        import pyarrow as pa

        phases = getattr(_local, "phases", None)
        pool = self._process_pool() if processes and then is not None else None
        if pool is not None:
            return self._run_pieces_in_processes(pool, fn, then, n, phases)

        def one(i: int):
            _local.piece, caller = i, getattr(_local, "phases", None)
            _local.phases = phases
            try:
                out = fn(iter([pa.record_batch([pa.array([i], pa.int64())], names=["id"])]))
                return then(i, iter(out)) if then is not None else list(out)
            finally:
                _local.piece, _local.phases = None, caller

        if n == 1:
            return [one(0)]
        futures = [self._executor().submit(one, i) for i in range(n)]
        results, error = [], None
        for f in futures:
            try:
                results.append(f.result())
            except BaseException as e:  # noqa: BLE001 - re-raised below, after all pieces ended
                error = error or e
                results.append(None)
        if error is not None:
            raise error
        return results

    def _run_pieces_in_processes(self, pool, fn, then, n: int, phases: "PhaseTimes | None") -> list[Any]:
        from concurrent.futures.process import BrokenProcessPool

        from pyspark import cloudpickle

        payload = cloudpickle.dumps((fn, then))
        try:
            futures = [pool.submit(_run_in_process, payload, i) for i in range(n)]
        except BrokenProcessPool:
            self._reset_processes()
            raise RuntimeError("the engine's worker processes died (a new pool is being started); "
                               "the batch did not run") from None
        results, error = [], None
        for f in futures:
            try:
                result, seconds = f.result()
                results.append(result)
                if phases is not None:
                    for k, v in seconds.items():
                        phases.add(k, v)
            except BrokenProcessPool as e:  # a worker process died (killed, out of memory)
                self._reset_processes()
                error = error or RuntimeError(f"an engine worker process died during the batch: {e}")
                results.append(None)
            except BaseException as e:  # noqa: BLE001 - re-raised below, after all pieces ended
                error = error or e
                results.append(None)
        if error is not None:
            raise error
        return results

    def _reset_processes(self, rewarm: bool = True) -> None:
        """Drop a broken process pool (a worker died); a new one is warmed in the background, at most every 30 s."""
        import time

        with self._pool_lock:
            procs, self._procs, self._procs_warm = self._procs, None, False
            now = time.monotonic()
            rewarm = rewarm and not self._closed and now - self._last_rewarm > 30.0
            if rewarm:
                self._last_rewarm = now
        if procs is not None:
            procs.shutdown(wait=False, cancel_futures=True)
        if rewarm:
            threading.Thread(target=self.warm, name="engine-warm", daemon=True).start()

    def produce_pieces(self, fn: Callable[[Iterator[Any]], Iterable[Any]], n: int, *, topic: str,
                       kafka_config: Mapping[str, Any], producer_config: Mapping[str, Any] | None = None,
                       encode: Callable[[Any], Any]) -> int:
        """A source batch in-process: each piece's Arrow batches → ``encode`` → produced to ``topic``.

        ``fn`` yields the piece's rows as Arrow batches (see :meth:`run_pieces`);
        ``encode(batch)`` returns the batch's record values (an Arrow binary array,
        e.g. :func:`encode_values`). Pieces run in parallel, each producing as soon
        as its first rows are parsed, through the process's shared producers.

        Returns:
            Records acknowledged by the broker.

        Raises:
            webapp.kafka.spark_io.KafkaIOError: a delivery failed (some records may have been written).
            Whatever ``fn`` or ``encode`` raise.
        """
        import pyarrow as pa

        from webapp.kafka.spark_io import KafkaIOError, produce_function

        produce = produce_function(topic, kafka_config, producer_config=producer_config)

        def encoded(batch):
            with phase("encode"):
                return pa.record_batch([encode(batch)], names=["value"])

        def then(_i: int, batches: Iterator[Any]) -> int:
            values = timed((encoded(b) for b in timed(batches, "read") if b.num_rows), "_source")
            with phase("_piece"):
                return sum(int(x.column(0)[0].as_py()) for x in produce(values))

        try:
            return int(sum(self.run_pieces(fn, n, then, processes=True)))
        except RuntimeError as e:
            if str(e).startswith("[kafka]"):
                raise KafkaIOError(str(e)) from e
            raise

    def shutdown(self) -> None:
        """Stop the piece pool and the worker processes (pieces in flight finish)."""
        self._closed = True
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self._reset_processes(rewarm=False)


# --------------------------------------------------------------------------------------
# Encoding JsonConverter values in-process
# --------------------------------------------------------------------------------------
def _encodable_type(t) -> bool:
    import pyarrow.types as pt

    if pt.is_dictionary(t):
        return _encodable_type(t.value_type)
    if (pt.is_integer(t) and not pt.is_uint64(t)) or pt.is_floating(t) or pt.is_boolean(t) or pt.is_null(t):
        return True
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_timestamp(t) or pt.is_date(t):
        return True
    if pt.is_binary(t) or pt.is_large_binary(t):
        return True
    if pt.is_list(t) or pt.is_large_list(t):
        return _encodable_type(t.value_type)
    if pt.is_struct(t):
        return all(_encodable_type(t.field(i).type) for i in range(t.num_fields))
    return False  # decimals, maps, times, fixed-size binary: the JVM path encodes them


def local_encodable(schema) -> bool:
    """Whether :func:`encode_values` handles every column of the Arrow ``schema``."""
    return all(_encodable_type(f.type) for f in schema)


def _to_wire(arr):
    """An Arrow array in JsonConverter's wire form: timestamps → epoch ms, dates → epoch days, bytes → base64."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    t = arr.type
    if pt.is_dictionary(t):
        return _to_wire(arr.dictionary_decode())
    if pt.is_timestamp(t):
        if t.unit in ("us", "ns"):  # floor to ms, as Spark's unix_millis
            arr = pc.floor_temporal(arr, unit="millisecond")
        return arr.cast(pa.timestamp("ms", tz=t.tz)).view(pa.int64())
    if pt.is_date(t):
        return arr.cast(pa.date32()).view(pa.int32())
    if pt.is_binary(t) or pt.is_large_binary(t):
        import base64

        return pa.array([None if v is None else base64.b64encode(v).decode("ascii") for v in arr.to_pylist()],
                        pa.string())
    if pt.is_list(t) or pt.is_large_list(t):
        flat = _to_wire(arr.flatten())
        if flat.type == t.value_type:
            return arr
        offsets = pc.subtract(arr.offsets, arr.offsets[0]) if arr.offset else arr.offsets
        return pa.ListArray.from_arrays(offsets, flat, mask=arr.is_null() if arr.null_count else None)
    if pt.is_struct(t):
        children = [_to_wire(arr.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, names=[t.field(i).name for i in range(t.num_fields)],
                                          mask=arr.is_null() if arr.null_count else None)
    return arr


def encode_values(batch, *, schemas_enable: bool = True, connect_schema: Mapping[str, Any] | None = None,
                  columns: Sequence[str] | None = None):
    """JsonConverter values of ``batch``'s rows as an Arrow binary array (one value per row).

    Args:
        batch: ``pyarrow.RecordBatch`` or ``Table``.
        schemas_enable: wrap each payload in ``{"schema":...,"payload":...}``.
        connect_schema: the schema to embed (default derived from the Arrow schema).
        columns: which columns form the value (default all, in order).

    Returns:
        ``pyarrow.BinaryArray``: each row's value; null fields are written as JSON
        null, timestamps as epoch ms and dates as epoch days, as the JVM path writes
        them. Floats are written in their shortest round-trip form; NaN and
        infinities as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, as
        Kafka Connect's JsonConverter (Jackson's default) and Spark's ``to_json`` write
        them (top-level fields; a float inside a nested struct or list still becomes null).

    Raises:
        ValueError: a column type this encoder does not handle (see :func:`local_encodable`).
    """
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc

    from .converters import arrow_to_connect_schema, envelope_prefix

    if isinstance(batch, pa.RecordBatch):
        table = pa.Table.from_batches([batch])
    else:
        table = batch
    if columns is not None:
        table = table.select(list(columns))
    if not local_encodable(table.schema):
        raise ValueError(f"cannot encode {table.schema} in-process")
    wired = pa.table([_to_wire(c.combine_chunks()) for c in table.columns], names=table.column_names)
    if wired.num_rows == 0:
        return pa.array([], pa.binary())
    frame = pl.from_arrow(wired, rechunk=False)
    if isinstance(frame, pl.Series):
        frame = frame.to_frame()
    if _has_non_finite(wired):
        payload = _json_rows_with_non_finite(frame).to_arrow()
    else:
        payload = frame.select(pl.struct(pl.all()).struct.json_encode().alias("v")).to_series().to_arrow()
    if isinstance(payload, pa.ChunkedArray):
        payload = payload.combine_chunks()
    payload = payload.cast(pa.string())
    if schemas_enable:
        schema = connect_schema if connect_schema is not None else arrow_to_connect_schema(table.schema)
        payload = pc.binary_join_element_wise(envelope_prefix(schema), payload, "}", "")
    return payload.cast(pa.binary())


#: JSON text of the float values JSON has no number for, as Jackson writes them by default
#: (JsonConverter) and Spark's ``to_json`` does
NON_FINITE_JSON = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def _has_non_finite(table) -> bool:
    """True when a top-level float column of ``table`` holds NaN or an infinity."""
    import pyarrow.compute as pc
    import pyarrow.types as pt

    for col in table.columns:
        if pt.is_floating(col.type) and col.length() > col.null_count:
            if not pc.all(pc.is_finite(col)).as_py():
                return True
    return False


def _json_rows_with_non_finite(frame):
    """Each row of ``frame`` as the JSON object polars' ``struct.json_encode`` writes, except that NaN and
    infinities in float columns are :data:`NON_FINITE_JSON` instead of null.

    Built from each column's own encoding (``{"name":<value>}`` with its braces cut), joined in order,
    so every other value keeps polars' exact text. Returns a polars String Series.
    """
    import polars as pl

    parts: list = [pl.lit("{")]
    for i, name in enumerate(frame.columns):
        key = pl.select(pl.struct(pl.lit(None, pl.Int8).alias(name)).struct.json_encode()).item()[1:-len("null}")]
        text = pl.struct(pl.col(name)).struct.json_encode().str.slice(len(key) + 1).str.head(-1)
        if frame.schema[name].is_float():
            col = pl.col(name)
            text = (pl.when(col.is_nan()).then(pl.lit(NON_FINITE_JSON["nan"]))
                    .when(col == float("inf")).then(pl.lit(NON_FINITE_JSON["inf"]))
                    .when(col == float("-inf")).then(pl.lit(NON_FINITE_JSON["-inf"]))
                    .otherwise(text))
        parts += [pl.lit(("," if i else "") + key), text]
    parts.append(pl.lit("}"))
    return frame.select(pl.concat_str(parts).alias("v")).to_series()
