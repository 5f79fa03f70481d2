"""Database column types ⇄ column kinds ⇄ Connect schemas, and back to DDL, per dialect.

Owns the mapping of a PostgreSQL type oid or a MySQL/MariaDB field type to a column
*kind* (see :mod:`.dbio`), of a kind to its Connect field schema and back, to a
Spark type and to the DDL type an ``auto.create`` / ``auto.evolve`` writes; reading a
query's columns (``_describe``), listing a database's tables and the race-tolerant
``CREATE ... IF NOT EXISTS``. Driver side only.

Must not touch: rows (the :mod:`.dbio` functions read and write them), Kafka,
Spark jobs, connector configs.
"""
from __future__ import annotations

from typing import Any, Mapping

from . import dbio
from .config import DATE, DECIMAL, TIME, TIMESTAMP

__all__: list[str] = []


# --------------------------------------------------------------------------------------
# Types: database columns -> kinds -> Connect schemas, and back to DDL
# --------------------------------------------------------------------------------------
_PG_KINDS = {21: "int16", 23: "int32", 20: "int64", 26: "int64", 700: "float32", 701: "float64", 16: "boolean",
             25: "string", 1043: "string", 1042: "string", 19: "string", 18: "string", 2950: "string",
             114: "string", 3802: "string", 17: "bytes", 1082: "date", 1083: "time", 1114: "timestamp",
             1184: "timestamp"}


def _pg_kind(col) -> str:
    if col.type_code == 1700:
        if col.precision is not None and col.scale is not None and col.precision > 0:
            return f"decimal:{col.precision}:{col.scale}"
        return "string"  # unconstrained NUMERIC: no fixed scale for Connect's Decimal; carried as text
    return _PG_KINDS.get(col.type_code, "string")


def _mysql_kind(desc, field) -> str:
    code, length, scale = desc[1], desc[3] or 0, desc[5] or 0
    unsigned = bool(field.flags & 32)
    binary = field.charsetnr == 63
    if code == 1:
        return "boolean" if length == 1 and not unsigned else ("int16" if unsigned else "int8")
    if code == 2:
        return "int32" if unsigned else "int16"
    if code == 9:
        return "int32"
    if code == 3:
        return "int64" if unsigned else "int32"
    if code == 8:
        return "decimal:20:0" if unsigned else "int64"
    if code == 4:
        return "float32"
    if code == 5:
        return "float64"
    if code in (0, 246):
        precision = length - (1 if scale > 0 else 0) - (0 if unsigned else 1)
        return f"decimal:{max(precision, 1)}:{scale}"
    if code == 16:
        return "boolean" if length == 1 else "bytes"
    if code == 10:
        return "date"
    if code == 11:
        return "time"
    if code in (7, 12):
        return "timestamp"
    if code == 13:
        return "int32"
    if code in (249, 250, 251, 252, 253, 254):
        return "bytes" if binary else "string"
    return "string"


def _kind_schema(name: str, kind: str, optional: bool = True) -> dict:
    """Connect field schema (JsonConverter's JSON form) of a column."""
    base: dict[str, Any]
    if kind.startswith("decimal:"):
        _, p, s = kind.split(":")
        base = {"type": "bytes", "optional": optional, "name": DECIMAL, "version": 1,
                "parameters": {"scale": s, "connect.decimal.precision": p}}
    elif kind == "date":
        base = {"type": "int32", "optional": optional, "name": DATE, "version": 1}
    elif kind == "time":
        base = {"type": "int32", "optional": optional, "name": TIME, "version": 1}
    elif kind == "timestamp":
        base = {"type": "int64", "optional": optional, "name": TIMESTAMP, "version": 1}
    else:
        t = {"float32": "float", "float64": "double"}.get(kind, kind)
        base = {"type": t, "optional": optional}
    base["field"] = name
    return base


def _schema_kind(s: Mapping[str, Any]) -> str:
    """Kind of a Connect field schema (nested structs/arrays/maps are written as JSON text)."""
    name, t = s.get("name"), s.get("type")
    if name == DECIMAL:
        params = s.get("parameters") or {}
        return f"decimal:{int(params.get('connect.decimal.precision', 0) or 0)}:{int(params.get('scale', 0))}"
    if name == DATE:
        return "date"
    if name == TIME:
        return "time"
    if name == TIMESTAMP:
        return "timestamp"
    return {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "float": "float32",
            "double": "float64", "boolean": "boolean", "string": "string", "bytes": "bytes"}.get(t, "string")


def _wire_spark_type(kind: str):
    from pyspark.sql import types as T

    return {"int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
            "float32": T.FloatType(), "float64": T.DoubleType(), "boolean": T.BooleanType(),
            "string": T.StringType(), "bytes": T.BinaryType(), "date": T.IntegerType(), "time": T.IntegerType(),
            "timestamp": T.LongType()}.get(kind, T.BinaryType() if kind.startswith("decimal:") else T.StringType())


def _ddl_type(dialect: str, kind: str, key: bool) -> str:
    if kind.startswith("decimal:"):
        _, p, s = kind.split(":")
        p, s = int(p), int(s)
        if dialect == "postgresql":
            return f"NUMERIC({p},{s})" if 0 < p <= 1000 and s <= p else "NUMERIC"
        return f"DECIMAL({min(65, max(p, s, 1)) if p else 65},{min(s, 30)})"
    if dialect == "postgresql":
        return {"int8": "SMALLINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "float32": "REAL",
                "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN", "string": "TEXT", "bytes": "BYTEA",
                "date": "DATE", "time": "TIME", "timestamp": "TIMESTAMP"}[kind]
    return {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float32": "FLOAT",
            "float64": "DOUBLE", "boolean": "BOOLEAN", "string": "VARCHAR(256)" if key else "LONGTEXT",
            "bytes": "VARBINARY(255)" if key else "LONGBLOB", "date": "DATE", "time": "TIME(3)",
            "timestamp": "DATETIME(3)"}[kind]


def _is_decimal_column(dialect: str, desc) -> bool:
    """Whether a cursor description entry is a DECIMAL/NUMERIC column (PostgreSQL numeric, MySQL NEWDECIMAL)."""
    return desc[1] == 1700 if dialect == "postgresql" else desc[1] in (0, 246)


def _describe(conn, dialect: str, select_sql: str) -> tuple[list[str], list[str]]:
    """Column names and kinds of ``select_sql`` (run with ``WHERE 1=0``-style limit)."""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT * FROM ({select_sql}) raftconnect_d LIMIT 0")
        names = [d[0] for d in cur.description]
        if dialect == "postgresql":
            kinds = [_pg_kind(d) for d in cur.description]
        else:
            kinds = [_mysql_kind(d, f) for d, f in zip(cur.description, cur._result.fields)]
        cur.fetchall()
    finally:
        cur.close()
    conn.rollback()
    return names, kinds


def _list_tables(params: Mapping[str, Any]) -> list[str]:
    conn = dbio.connect(params, autocommit=True)
    try:
        cur = conn.cursor()
        if params["dialect"] == "postgresql":
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                        "AND table_type = 'BASE TABLE' ORDER BY table_name")
        else:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                        "AND table_type = 'BASE TABLE' ORDER BY table_name")
        return [r[0] for r in cur.fetchall() if r[0] != dbio.OFFSETS_TABLE]
    finally:
        conn.close()


def _create_if_missing(cur, create_sql: str, probe_sql: str) -> None:
    """Run ``create_sql`` (CREATE ... IF NOT EXISTS); tolerate losing a race with another task.

    PostgreSQL's ``IF NOT EXISTS`` is not atomic: two sessions creating the same
    table at once can fail with a unique violation on the catalog. Such an error
    is ignored when ``probe_sql`` shows the table exists afterwards.
    """
    try:
        cur.execute(create_sql)
    except Exception:
        try:
            cur.execute(probe_sql)
            cur.fetchall()
        except Exception:
            pass
        else:
            return
        raise
