"""The node's REST server: the HTTP server in front of the WSGI application (Django, DRF).

Two servers, chosen per node with ``--rest-server`` (``RAFTCONNECT_REST_SERVER``):

* ``granian`` (the default): :class:`GranianRESTServer`, granian's WSGI worker run inside the
  node's process. Connections, HTTP/1.1 parsing and response writes happen on granian's Rust
  threads, which do not hold the GIL; only the WSGI call itself runs on one of ``threads`` Python
  threads. On a Raft leader the GIL is what a request waits for: against waitress in the same run,
  32 clients got 1.75x the ``GET /`` (0.51-0.54 -> 0.29-0.34 ms of the leader's CPU each), 1.17x
  the config reads and 1.11x the config writes (``benchmarks/cluster/RESULTS_REST_MIX.md``, issue 16).
* ``waitress``: :func:`waitress_server`, pure Python (its loop, parser and buffers hold the GIL).
  Kept as the fallback for a platform granian's wheels do not cover.

Both bound the client connections open at once (``connection_limit``): beyond it the server stops
accepting until one closes. Both answer with ``Server: raftconnect``.
"""
from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from typing import Any, Callable, Iterable

from raftnode.osthreads import name_os_thread

#: the ``Server`` header of every answer, whichever server runs
SERVER_IDENT = "raftconnect"
#: ``--rest-server`` choices; the first is the default
SERVERS = ("granian", "waitress")
#: ms a kept-alive connection may stay idle (or take to send a request's headers) before granian closes
#: it: waitress's ``channel_timeout`` (120 s). granian's own 30 s closed connections agents and
#: forwarding members keep between calls, and their next POST failed with a broken pipe.
IDLE_TIMEOUT_MS = 120_000
#: the granian release series whose worker this module drives (see :class:`GranianRESTServer`)
GRANIAN_SERIES = "2.8."

#: the kernel's name for the Python threads running the application under granian (``top -H``,
#: ``/proc/<pid>/task/*/comm``); granian's Rust threads keep theirs (``tokio-rt-worker``)
REST_THREAD_NAME = "rest"

WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]


def rest_server(application: WSGIApp, *, kind: str = "granian", host: str, port: int, threads: int,
                connection_limit: int, idle_timeout_ms: int = IDLE_TIMEOUT_MS):
    """The REST server ``kind`` (one of :data:`SERVERS`) for ``application`` on ``host:port``.

    The socket is bound and listening when this returns (``OSError`` if the address is in use or
    not this machine's); ``run()`` serves until ``close()``. ``threads``: Python threads running the
    application. ``connection_limit``: client connections open at once. ``idle_timeout_ms``: how long
    a connection may stay idle between requests before the server closes it. ``ValueError`` for an
    unknown ``kind``; ``RuntimeError`` when granian is not the release series this module drives.
    """
    if kind == "granian":
        return GranianRESTServer(application, host=host, port=port, threads=threads,
                                 connection_limit=connection_limit, idle_timeout_ms=idle_timeout_ms)
    if kind == "waitress":
        return waitress_server(application, host=host, port=port, threads=threads,
                               connection_limit=connection_limit, idle_timeout_ms=idle_timeout_ms)
    raise ValueError(f"unknown REST server {kind!r}: one of {', '.join(SERVERS)}")


# ------------------------------------------------------------------------------ granian
class _Start:
    """The ``start_response`` of one request: keeps the status code and headers for granian."""

    __slots__ = ("headers", "status")

    def __init__(self) -> None:
        self.status = 500
        self.headers: list[tuple[str, str]] = []

    def __call__(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        self.status = int(status[:3])
        if not any(k.lower() == "server" for k, _ in headers):
            headers = [*headers, ("Server", SERVER_IDENT)]
        self.headers = headers


class _Chunks:
    """A streamed body for granian: ``__next__`` gives its chunks; ``close()`` is the WSGI body's own."""

    __slots__ = ("__next__", "body")

    def __init__(self, body: Iterable[bytes]) -> None:
        self.body = body
        self.__next__ = iter(body).__next__

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


def _thread_namer() -> Callable[[], None]:
    """A function that names the thread calling it :data:`REST_THREAD_NAME` for the kernel, once per
    thread (its first call there; later calls only read a thread-local flag)."""
    named = threading.local()

    def name_thread() -> None:
        if not getattr(named, "done", False):
            named.done = True
            name_os_thread(REST_THREAD_NAME)

    return name_thread


def _granian_callback(application: WSGIApp, server_name: str, server_port: str):
    """The function granian's worker calls per request: ``(proto, scope) -> status``.

    ``scope`` is the request's part of the WSGI environ (method, path, headers, ``wsgi.input``);
    the rest is fixed here. granian's own wrapper copies the whole process environment into every
    environ (CGI style); a node's environment holds the cluster secret and the admin password,
    which must not reach ``request.META``, so this one does not. A Django response that is not
    streamed is handed over as one ``bytes`` (not iterated chunk by chunk from Rust) and closed
    right after, which sends Django's ``request_finished``. Each Python thread granian runs it on
    names itself :data:`REST_THREAD_NAME` for the kernel on its first request.
    """
    base = {
        "GATEWAY_INTERFACE": "CGI/1.1", "SCRIPT_NAME": "", "SERVER_SOFTWARE": SERVER_IDENT,
        "SERVER_NAME": server_name, "SERVER_PORT": server_port,
        "wsgi.errors": sys.stderr,
        "wsgi.input_terminated": True, "wsgi.multiprocess": False, "wsgi.multithread": True,
        "wsgi.run_once": False, "wsgi.version": (1, 0),
    }

    name_thread = _thread_namer()

    def call(proto, scope) -> int:
        name_thread()
        start = _Start()
        body = application(base | scope, start)
        if isinstance(body, list):
            proto.response_bytes(start.status, start.headers, b"".join(body))
        elif getattr(body, "streaming", True) is False:  # django.http.HttpResponse: its content is in memory
            try:
                proto.response_bytes(start.status, start.headers, body.content)
            finally:
                body.close()
        else:
            proto.response_iter(start.status, start.headers, _Chunks(body))
        return start.status

    return call


class GranianRESTServer:
    """granian's WSGI worker serving ``application`` from this process.

    granian runs applications in worker processes it spawns; it offers in-process serving only for
    ASGI and RSGI (``granian.server.embed``) and worker threads only on free-threaded Python. A node
    must keep its REST API in the process that holds its Raft member and agent (one lifecycle, one
    ``kill``), and Django's views are synchronous, so this drives the worker granian's process
    workers run (``granian._granian.WSGIWorker``) from a thread of its own, with the constructor of
    the release series :data:`GRANIAN_SERIES` (pinned in ``requirements.txt``; another series is
    refused at start with a clear message, not a ``TypeError`` mid-way).

    The listening socket is this class's own: granian's binds with ``SO_REUSEPORT``, with which a
    second node started on the same port would silently share it; this one fails with
    ``EADDRINUSE``. ``connection_limit`` is granian's ``backpressure``: each connection holds one
    of that many permits while it is open, and the accept loop waits for a free one.

    Raises ``OSError`` (address in use, not local) or ``RuntimeError`` (granian series).
    """

    def __init__(self, application: WSGIApp, *, host: str, port: int, threads: int, connection_limit: int,
                 idle_timeout_ms: int = IDLE_TIMEOUT_MS, backlog: int = 2048) -> None:
        import granian

        if not granian.__version__.startswith(GRANIAN_SERIES):
            raise RuntimeError(f"the REST server drives granian {GRANIAN_SERIES}x, found {granian.__version__}: "
                               f"install the version in requirements.txt or start with --rest-server waitress")
        host = host.strip("[]")
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        self.socket = socket.create_server((host, port), family=family, backlog=backlog)
        self.address = self.socket.getsockname()[:2]
        self._backlog = backlog
        self._application = application
        self._threads = max(1, threads)
        self._connection_limit = max(1, connection_limit)
        self._idle_timeout_ms = max(1, idle_timeout_ms)
        self._signal = None
        self._stopped = threading.Event()
        #: set once granian has stopped and let go of its descriptor (its signal's callback)
        self.released = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        """Serve until :meth:`close` (from another thread or a signal handler); returns once granian has stopped.

        granian's listener takes ownership of the descriptor it is given and closes it when it
        stops, after :meth:`close` returned. Given the socket's own descriptor, that second close
        hit whatever had been opened under the same number meanwhile: under the test suite,
        another server's socket, whose ``listen`` then failed inside granian, which aborts the
        process on a Rust panic. granian is given a duplicate (``os.dup``) of its own.
        """
        from granian._futures import _new_cbscheduler
        from granian._granian import MetricsAggregator, SocketHolder, WorkerSignal, WSGIWorker
        from granian._loops import loops
        from granian.http import HTTP1Settings

        with self._lock:
            if self._stopped.is_set():
                self.released.set()
                return
            self._signal = WorkerSignal()
            self._signal.add_cb(self.released.set)
            fd = os.dup(self.socket.fileno())
        loop = loops.get("asyncio")  # the worker's API wants one; WSGI calls never run on it
        try:
            holder = SocketHolder(fd, False, self._backlog)
        except BaseException:
            os.close(fd)
            raise
        worker = WSGIWorker(
            1, (None, holder), None,
            1,  # Rust I/O threads: connections and parsing, outside the GIL
            512,  # Rust blocking threads (granian's default)
            # Python threads for the WSGI calls. An idle one ends after 600 s (granian's longest; its
            # default is 30 s): each keeps its own store connections (Django's are per thread), and
            # a PyMySQL connection costs ~40 ms of CPU to open
            self._threads, 600,
            self._connection_limit,  # backpressure: connections open at once
            "1", HTTP1Settings(header_read_timeout=self._idle_timeout_ms), None,  # HTTP/1.1 only
            None,  # no static files of granian's own (the console's come through Django: ConsoleFilesMiddleware)
            False, None, None, None, "tls1.3", None, [], False,  # no TLS
            (None, MetricsAggregator(1)),  # no metrics endpoint of granian's own
        )
        callback = _granian_callback(self._application, str(self.address[0]), str(self.address[1]))
        # the asyncio flavour of granian's scheduler: its Rust flavour registers a never-initialised
        # stand-in asyncio.Task for the whole process, and asyncio.all_tasks() (asyncio.run's exit,
        # any asyncio client) then raises "Future object is not initialized". WSGI calls use neither.
        worker.serve_mtr(_new_cbscheduler(loop, callback, impl_asyncio=True), loop, self._signal)
        self._stopped.wait()
        self.released.wait(30)  # granian finishes its open requests and closes its descriptor
        loop.close()

    def close(self) -> None:
        """Stop accepting and have :meth:`run` return once granian stopped; idempotent."""
        with self._lock:
            self._stopped.set()
            if self._signal is not None:
                self._signal.set()
        try:
            self.socket.close()
        except OSError:
            pass


# ------------------------------------------------------------------------------ waitress
def _quiet_channel_class():
    """waitress's ``HTTPChannel`` that the loop does not watch for writing while a thread serves its request.

    waitress's loop asks every channel, at each turn, whether it wants to read or write, and watches
    for writing (``POLLOUT``) whenever its output buffer is not empty. A task thread appends the
    response to that buffer and sends it itself (``send_bytes`` is 1: at once), holding the
    buffer's lock; in between, and while that thread waits for the GIL, the loop found the buffer
    not empty, the socket writable and the lock taken: ``poll`` returned at once, turn after turn.
    Under 32 REST clients the leader's loop made ~100 turns per request, each over every open
    socket, and held most of the GIL: ``GET /`` ran at 250-370 requests/s with 2.9-4.5 ms of the
    leader's CPU each, config writes at 470-525/s (benchmarks/cluster, issue 16).

    Here a channel whose request is still being served is watched for writing only when its buffer
    holds at least ``outbuf_high_watermark`` bytes (the task thread then waits for the loop to drain
    it) or the channel is to close. Otherwise the task thread flushes its own output, and once the
    request is done (waitress pulls its trigger when output is left) the loop sends the rest as
    before. Every response of this application is written in one or two calls before its task
    ends, so nothing waits longer than its request. Same 32 clients: ``GET /`` 1,040-1,240/s at
    0.7-0.85 ms, config writes 580-655/s.
    """
    from waitress.channel import HTTPChannel

    class QuietHTTPChannel(HTTPChannel):
        def writable(self) -> bool:
            if self.will_close or self.close_when_flushed:
                return True
            pending = self.total_outbufs_len
            return bool(pending) and (not self.requests or pending >= self.adj.outbuf_high_watermark)

    return QuietHTTPChannel


#: seconds :meth:`run` of the waitress server waits, once its loop has stopped, for requests its
#: threads are still serving (waitress's own ``shutdown`` default)
WAITRESS_DRAIN_S = 5.0


def _closing_server_class():
    """waitress's ``TcpWSGIServer`` whose ``close()``, from any thread, ends ``run()``.

    waitress's own ``close()`` closes only the listening socket and the loop's trigger: its loop
    runs while any channel is left in its map, so with a client connection kept alive ``run()``
    never returned, and its task threads lived on. Here ``close()`` hands the loop's thread (through
    the trigger) the closing of every channel in the map, the listening one included; the loop
    then finds its map empty and returns, and ``run()`` stops the task threads, waiting up to
    :data:`WAITRESS_DRAIN_S` for requests they are serving. Before ``run()`` has started, or after it
    returned, ``close()`` closes the sockets itself. Idempotent.
    """
    from waitress.server import TcpWSGIServer

    class ClosingWSGIServer(TcpWSGIServer):
        def __init__(self, *args, **kw) -> None:
            self._state_lock = threading.Lock()
            self._running = False
            self._closing = False
            super().__init__(*args, **kw)

        def run(self) -> None:
            with self._state_lock:
                if self._closing:
                    return
                self._running = True
            try:
                super().run()
            finally:
                with self._state_lock:
                    self._running = False
                self._close_channels()  # the loop may have ended another way (a signal)
                self.task_dispatcher.shutdown(cancel_pending=True, timeout=WAITRESS_DRAIN_S)

        def close(self) -> None:
            with self._state_lock:
                if self._closing:
                    return
                self._closing = True
                running = self._running
                if running:
                    # under the state lock: run()'s finally, which closes the trigger, cannot run in
                    # between (a pull after it raised EBADF on the closed trigger: a CI flake)
                    self._pull_close()
            if not running:
                self._close_channels()

        def _pull_close(self) -> None:
            """Hand :meth:`_close_channels` to the loop's thread and wake it.

            waitress's ``pull_trigger`` appends the thunk under the trigger's lock, releases it, then
            writes to the pipe. A loop already woken by an earlier pull (a channel with output left
            pulls one) could run the thunk in that gap: it closed the trigger, and the write that
            followed raised EBADF (a CI flake), or could have hit a descriptor reopened under the
            same number. The loop runs thunks holding that lock (``handle_read``), so appending and
            writing under it keeps the trigger open until the write is done.
            """
            trigger = self.trigger
            with trigger.lock:
                trigger.thunks.append(self._close_channels)
                trigger._physical_pull()

        def _close_channels(self) -> None:
            for channel in list(self._map.values()):
                if channel is not self and channel is not self.trigger:
                    channel.handle_close()  # wakes a task thread waiting to write to it
            TcpWSGIServer.close(self)  # the trigger and the listening socket

    return ClosingWSGIServer


def waitress_server(application: WSGIApp, *, host: str, port: int, threads: int, connection_limit: int,
                    idle_timeout_ms: int = IDLE_TIMEOUT_MS):
    """waitress serving ``application`` on ``host:port`` (``run()`` until ``close()``, from any thread).

    ``idle_timeout_ms`` is waitress's ``channel_timeout`` (whole seconds, 120 its default).
    ``connection_limit`` is how many client connections waitress keeps open at once; beyond it
    waitress stops accepting until one closes. Its default of 100 is below what the leader needs at
    100 workers (each agent keeps its heartbeat and task connections alive, followers forward
    theirs): found by ``benchmarks/scale``, where the leader stopped answering at 20 simulated workers.
    Its queue-depth warnings pass once per 10 s (:class:`webapp.logconfig.ThrottledLogger`).

    Its loop waits with ``poll`` (``asyncore_use_poll``), not waitress' default ``select``, which
    cannot watch a file descriptor numbered 1024 or more: with ~1,000 connections open the next one
    got such a number and the loop raised ``ValueError: filedescriptor out of range in select()``,
    which stopped the node (a leader at 100 simulated workers in ``benchmarks/scale``).

    Its channels are :func:`_quiet_channel_class`'s: the loop does not spin on a channel whose
    request a thread is still serving. Each task thread names itself :data:`REST_THREAD_NAME` for the
    kernel on its first request, as granian's Python threads do. The server is
    :func:`_closing_server_class`'s: ``close()`` closes the open connections too and ends ``run()``.
    It listens on the first address ``host`` resolves to (``Adjustments.listen[0]``), as the granian
    server does; waitress's ``create_server`` listened on each of them. Raises ``OSError`` when the
    address is in use or not this machine's.
    """
    from waitress.adjustments import Adjustments

    from webapp.logconfig import ThrottledLogger

    name_thread = _thread_namer()

    def named_application(environ, start_response):  # each task thread: "rest" for the kernel, as granian's
        name_thread()
        return application(environ, start_response)

    adj = Adjustments(host=host.strip("[]"), port=port, threads=threads, ident=SERVER_IDENT,
                      clear_untrusted_proxy_headers=True, connection_limit=connection_limit,
                      asyncore_use_poll=True, channel_timeout=max(1, idle_timeout_ms // 1000))
    server = _closing_server_class()(named_application, adj=adj)  # its own map, task threads, adj.listen[0]
    # waitress warns "Task queue depth is N", under its task lock, for every request that waits for a
    # thread: one warning per 10 s with the count instead (benchmarks/cluster, issue 16)
    server.task_dispatcher.queue_logger = ThrottledLogger(logging.getLogger("waitress.queue"), 10.0)
    server.channel_class = _quiet_channel_class()  # the loop must not spin on busy channels (see there)
    return server
