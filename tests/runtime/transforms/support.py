"""What the SMT tests share: a record schema, records and batches, and a one-transformation chain config."""
from __future__ import annotations

import datetime as dt

from webapp.runtime.transforms.chain import TransformationChain
from webapp.runtime.transforms.record import ConnectRecord, RecordBatch

P = "org.apache.kafka.connect.transforms."
SCHEMA = {"type": "struct", "optional": False, "name": "person", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "age", "type": "int32", "optional": True}]}
UTC = dt.timezone.utc


def rec(value, schema=SCHEMA, **kw):
    kw.setdefault("topic", "people")
    return ConnectRecord(value=value, value_schema=schema, **kw)


def batch(*records, sink=True):
    return RecordBatch.from_records(list(records), sink=sink)


def run(config: dict, *records, sink=True) -> RecordBatch:
    return TransformationChain.from_config(config).apply(batch(*records, sink=sink))


def one(type_: str, **cfg) -> dict:
    return {"transforms": "t", "transforms.t.type": type_, **{f"transforms.t.{k.replace('_', '.')}": v
                                                             for k, v in cfg.items()}}


def values(b: RecordBatch):
    return [r.value for r in b.to_records()]


ALICE = {"id": 1, "name": "alice", "age": 30}
