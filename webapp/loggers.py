"""Runtime log levels of one process, with Kafka Connect's ``/admin/loggers`` semantics (KIP-495, KIP-976).

Owns mapping Connect's log4j level names to Python ``logging`` levels, listing
loggers with their levels and last-modified times, and setting a level on a
namespace (the logger and every current logger whose name starts with it, as
Connect's ``Loggers.setLevel`` does). Levels live in process memory only: a
restarted process starts from its logging configuration again, as in Connect.

Must not forward or fan out requests (the REST view does, see
``webapp.connect.api.loggers``).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["ROOT_LOGGER_NAME", "LEVELS", "InvalidLevel", "Loggers", "process_loggers"]

ROOT_LOGGER_NAME = "root"
#: log4j level names accepted by Connect -> Python levels (TRACE, ALL and OFF have no Python name).
LEVELS = {"ALL": 1, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_NAMES = {v: k for k, v in LEVELS.items()}


class InvalidLevel(ValueError):
    """Not one of Connect's level names (REST: 404 ``invalid log level '{level}'.``, as Connect)."""


def _name_of(level: int) -> str:
    return _NAMES.get(level) or logging.getLevelName(level)


class Loggers:
    """The log levels of this process (Connect's ``Loggers``); thread-safe.

    Args:
        clock: wall-clock milliseconds for ``last_modified``, injectable for tests.
    """

    def __init__(self, clock=lambda: int(time.time() * 1000)):
        self._clock = clock
        self._lock = threading.Lock()
        self._last_modified: dict[str, int] = {}

    @staticmethod
    def _current() -> dict[str, logging.Logger]:
        return {n: lg for n, lg in list(logging.root.manager.loggerDict.items()) if isinstance(lg, logging.Logger)}

    def _entry(self, name: str, logger: logging.Logger) -> dict[str, Any]:
        level = logger.level or logger.getEffectiveLevel()
        return {"level": _name_of(level), "last_modified": self._last_modified.get(name)}

    def all_levels(self) -> dict[str, dict[str, Any]]:
        """``{logger: {"level", "last_modified"}}`` of the loggers with an explicitly set level, plus ``root``;
        ``last_modified`` is epoch milliseconds of the last change through this API or ``None``."""
        with self._lock:
            out = {n: self._entry(n, lg) for n, lg in self._current().items() if lg.level != logging.NOTSET}
            out[ROOT_LOGGER_NAME] = self._entry(ROOT_LOGGER_NAME, logging.root)
            return dict(sorted(out.items()))

    def level(self, name: str) -> dict[str, Any] | None:
        """``{"level", "last_modified"}`` of one existing logger (its effective level when it has none
        set), or ``None`` when no such logger exists."""
        with self._lock:
            if name.lower() == ROOT_LOGGER_NAME:
                return self._entry(ROOT_LOGGER_NAME, logging.root)
            logger = self._current().get(name)
            return None if logger is None else self._entry(name, logger)

    @staticmethod
    def parse_level(level: Any) -> int:
        """The Python level of a Connect level name (case-insensitive). Errors: :class:`InvalidLevel`."""
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise InvalidLevel(f"invalid log level '{level}'.")
        return LEVELS[level.upper()]

    def set_level(self, namespace: str, level: str) -> list[str]:
        """Set ``level`` on ``namespace`` and every current logger whose name starts with it (``root``:
        every logger); returns the affected logger names, sorted. Errors: :class:`InvalidLevel`."""
        value = self.parse_level(level)
        with self._lock:
            current = self._current()
            if namespace.lower() == ROOT_LOGGER_NAME:
                targets = dict(current, **{ROOT_LOGGER_NAME: logging.root})
            else:
                targets = {n: lg for n, lg in current.items() if n.startswith(namespace)}
                targets.setdefault(namespace, logging.getLogger(namespace))
            now = self._clock()
            for name, logger in targets.items():
                logger.setLevel(value)
                self._last_modified[name] = now
            return sorted(targets)


_process = Loggers()


def process_loggers() -> Loggers:
    """This process's :class:`Loggers`."""
    return _process
