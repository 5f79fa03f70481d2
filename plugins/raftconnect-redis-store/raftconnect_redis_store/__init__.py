"""A RaftConnect metadata store on Redis, installed as a ``raftconnect.metadata_stores`` plugin.

Owns mapping :class:`webapp.storage.base.MetadataStore` onto Redis keys under a
prefix (see the package README for the layout) and making each write atomic
with its checks: every write is one Lua script that first checks the writer
lease (the term this object claimed, and not read-only) and then the
connector's existence where the write needs it. Worker writes are fenced by the
``fence`` callable RaftConnect hands in, before the script runs, as the
relational stores do.

Errors: a server that cannot be reached or times out gives ``StoreUnavailable``
naming the URL with its password redacted; lease failures give ``LeaseLost``.
"""
from __future__ import annotations

import json
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import redis

from webapp.plugin import ConnectorTaskId, SourceOffset, partition_key
from webapp.storage.base import (
    KINDS, TARGET_STATES, AlreadyExists, ConnectorRecord, LeaseLost, MetadataStore, NameSnapshot, NotFound,
    OffsetCommit, StoreError, StoreUnavailable, check_fence, fenced_apart,
)
from webapp.storage.relational import redact_url
from webapp.storage.relational.group_commit import OffsetGroupCommit

__all__ = ["RedisMetadataStore"]

CONNECTOR_TASK = "-1"

# Every script starts with the lease check: KEYS[1] is the lease hash, ARGV[1] this writer's term.
_LEASE = """
local ro = redis.call('HGET', KEYS[1], 'read_only')
if ro == '1' then return {err = 'LEASE read-only' } end
local t = redis.call('HGET', KEYS[1], 'term') or '0'
if tonumber(t) ~= tonumber(ARGV[1]) then return {err = 'LEASE term ' .. t} end
"""

# KEYS: lease, connectors, conn:<name>; ARGV: term, name, config, target_state|'', create_only
_PUT_CONFIG = _LEASE + """
local exists = redis.call('EXISTS', KEYS[3]) == 1
if exists and ARGV[5] == '1' then return 'exists' end
redis.call('HSET', KEYS[3], 'config', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], 'target_state', ARGV[4])
elseif not exists then redis.call('HSET', KEYS[3], 'target_state', 'STARTED') end
if not exists then redis.call('HSET', KEYS[3], 'tasks', '[]') end
redis.call('SADD', KEYS[2], ARGV[2])
if exists then return 'updated' end
return 'created'
"""

# KEYS: lease, connectors, conn:<name>, st:<name>, top:<name>; ARGV: term, name
_REMOVE = _LEASE + """
if redis.call('EXISTS', KEYS[3]) == 0 then return 'notfound' end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
redis.call('SREM', KEYS[2], ARGV[2])
return 'ok'
"""

# KEYS: lease, conn:<name>; ARGV: term, target_state
_TARGET = _LEASE + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 'notfound' end
redis.call('HSET', KEYS[2], 'target_state', ARGV[2])
return 'ok'
"""

# KEYS: lease, conn:<name>, st:<name>; ARGV: term, tasks json, task count
_TASKS = _LEASE + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 'notfound' end
redis.call('HSET', KEYS[2], 'tasks', ARGV[2])
local n = tonumber(ARGV[3])
for _, k in ipairs(redis.call('HKEYS', KEYS[3])) do
  if tonumber(k) >= n then redis.call('HDEL', KEYS[3], k) end
end
return 'ok'
"""

# KEYS: lease, conn:<name>, st:<name>; ARGV: term, task, status json
_STATUS = _LEASE + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 'notfound' end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
return 'ok'
"""

# Offsets of one or many connectors (a group commit's, RedisMetadataStore._commit_offsets_of), in ARGV order.
# KEYS: lease, offnames, then off:<name>, ord:<name> per connector; ARGV: term, then per connector: name, entry
# count, that many (key, value, order) triples: a '' value removes; order 'generation:seq' of a numbered commit,
# '' for any other write. A numbered entry of the same generation as the row's commit but a lower number (a late
# copy) leaves the row as it is.
_OFFSETS = _LEASE + """
local a, k = 2, 3
while a <= #ARGV do
  local name, n, off, ord = ARGV[a], tonumber(ARGV[a + 1]), KEYS[k], KEYS[k + 1]
  a, k = a + 2, k + 2
  for _ = 1, n do
    local key, value, order = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    a = a + 3
    local take = true
    if order ~= '' then
      local held = redis.call('HGET', ord, key)
      if held then
        local hg, hs = string.match(held, '^(%d+):(%d+)$')
        local g, s = string.match(order, '^(%d+):(%d+)$')
        if hg == g and tonumber(hs) > tonumber(s) then take = false end
      end
    end
    if take then
      if value == '' then redis.call('HDEL', off, key) else redis.call('HSET', off, key, value) end
      if order == '' then redis.call('HDEL', ord, key) else redis.call('HSET', ord, key, order) end
    end
  end
  if redis.call('HLEN', off) > 0 then redis.call('SADD', KEYS[2], name)
  else redis.call('SREM', KEYS[2], name) end
end
return 'ok'
"""

# KEYS: lease, connectors, conn:<name>, st:<name>, off:<name>, offnames, ord:<name>
# ARGV: term, name, do_config, config|'' (''=none), target_state, tasks, do_statuses, n statuses,
#       (task, json)*, do_offsets, (key, json, order)*: order 'generation:seq' of the commit that wrote
#       the offset (NameSnapshot.offset_commits), '' when not known
_IMPORT = _LEASE + """
local i = 3
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[3])
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[3], 'config', ARGV[4], 'target_state', ARGV[5], 'tasks', ARGV[6])
    redis.call('SADD', KEYS[2], ARGV[2])
  else
    redis.call('SREM', KEYS[2], ARGV[2])
  end
end
i = 7
if ARGV[i] == '1' then redis.call('DEL', KEYS[4]) end
local n = tonumber(ARGV[i + 1])
for j = 0, n - 1 do redis.call('HSET', KEYS[4], ARGV[i + 2 + 2 * j], ARGV[i + 3 + 2 * j]) end
i = i + 2 + 2 * n
if ARGV[i] == '1' then
  redis.call('DEL', KEYS[5], KEYS[7])
  for j = i + 1, #ARGV, 3 do
    redis.call('HSET', KEYS[5], ARGV[j], ARGV[j + 1])
    if ARGV[j + 2] ~= '' then redis.call('HSET', KEYS[7], ARGV[j], ARGV[j + 2]) end
  end
  if redis.call('HLEN', KEYS[5]) > 0 then redis.call('SADD', KEYS[6], ARGV[2])
  else redis.call('SREM', KEYS[6], ARGV[2]) end
end
return 'ok'
"""

# KEYS: lease, conn:<name>, top:<name>; ARGV: term, topic*  (ignored when the connector does not exist)
_ADD_TOPICS = _LEASE + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 'notfound' end
for i = 2, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end
return 'ok'
"""

# KEYS: lease, top:<name>; ARGV: term, replace ('1': drop the old set first), topic*
_SET_TOPICS = _LEASE + """
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
for i = 3, #ARGV do redis.call('SADD', KEYS[2], ARGV[i]) end
return 'ok'
"""

# KEYS: lease, then every data key to delete; ARGV: term
_CLEAR = _LEASE + """
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
return 'ok'
"""

# KEYS: lease; ARGV: term, read_only
_CLAIM = """
local t = tonumber(redis.call('HGET', KEYS[1], 'term') or '0')
if t > tonumber(ARGV[1]) then return {err = 'LEASE newer ' .. t} end
redis.call('HSET', KEYS[1], 'term', ARGV[1], 'read_only', ARGV[2])
return 'ok'
"""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class RedisMetadataStore(MetadataStore):
    """Connector configs, statuses and offsets in Redis (see module docstring and README).

    Args:
        name: the store's configured name.
        url: ``redis://[:password@]host[:port][/db][?prefix=...]``.
        fence: ``fence(connector, task, worker_id, generation) -> reason | None``
            for worker writes (``None`` accepts every write).

    Errors: :class:`ValueError` for a URL that is not ``redis://`` or ``rediss://``.
    """

    external = True
    #: offsets are written in place, key by key (a group commit could run several scripts at once)
    upsert = True

    def __init__(self, name: str, url: str, fence: Callable[..., str | None] | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(f"not a Redis store URL: {redact_url(url)}")
        self.name = name
        self.safe_url = redact_url(url)
        self._password = parts.password or ""
        query = parse_qs(parts.query)
        self.prefix = (query.pop("prefix", [f"raftconnect:{name}:"]))[0]
        clean = url.split("?", 1)[0]
        self.fence = fence
        self._term: int | None = None
        self._client = redis.Redis.from_url(clean, socket_connect_timeout=3, socket_timeout=5,
                                            decode_responses=True)
        self._scripts = {k: self._client.register_script(v) for k, v in {
            "put_config": _PUT_CONFIG, "remove": _REMOVE, "target": _TARGET, "tasks": _TASKS,
            "status": _STATUS, "offsets": _OFFSETS, "import": _IMPORT, "clear": _CLEAR, "claim": _CLAIM,
            "add_topics": _ADD_TOPICS, "set_topics": _SET_TOPICS,
        }.items()}
        #: task offset commits made at the same time share one script (see :meth:`_commit_offsets_of`); one
        #: script at a time: the server runs them one after another anyway, and from 32 callers 1 / 2 / 4 at
        #: once reached 7,226 / 5,681 / 4,318 commits/s, smaller batches costing more client CPU per commit
        #: (benchmarks/stores)
        self._group = OffsetGroupCommit(self, max_flushes=1)

    def __repr__(self) -> str:
        return f"RedisMetadataStore(name={self.name!r}, url={self.safe_url!r})"

    # ------------------------------------------------------------ plumbing
    def _k(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def _run(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except redis.ResponseError as exc:
            msg = str(exc)
            if "LEASE read-only" in msg:
                raise LeaseLost(f"metadata store {self.name!r} is read-only: the cluster switched to "
                                "another store") from None
            if "LEASE" in msg:
                raise LeaseLost(f"metadata store {self.name!r} lease: {msg.split('LEASE', 1)[1].strip()} "
                                f"(this writer holds term {self._term or 0}); retry through the current leader") \
                    from None
            raise StoreUnavailable(f"metadata store {self.name!r} (redis at {self.safe_url}): {msg}") from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            if self._password:
                detail = detail.replace(self._password, "***")
            raise StoreUnavailable(f"metadata store {self.name!r} (redis at {self.safe_url}) is unavailable: "
                                   f"{detail}") from None

    def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._run(lambda: self._scripts[name](keys=[self._k("lease"), *keys],
                                                     args=[self._term or 0, *args]))

    def _check_fence(self, connector: str, task: int | None, worker_id: str | None, generation: int, *,
                     seq: int | None = None) -> None:
        check_fence(self.fence, connector, task, worker_id, generation, seq=seq)

    # ------------------------------------------------------------ lifecycle
    def prepare(self) -> None:
        """Check the server answers (Redis needs no schema). Errors: ``StoreUnavailable``."""
        self._run(self._client.ping)

    def ping(self) -> None:
        """Redis ``PING`` (for ``GET /health``). Errors: ``StoreUnavailable`` naming the redacted URL."""
        self._run(self._client.ping)

    def close(self) -> None:
        """Close the connection pool."""
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing must not raise
            pass

    def claim(self, term: int, *, read_only: bool = False) -> None:
        """Take the writer lease for ``term``. Errors: ``LeaseLost`` (a newer term holds it), ``StoreUnavailable``."""
        self._run(lambda: self._scripts["claim"](keys=[self._k("lease")], args=[term, "1" if read_only else "0"]))
        self._term = term

    # ------------------------------------------------------------ config
    def connector_names(self) -> list[str]:
        return sorted(self._run(lambda: self._client.smembers(self._k("connectors"))))

    def get_connector(self, name: str) -> ConnectorRecord | None:
        h = self._run(lambda: self._client.hgetall(self._k("conn", name)))
        if not h:
            return None
        return ConnectorRecord(name=name, config=json.loads(h["config"]), target_state=h["target_state"],
                               tasks=json.loads(h.get("tasks") or "[]"))

    def put_connector_config(self, name: str, config: dict[str, str], *, target_state: str | None = None,
                             create_only: bool = False) -> bool:
        if target_state is not None and target_state not in TARGET_STATES:
            raise ValueError(f"unknown target state {target_state!r} (one of {', '.join(TARGET_STATES)})")
        out = self._script("put_config", [self._k("connectors"), self._k("conn", name)],
                           [name, _dumps(dict(config)), target_state or "", "1" if create_only else "0"])
        if out == "exists":
            raise AlreadyExists(f"Connector {name} already exists")
        return out == "created"

    def remove_connector_config(self, name: str) -> None:
        out = self._script("remove", [self._k("connectors"), self._k("conn", name), self._k("st", name),
                                      self._k("top", name)], [name])
        if out == "notfound":
            raise NotFound(f"Connector {name} not found")

    def put_target_state(self, name: str, target_state: str) -> None:
        if target_state not in TARGET_STATES:
            raise ValueError(f"unknown target state {target_state!r} (one of {', '.join(TARGET_STATES)})")
        if self._script("target", [self._k("conn", name)], [target_state]) == "notfound":
            raise NotFound(f"Connector {name} not found")

    def put_task_configs(self, name: str, task_configs: list[dict[str, str]], *, worker_id: str | None,
                         generation: int) -> None:
        if self.get_connector(name) is None:
            raise NotFound(f"Connector {name} not found")
        self._check_fence(name, None, worker_id, generation)
        tasks = [dict(t) for t in task_configs]
        if self._script("tasks", [self._k("conn", name), self._k("st", name)], [_dumps(tasks), len(tasks)]) \
                == "notfound":
            raise NotFound(f"Connector {name} not found")

    # ------------------------------------------------------------ status
    def put_status(self, name: str, task: int | None, status: dict[str, Any], *, worker_id: str,
                   generation: int) -> None:
        if self.get_connector(name) is None:
            raise NotFound(f"Connector {name} not found")
        self._check_fence(name, task, worker_id, generation)
        entry = {"state": status["state"], "trace": status.get("trace"), "worker_id": worker_id,
                 "generation": generation}
        field = CONNECTOR_TASK if task is None else str(int(task))
        if self._script("status", [self._k("conn", name), self._k("st", name)], [field, _dumps(entry)]) \
                == "notfound":
            raise NotFound(f"Connector {name} not found")

    def get_statuses(self, name: str) -> dict[str, Any]:
        h = self._run(lambda: self._client.hgetall(self._k("st", name)))
        out: dict[str, Any] = {"connector": None, "tasks": {}}
        for field, value in h.items():
            if field == CONNECTOR_TASK:
                out["connector"] = json.loads(value)
            else:
                out["tasks"][field] = json.loads(value)
        out["tasks"] = dict(sorted(out["tasks"].items(), key=lambda kv: int(kv[0])))
        return out

    # ------------------------------------------------------------ active topics
    def put_topics(self, name: str, topics: list[str]) -> None:
        if topics:
            self._script("add_topics", [self._k("conn", name), self._k("top", name)], sorted(set(topics)))

    def get_topics(self, name: str) -> list[str]:
        return sorted(self._run(lambda: self._client.smembers(self._k("top", name))))

    def reset_topics(self, name: str) -> None:
        self._script("set_topics", [self._k("top", name)], ["1"])

    # ------------------------------------------------------------ offsets
    def get_offsets(self, name: str) -> list[SourceOffset]:
        values = self._run(lambda: self._client.hvals(self._k("off", name)))
        return [SourceOffset(*json.loads(v)) for v in values]

    def _commit_offsets_of(self, entries_by_connector: dict[str, list[tuple]]) -> None:
        """Write one group commit (``{connector: [(partition, offset | None, generation, seq), ...]}``, in
        commit order) with one script (``_OFFSETS``), lease checked once: a ``None`` offset removes the
        partition, and a numbered entry (``seq``) that is a late copy leaves its row as it is. One script
        per commit made 32 callers reach 0.11 of pipelined ``HSET``s (benchmarks/stores). Errors:
        ``LeaseLost``, ``StoreUnavailable``."""
        keys: list[str] = [self._k("offnames")]
        args: list[Any] = []
        for name, entries in entries_by_connector.items():
            keys += [self._k("off", name), self._k("ord", name)]
            args += [name, len(entries)]
            for partition, offset, generation, seq in entries:
                args += [partition_key(partition), "" if offset is None else _dumps([dict(partition), dict(offset)]),
                         "" if seq is None else f"{int(generation)}:{int(seq)}"]
        self._script("offsets", keys, args)

    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        """Fenced; written with the commits other callers make at the same time, in one script
        (:meth:`_commit_offsets_of`); returns once written. Errors: ``FencedWrite``, ``LeaseLost``,
        ``StoreUnavailable``."""
        self._check_fence(task_id.connector, task_id.task, worker_id, generation)
        self._group.submit(task_id.connector, [(o.partition, o.offset, generation, None) for o in offsets])

    def commit_offsets_many(self, commits: list[OffsetCommit], *, worker_id: str) -> list[StoreError | None]:
        """Each commit fenced (with its number against its task's start); the others written together in one
        script, shared with other callers' commits, in commit order per partition as the relational stores
        keep it (``OffsetCommit.seq``): a late copy does not replace what a later commit of its task and
        generation wrote. Errors: ``LeaseLost``, ``StoreUnavailable`` for the whole call (none written)."""
        outcomes, passed = fenced_apart(commits, lambda c: self._check_fence(
            c.task_id.connector, c.task_id.task, worker_id, c.generation, seq=c.seq))
        if passed:
            self._group.submit_many([(c.task_id.connector, [(o.partition, o.offset, c.generation, c.seq)
                                                            for o in c.offsets]) for c in passed])
        return outcomes

    def alter_offsets(self, name: str, offsets: list) -> None:
        entries = [(o.partition, o.offset) if isinstance(o, SourceOffset) else tuple(o) for o in offsets]
        self._commit_offsets_of({name: [(partition, offset, None, None) for partition, offset in entries]})

    def reset_offsets(self, name: str) -> None:
        self._script("import", [self._k("connectors"), self._k("conn", name), self._k("st", name),
                                self._k("off", name), self._k("offnames"), self._k("ord", name)],
                     [name, "0", "", "", "", "0", 0, "1"])

    # ------------------------------------------------------------ switch support
    def export_name(self, name: str) -> NameSnapshot:
        """The base export plus each offset's commit numbers (``ord:<name>``), which a switch carries along."""
        snap = super().export_name(name)
        held = self._run(lambda: self._client.hgetall(self._k("ord", name)))
        for key, order in held.items():
            key, order = (v.decode() if isinstance(v, bytes) else v for v in (key, order))
            generation, _, seq = order.partition(":")
            snap.offset_commits[key] = (int(generation), int(seq))
        return snap

    def offset_names(self) -> list[str]:
        return sorted(self._run(lambda: self._client.smembers(self._k("offnames"))))

    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        name, rec = snapshot.name, snapshot.record
        args: list[Any] = [name]
        if "config" in kinds and rec is not None:
            if rec.target_state not in TARGET_STATES:
                raise ValueError(f"unknown target state {rec.target_state!r} of {name}")
            args += ["1", _dumps(dict(rec.config)), rec.target_state, _dumps([dict(t) for t in rec.tasks])]
        else:
            args += ["1" if "config" in kinds else "0", "", "", ""]
        st = snapshot.statuses or {}
        items = ([(CONNECTOR_TASK, st["connector"])] if st.get("connector") else []) + \
            [(str(int(k)), v) for k, v in (st.get("tasks") or {}).items() if v]
        if "statuses" in kinds:
            args += ["1", len(items)]
            for field, v in items:
                args += [field, _dumps({"state": v.get("state"), "trace": v.get("trace"),
                                        "worker_id": v.get("worker_id"), "generation": v.get("generation")})]
        else:
            args += ["0", 0]
        if "offsets" in kinds:
            args.append("1")
            order = snapshot.offset_commits or {}
            for o in snapshot.offsets:
                k = partition_key(o.partition)
                g_s = order.get(k)
                args += [k, _dumps([dict(o.partition), dict(o.offset)]), "" if g_s is None else f"{g_s[0]}:{g_s[1]}"]
        else:
            args.append("0")
        self._script("import", [self._k("connectors"), self._k("conn", name), self._k("st", name),
                                self._k("off", name), self._k("offnames"), self._k("ord", name)], args)
        if "statuses" in kinds:  # a second script: a crash in between leaves old topics, never new statuses lost
            self._script("set_topics", [self._k("top", name)], ["1", *sorted(set(snapshot.topics))])

    def clear(self) -> None:
        keys = [k for pattern in ("conn:*", "st:*", "off:*", "ord:*", "top:*")
                for k in self._run(lambda p=pattern: list(self._client.scan_iter(self._k(p), count=1000)))]
        self._script("clear", [self._k("connectors"), self._k("offnames"), *keys], [])
