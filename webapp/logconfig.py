"""Log output of every RaftConnect process: plain text or JSON lines, with credentials masked.

Owns the ``LOGGING`` dict that :mod:`webapp.settings` installs (node, agent and
management commands alike) and the two formatters it names:

* ``RAFTCONNECT_LOG_FORMAT=plain`` (default): ``time level logger: message``.
* ``RAFTCONNECT_LOG_FORMAT=json``: one JSON object per line (python-json-logger)
  with ``time``, ``level``, ``logger``, ``message``, ``process``, ``thread`` and,
  on errors, ``exc_info`` (the traceback as one string), for log shippers.

Both mask credentials in the finished line, tracebacks included: the password
of any ``scheme://user:password@host`` URL, and the values of the secrets the
process was given (``RAFTCONNECT_CLUSTER_SECRET``, ``RAFTCONNECT_SECRET_KEY``,
``RAFTCONNECT_ADMIN_PASSWORD`` and the passwords inside ``RAFTCONNECT_STORE_*``
and ``RAFTCONNECT_CELERY_BROKER`` URLs). Secret values shorter than
:data:`MIN_SECRET_LENGTH` characters are only masked inside URLs (masking every
occurrence of a two-letter word would garble the log).

:class:`ThrottledLogger` thins out waitress's ``Task queue depth is N`` warnings (the node's
REST server installs it): waitress logs one, under its task lock, for every request that finds
all REST threads busy, which under 32 concurrent clients was ~70 % of the leader's requests
(benchmarks/cluster, issue 16).
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from pythonjsonlogger.json import JsonFormatter

__all__ = ["MASK", "MIN_SECRET_LENGTH", "RedactingFormatter", "RedactingJsonFormatter", "Redactor",
           "ThrottledLogger", "logging_config"]

MASK = "***"
MIN_SECRET_LENGTH = 6
_SECRET_VARS = ("RAFTCONNECT_CLUSTER_SECRET", "RAFTCONNECT_SECRET_KEY", "RAFTCONNECT_ADMIN_PASSWORD")
_URL_VARS_PREFIXES = ("RAFTCONNECT_STORE_", "RAFTCONNECT_CELERY_BROKER")
# scheme://user:password@ — the password part; stops at whitespace and quotes (JSON lines).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s\"']*:)[^@\s\"'/]+@")


class Redactor:
    """Masks credentials in a finished log line.

    Args:
        environ: where the secrets are read (default :data:`os.environ`, read once).
    """

    def __init__(self, environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        values = {env.get(k, "") for k in _SECRET_VARS}
        for key, value in env.items():
            if key.startswith(_URL_VARS_PREFIXES) and "://" in value:
                try:
                    password = urlsplit(value).password
                except ValueError:
                    password = None
                if password:
                    values.update({password, unquote(password)})
        forms: set[str] = set()
        for v in values:
            if len(v) >= MIN_SECRET_LENGTH:
                forms.update({v, json.dumps(v)[1:-1]})  # as written, and as escaped inside a JSON string
        # longest first, so a secret containing another is masked whole
        self._secrets = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` with URL passwords and known secret values replaced by :data:`MASK`."""
        text = _URL_PASSWORD.sub(rf"\1{MASK}@", text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


class RedactingFormatter(logging.Formatter):
    """:class:`logging.Formatter` whose output went through a :class:`Redactor`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._redact = Redactor()

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    """python-json-logger's formatter (one JSON object per record, on one line), redacted."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._redact = Redactor()

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


class ThrottledLogger:
    """A stand-in for a logger whose every record says the same thing under load: at most one
    warning per ``interval`` seconds goes to ``logger``, with `` (N more in the last S s)`` appended.

    Decides before a record exists, so a held-back warning costs a clock read and a lock. Made
    for waitress's queue logger (``ThreadedTaskDispatcher.queue_logger``), which it calls while
    holding its task lock. Thread-safe; only ``warning`` is offered (all waitress calls there).

    Args:
        logger: where the warnings that pass go.
        interval: seconds between two warnings that pass.
        clock: monotonic seconds (tests).
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0, clock=time.monotonic) -> None:
        self.logger = logger
        self.interval = float(interval)
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._held = 0

    def warning(self, msg: str, *args: Any) -> None:
        """``logger.warning(msg, *args)`` unless one passed less than ``interval`` seconds ago."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self.interval:
                self._held += 1
                return
            held, since = self._held, (now - self._last if self._last is not None else 0.0)
            self._last, self._held = now, 0
        if held:
            self.logger.warning(msg + " (%d more in the last %.0f s)", *args, held, since)
        else:
            self.logger.warning(msg, *args)


def logging_config(fmt: str = "plain", level: str = "INFO") -> dict[str, Any]:
    """The ``LOGGING`` dict for :func:`logging.config.dictConfig`.

    Args:
        fmt: ``plain`` or ``json`` (``RAFTCONNECT_LOG_FORMAT``).
        level: root level name (``RAFTCONNECT_LOG_LEVEL``).

    Raises:
        ValueError: for another ``fmt``.
    """
    fmt = (fmt or "plain").strip().lower()
    if fmt not in ("plain", "json"):
        raise ValueError(f"RAFTCONNECT_LOG_FORMAT must be plain or json (got {fmt!r})")
    formatters = {
        "plain": {"()": f"{__name__}.RedactingFormatter",
                  "format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": f"{__name__}.RedactingJsonFormatter",
                 "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(process)d %(threadName)s",
                 "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger",
                                   "threadName": "thread"}},
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {fmt: formatters[fmt]},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": fmt}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"pysyncobj": {"level": "WARNING"}, "py4j": {"level": "WARNING"}},
    }
