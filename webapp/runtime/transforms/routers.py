"""Routers: RegexRouter and TimestampRouter, which rename the record's topic.

Owns the ``topic`` column's rewriting: a whole-match regex with a Java
replacement template, or ``topic.format`` with ``${topic}`` and ``${timestamp}``
(the record time in a ``SimpleDateFormat`` pattern, UTC).

Must not touch: keys, values, headers or their schemas, the chain, Kafka (a routed
topic is created by the task's producer, not here), Spark or Django.
"""
from __future__ import annotations

import re

from webapp.plugin import ConfigDef, ConfigException, ConfigKey, DataException

from .base import _PKG, Transformation
from .java_compat import _format_ms_column, _java_replacement, _sdf_tokens


class RegexRouter(Transformation):
    """Rename the topic when the whole topic matches ``regex``: ``replacement`` may use ``$1``, ``${name}``."""

    type_name = f"{_PKG}.RegexRouter"
    doc = "Update the record topic using the configured regular expression and replacement string."
    config_def = ConfigDef((ConfigKey("regex", "STRING", None, required=True, importance="HIGH"),
                            ConfigKey("replacement", "STRING", None, required=True, importance="HIGH")))

    def configure(self, config):
        try:
            self.regex = re.compile(config["regex"])
        except re.error as e:
            raise ConfigException(f"Invalid regex {config['regex']}: {e}", {"regex": [
                f"Invalid value {config['regex']} for configuration regex: {e}"]}) from None
        try:
            self.template = _java_replacement(config["replacement"])
        except ValueError as e:
            raise ConfigException(str(e), {"replacement": [str(e)]}) from None

    def route(self, topic: str) -> str:
        """The new name of ``topic`` (unchanged unless the regex matches it entirely)."""
        m = self.regex.fullmatch(topic)
        return m.expand(self.template) if m else topic

    def apply(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        topics = batch.column("topic")
        uniq = pc.unique(topics)
        mapping = {t: self.route(t) for t in uniq.to_pylist() if t is not None}
        if all(k == v for k, v in mapping.items()):
            return batch
        keys = pa.array(list(mapping), pa.string())
        idx = pc.index_in(topics, value_set=keys)
        return batch.with_columns(topic=pc.take(pa.array(list(mapping.values()), pa.string()), idx))


class TimestampRouter(Transformation):
    """Topic = ``topic.format`` with ``${topic}`` and ``${timestamp}`` (record time in ``timestamp.format``, UTC).

    Defaults: ``${topic}-${timestamp}`` and ``yyyyMMdd``. A record without a timestamp is an error.
    """

    type_name = f"{_PKG}.TimestampRouter"
    doc = "Update the record's topic field as a function of the original topic value and the record timestamp."
    config_def = ConfigDef((ConfigKey("topic.format", "STRING", "${topic}-${timestamp}", importance="HIGH"),
                            ConfigKey("timestamp.format", "STRING", "yyyyMMdd", importance="HIGH")))

    def configure(self, config):
        self.topic_format = config["topic.format"]
        self.ts_format = config["timestamp.format"]
        try:
            _sdf_tokens(self.ts_format)
        except ValueError as e:
            raise ConfigException(str(e), {"timestamp.format": [str(e)]}) from None

    def apply(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return batch
        ts = batch.column("timestamp")
        if ts.null_count:
            raise DataException("Timestamp missing on record")
        stamp = _format_ms_column(ts, self.ts_format)
        pieces = []
        parts = re.split(r"(\$\{topic\}|\$\{timestamp\})", self.topic_format)
        for part in parts:
            if part == "${topic}":
                pieces.append(batch.column("topic"))
            elif part == "${timestamp}":
                pieces.append(stamp)
            elif part:
                pieces.append(pa.scalar(part))
        if not pieces:
            return batch.with_columns(topic=pa.array([""] * batch.num_rows, pa.string()))
        topic = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else \
            (pieces[0] if not isinstance(pieces[0], pa.Scalar) else pa.array([pieces[0].as_py()] * batch.num_rows))
        return batch.with_columns(topic=topic.cast(pa.string()))
