"""Filter and the predicates: which records a step applies to, and dropping records.

Owns Kafka's ``Filter`` (drops every record it is applied to; with a predicate,
some) and the predicates ``TopicNameMatches``, ``HasHeaderKey`` and
``RecordIsTombstone`` (each a boolean mask over a batch).

Must not touch: the content of a record (a predicate only reads), the chain's
handling of ``predicate`` / ``negate`` (chain.py), Kafka, Spark or Django.
"""
from __future__ import annotations

import re

from webapp.plugin import ConfigDef, ConfigException, ConfigKey

from .base import _PKG, Predicate, Transformation


class Filter(Transformation):
    """Drop every record; used with a predicate (``transforms.x.predicate``) to drop some."""

    type_name = f"{_PKG}.Filter"
    doc = "Drops all records, filtering them from subsequent transformations in the chain. This is intended to " \
          "be used conditionally to filter out records matching (or not matching) a particular Predicate."

    def apply(self, batch):
        return batch.slice(0, 0)


class TopicNameMatches(Predicate):
    """True for records whose whole topic name matches ``pattern`` (a regex)."""

    type_name = f"{_PKG}.predicates.TopicNameMatches"
    doc = "A predicate which is true for records with a topic name that matches the configured regular expression."
    config_def = ConfigDef((ConfigKey("pattern", "STRING", None, required=True, importance="MEDIUM"),))

    def configure(self, config):
        try:
            self.pattern = re.compile(config["pattern"])
        except re.error as e:
            raise ConfigException(str(e), {"pattern": [
                f"Invalid value {config['pattern']} for configuration pattern: {e}"]}) from None

    def test(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        topics = batch.column("topic")
        matching = [t for t in pc.unique(topics).to_pylist() if t is not None and self.pattern.fullmatch(t)]
        return pc.fill_null(pc.is_in(topics, value_set=pa.array(matching, pa.string())), False)


class HasHeaderKey(Predicate):
    """True for records with at least one header named ``name``."""

    type_name = f"{_PKG}.predicates.HasHeaderKey"
    doc = "A predicate which is true for records with at least one header with the configured name."
    config_def = ConfigDef((ConfigKey("name", "STRING", None, required=True, importance="MEDIUM"),))

    def configure(self, config):
        self.name = config["name"]

    def test(self, batch):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        headers = batch.column("headers")
        n = batch.num_rows
        flat = headers.flatten()
        if len(flat) == 0:
            return pa.array(np.zeros(n, dtype=bool))
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        hit = np.asarray(pc.fill_null(pc.equal(flat.field("key"), self.name), False).to_numpy(zero_copy_only=False),
                         dtype=bool)
        return pa.array(np.bincount(parents[hit], minlength=n) > 0)


class RecordIsTombstone(Predicate):
    """True for records whose value is null."""

    type_name = f"{_PKG}.predicates.RecordIsTombstone"
    doc = "A predicate which is true for records which are tombstones (i.e. have null value)."

    def test(self, batch):
        import pyarrow.compute as pc

        return pc.is_null(batch.column("value"))
