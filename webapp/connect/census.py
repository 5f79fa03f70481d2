"""A diagnostic: what a node's memory is made of, written every so often while it runs.

Owns the memory census that ``runnode`` starts when ``RAFTCONNECT_MEMORY_CENSUS_DIR`` is set (off
by default): every ``RAFTCONNECT_MEMORY_CENSUS_S`` seconds (default 60) a daemon thread appends one
JSON line to ``<dir>/<node id>-<pid>.jsonl``. Made to find what a leader holds at issue 16's scale
(``benchmarks/scale``), where its RSS was three times its live state; it must not change anything
it reads.

A line: ``{"t": unix seconds, "rss", "heap", "files" (bytes: VmRSS, RssAnon, RssFile), "blocks"
(``sys.getallocatedblocks()``: Python's allocated memory blocks), "gc_counts" (the collector's
generation counts), "gc_collected" (per generation, the objects its collections found to be
cyclic garbage since start: what reference counting could not free), "gc_pauses" (collections and
longest pause per generation since start, and the freeze policy's figures, :mod:`webapp.gcpolicy`;
``null`` where not monitored), "raft": {"snapshots_loaded" (by the state since start: at start, or sent by a
leader to a member that fell behind its log), "log_entries", "log_bytes" (pysyncobj's log held in
memory), "send_buffers": {peer: unsent bytes}}}``. Cheap (no walk of the objects), but a diagnostic.

With ``RAFTCONNECT_MEMORY_CENSUS_TRACE=N`` the node also traces its allocations with
``tracemalloc`` (N frames each; slows every allocation and costs memory) and each interval
appends the sites holding the most memory to ``<dir>/<node id>-<pid>.trace.jsonl``
(:func:`allocation_sites`): where a member's growth comes from.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import sys
import threading
import time
from typing import Any, Callable

from webapp import gcpolicy

__all__ = ["DIR_ENV", "INTERVAL_ENV", "TRACE_ENV", "allocation_sites", "census", "proc_status", "start_from_env"]

log = logging.getLogger(__name__)

DIR_ENV = "RAFTCONNECT_MEMORY_CENSUS_DIR"
INTERVAL_ENV = "RAFTCONNECT_MEMORY_CENSUS_S"
#: frames per traceback for the allocation trace (unset or 0: no trace)
TRACE_ENV = "RAFTCONNECT_MEMORY_CENSUS_TRACE"
#: allocation sites per trace line
TRACE_TOP = 12


def allocation_sites(top: int = TRACE_TOP) -> list[dict[str, Any]]:
    """The ``top`` tracebacks holding the most memory among live blocks allocated since
    ``tracemalloc`` started: ``[{"bytes", "blocks", "trace": ["file:line", ...] (innermost last)}]``.

    A snapshot copies the traces in C under tracemalloc's own lock (no walk of Python objects,
    unlike ``gc.get_objects``); with millions of traced blocks it takes seconds and memory.
    Empty when tracemalloc is not tracing.
    """
    import tracemalloc

    if not tracemalloc.is_tracing():
        return []
    stats = tracemalloc.take_snapshot().statistics("traceback")[:top]
    return [{"bytes": st.size, "blocks": st.count,
             "trace": [f"{frame.filename}:{frame.lineno}" for frame in st.traceback]} for st in stats]


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """``{"VmRSS", "RssAnon", "RssFile"}`` of process ``pid`` (this one by default) in bytes, from
    ``/proc/<pid>/status``; empty when the process is gone or ``/proc`` cannot be read."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    out[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def _raft_figures(raft: Any) -> dict[str, Any]:
    """Of a ``raftnode.RaftNode``: the snapshots its state loaded, the pysyncobj log held in memory and
    each peer connection's unsent bytes (private attributes of pysyncobj 0.3, read only; left out
    where they are not there)."""
    if raft is None:
        return {}
    out: dict[str, Any] = {"snapshots_loaded": getattr(raft.state, "snapshots_loaded", None)}
    syncobj = raft.syncobj
    entries = getattr(syncobj, "_SyncObj__raftLog", None)
    try:
        if entries is not None:
            out["log_entries"] = len(entries)
            out["log_bytes"] = sum(len(e[0]) for e in list(entries))
    except Exception:  # noqa: BLE001 - a diagnostic never fails the node
        pass
    transport = getattr(syncobj, "_SyncObj__transport", None)
    connections = getattr(transport, "_connections", None) or {}
    buffers = {}
    for node, conn in list(connections.items()):
        size = getattr(conn, "getSendBufferSize", None)
        if size is not None:
            buffers[str(node)] = size()
    out["send_buffers"] = buffers
    return out


def census(raft: Any = None) -> dict[str, Any]:
    """One census of this process (see the module docstring for its shape)."""
    status = proc_status()
    # No walk of every object (gc.get_objects): while a list of them is held, another thread may
    # resume building one of them, a tuple, whose resize then fails ("SystemError: bad argument to
    # internal function"): seen in benchmarks/scale, and beside Django even when the list was only
    # passed through C calls (tests/connect/test_census.py).
    n = sys.getallocatedblocks()
    return {"t": time.time(), "rss": status.get("VmRSS", 0), "heap": status.get("RssAnon", 0),
            "files": status.get("RssFile", 0), "blocks": n, "gc_counts": list(gc.get_count()),
            "gc_collected": [g["collected"] for g in gc.get_stats()], "gc_pauses": gcpolicy.status(),
            "raft": _raft_figures(raft)}


def start_from_env(node_id: str, raft: Callable[[], Any]) -> threading.Thread | None:
    """Start the census thread when :data:`DIR_ENV` is set; ``raft()`` gives the node's
    ``raftnode.RaftNode`` (or ``None``). Returns the thread, or ``None`` when the census is off.

    Errors: ``ValueError`` when :data:`INTERVAL_ENV` is not a positive number.
    """
    directory = os.environ.get(DIR_ENV)
    if not directory:
        return None
    interval = float(os.environ.get(INTERVAL_ENV, "60"))
    if interval <= 0:
        raise ValueError(f"{INTERVAL_ENV} must be a positive number of seconds")
    frames = int(os.environ.get(TRACE_ENV) or 0)
    if frames < 0:
        raise ValueError(f"{TRACE_ENV} must be a number of frames (0: no allocation trace)")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{node_id}-{os.getpid()}.jsonl")
    trace_path = os.path.join(directory, f"{node_id}-{os.getpid()}.trace.jsonl")
    if frames:
        import tracemalloc

        tracemalloc.start(frames)  # from now on: what a line's sites hold was allocated since start

    def run() -> None:
        while True:
            time.sleep(interval)
            try:
                line = json.dumps(census(raft()))
                sites = json.dumps({"t": time.time(), "sites": allocation_sites()}) if frames else None
            except Exception:  # noqa: BLE001 - a diagnostic never fails the node
                log.exception("memory census failed")
                continue
            with open(path, "a") as fh:
                fh.write(line + "\n")
            if sites is not None:
                with open(trace_path, "a") as fh:
                    fh.write(sites + "\n")

    thread = threading.Thread(target=run, name="memory-census", daemon=True)
    thread.start()
    log.warning("memory census every %.0f s into %s (diagnostic; it holds the GIL while it counts)", interval, path)
    return thread
