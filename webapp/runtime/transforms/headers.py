"""Header operations: InsertHeader and DropHeaders on the ``headers`` column (``list<struct<key, value>>``).

Owns adding a literal header to every record and removing headers by key, with
numpy offsets over the list column (no per-record Python).

Must not touch: keys, values, topics or their schemas, the chain, Kafka, Spark or Django.
"""
from __future__ import annotations

from webapp.plugin import ConfigDef, ConfigException, ConfigKey

from .base import _PKG, Transformation, _list_cfg
from .record import headers_type

class InsertHeader(Transformation):
    """Add header ``header`` with the UTF-8 bytes of ``value.literal`` to every record."""

    type_name = f"{_PKG}.InsertHeader"
    doc = "Add a header to each record."
    config_def = ConfigDef((ConfigKey("header", "STRING", None, required=True, importance="HIGH"),
                            ConfigKey("value.literal", "STRING", None, required=True, importance="HIGH")))

    def configure(self, config):
        self.header = config["header"]
        self.value = str(config["value.literal"]).encode("utf-8")

    def apply(self, batch):
        import numpy as np
        import pyarrow as pa

        n = batch.num_rows
        if n == 0:
            return batch
        headers = batch.column("headers")
        offsets = np.asarray(headers.offsets.to_numpy(zero_copy_only=False), dtype="int64")
        lengths = np.diff(offsets)
        lengths = np.where(np.asarray(headers.is_null().to_numpy(zero_copy_only=False)), 0, lengths)
        flat = headers.flatten()  # honours slice offsets and skips null lists
        new_offsets = np.concatenate([[0], np.cumsum(lengths + 1)])
        total = int(new_offsets[-1])
        idx = np.empty(total, dtype="int64")
        new_pos = new_offsets[1:] - 1
        is_new = np.zeros(total, dtype=bool)
        is_new[new_pos] = True
        idx[new_pos] = len(flat) + np.arange(n)
        idx[~is_new] = np.arange(len(flat))
        added = pa.array([{"key": self.header, "value": self.value}] * n, headers_type().value_type)
        values = pa.concat_arrays([flat.cast(headers_type().value_type), added]).take(pa.array(idx))
        out = pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), values, type=headers_type())
        return batch.with_columns(headers=out)


class DropHeaders(Transformation):
    """Remove every header whose key is in ``headers``."""

    type_name = f"{_PKG}.DropHeaders"
    doc = "Removes one or more headers from each record."
    config_def = ConfigDef((ConfigKey("headers", "LIST", None, required=True, importance="HIGH"),))

    def configure(self, config):
        self.headers = _list_cfg(config.get("headers"))
        if not self.headers:
            raise ConfigException("headers must not be empty", {"headers": [
                f"Invalid value {config.get('headers')} for configuration headers: Empty list"]})

    def apply(self, batch):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        if n == 0:
            return batch
        headers = batch.column("headers")
        flat = headers.flatten()
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        keep = pc.invert(pc.is_in(flat.field("key"), value_set=pa.array(self.headers, pa.string())))
        keep = pc.fill_null(keep, True)
        kept_np = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
        counts = np.bincount(parents[kept_np], minlength=n) if len(parents) else np.zeros(n, dtype="int64")
        offsets = np.concatenate([[0], np.cumsum(counts)])
        values = flat.filter(keep).cast(headers_type().value_type)
        out = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, type=headers_type())
        return batch.with_columns(headers=out)
