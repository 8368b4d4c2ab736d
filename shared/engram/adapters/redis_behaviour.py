"""Behavioural memory on Redis: cluster-safe keys, arrival-order cursor, fenced commits.

Key layout (``P`` = ``Settings.redis_key_prefix``, every key of one identity shares the hash
tag ``{identityId}``, so multi-key Lua works on ElastiCache Serverless / cluster mode):

- ``P:state:{id}``   hash: ``seq`` (arrival counter), ``cursor`` (consolidated up to seq),
  ``version`` (the commit fence: bumped by every fact mutation and by every prune or
  checkpoint that lowers a pending count), ``active`` (last activity, epoch ms),
  ``gen`` (a random generation set when the identity's log is created), ``pmaxts``
- ``P:obs:{id}``     sorted set: observation JSON scored by arrival ``seq``
- ``P:obsid:{id}``   hash: observation id → seq (``0`` once pruned: idempotency tombstone)
- ``P:obsts:{id}``   sorted set: live observation ids scored by ``createdAt``
- ``P:obsgone:{id}`` sorted set: tombstoned ids scored by ``createdAt`` (gone at 30 days)
- ``P:facts:{id}``   hash: fact id → fact JSON
- ``P:identities``   sorted set (not per identity): identity ids scored by last activity

Every write refreshes a TTL backstop (``identity_ttl_days``) on all keys of the identity.
A consolidation is one MULTI/EXEC read of the state, the pending aggregate and the facts, and
one ``EVALSHA`` commit that only applies if the generation, cursor and fact version are those it
read; the index update (``ZADD XX``: never re-creating an erased identity's entry) rides in the
same pipeline. ``round_trips`` counts network calls.

On a Redis Cluster (``engram.adapters.redis_client.is_cluster``) every script and every
transaction touches the keys of one identity only (one slot); the index is the one key outside
it and always travels as a command of its own. Scripts are loaded on every primary, and a
staged commit is a one-slot MULTI/EXEC followed by the index update (two round trips there,
one on a standalone server).

Erasure deletes every key of the identity and its index entry, and leaves nothing behind: a
consolidation that read before the erasure is fenced by the generation (gone with the state
hash; a returning user's first append draws a new one), so it never writes facts back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from itertools import chain
from typing import Any, cast, overload

from pydantic import TypeAdapter
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from engram.adapters.redis_client import RedisClient, is_cluster
from engram.behaviour.models import (
    TRUSTED,
    Fact,
    FactCategory,
    Observation,
    ObservationType,
    observation_to_fact_key,
)
from engram.behaviour.ports import (
    KeyGroup,
    RoundInput,
    decode_identity_cursor,
    encode_identity_cursor,
    page_after,
)
from engram.clock import MS_PER_DAY, Clock, SystemClock
from engram.errors import InvalidInput

_PRUNE_LUA = r"""
local function header(member)
  return string.match(member, '^(%a)\31([^\31]*)\31([^\31]*)\31(%d+)\n')
end
local function unpend(lo, hi)
  local rows = redis.call('ZRANGEBYSCORE', KEYS[2], lo, hi)
  -- lowering a pending count is a mutation the commit fence must see: a consolidation that
  -- read the count before would otherwise subtract it a second time
  if #rows > 0 then redis.call('HINCRBY', KEYS[1], 'version', 1) end
  for _, member in ipairs(rows) do
    local kind, key = header(member)
    if kind then
      local field = kind .. '\31' .. key
      if redis.call('HINCRBY', KEYS[7], field, -1) <= 0 then
        redis.call('HDEL', KEYS[7], field, 'l\31' .. key)
      end
    end
  end
end
local function drop_live(id, tomb, cursor)
  local seq = redis.call('HGET', KEYS[3], id)
  if seq then
    if tonumber(seq) > cursor then unpend(seq, seq) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq)
  end
  local ts = redis.call('ZSCORE', KEYS[4], id)
  redis.call('ZREM', KEYS[4], id)
  if tomb and ts then
    redis.call('HSET', KEYS[3], id, 0)
    redis.call('ZADD', KEYS[5], ts, id)
  else
    redis.call('HDEL', KEYS[3], id)
  end
end
local function prune(soft_before, up_to, hard_before)
  local n = 0
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
  if soft_before then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. soft_before)
    for _, id in ipairs(ids) do
      local seq = tonumber(redis.call('HGET', KEYS[3], id) or '0')
      if seq <= up_to and seq <= cursor then drop_live(id, true, cursor); n = n + 1 end
    end
  end
  if hard_before then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. hard_before)
    for _, id in ipairs(ids) do drop_live(id, false, cursor); n = n + 1 end
    local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. hard_before)
    for _, id in ipairs(gone) do redis.call('HDEL', KEYS[3], id) end
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. hard_before)
  end
  return n
end
local function touch(ttl)
  for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
"""

# KEYS: state obs obsid obsts obsgone facts pending
# ARGV: ttl_ms now_ms gen then (id, createdAt, member) triples; ``gen`` only sticks when the
# identity has none yet (a fresh identity, or one erased since).
_APPEND = (
    _PRUNE_LUA
    + r"""
redis.call('HSETNX', KEYS[1], 'gen', ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'seq', 'pmaxts')
local seq = tonumber(st[1] or '0')
local pmaxts = tonumber(st[2] or '0')
local added = 0
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[3], id) == 0 then
    seq = seq + 1
    redis.call('HSET', KEYS[3], id, seq)
    redis.call('ZADD', KEYS[2], seq, ARGV[i + 2])
    redis.call('ZADD', KEYS[4], ARGV[i + 1], id)
    local kind, key, label = header(ARGV[i + 2])
    if kind then
      redis.call('HINCRBY', KEYS[7], kind .. '\31' .. key, 1)
      if kind == 'e' then redis.call('HSET', KEYS[7], 'l\31' .. key, label) end
    end
    local created = tonumber(ARGV[i + 1])
    if created > pmaxts then pmaxts = created end
    added = added + 1
  end
end
redis.call('HSET', KEYS[1], 'seq', seq, 'active', ARGV[2], 'pmaxts', pmaxts)
touch(ARGV[1])
return added
"""
)

# KEYS: state obs obsid obsts obsgone facts pending stage
# ARGV: exp_cursor exp_version new_cursor now ttl soft_before hard_before exp_pmaxts exp_gen
#       pending (the pending aggregate as read: ``field␞count␞`` repeated), then either
#       ``stage`` (the whole new fact set was written to the stage hash in the same MULTI:
#       it replaces the facts hash), ``none`` (the new fact set is empty) or n_up, n_up
#       (id, json) pairs, deleted fact ids.
_COMMIT = (
    _PRUNE_LUA
    + r"""
local st = redis.call('HMGET', KEYS[1], 'cursor', 'version', 'pmaxts', 'gen', 'seq')
if (st[4] or '') ~= ARGV[9] or tonumber(st[1] or '0') ~= tonumber(ARGV[1])
    or tonumber(st[2] or '0') ~= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[8])
  return -1
end
if tonumber(st[5] or '0') == tonumber(ARGV[3]) then
  -- nothing arrived since the read: the pending aggregate is exactly what was consolidated
  redis.call('DEL', KEYS[7])
else
  for field, count in string.gmatch(ARGV[10], '([^\30]+)\30([^\30]*)\30') do
    if string.byte(field) ~= 108 then  -- not a label ('l')
      if redis.call('HINCRBY', KEYS[7], field, -tonumber(count)) <= 0 then
        redis.call('HDEL', KEYS[7], field, 'l\31' .. string.sub(field, 3))
      end
    end
  end
end
if ARGV[11] == 'stage' then
  -- the fact set as read (the fence above proves it unchanged) with this round's changes
  redis.call('RENAME', KEYS[8], KEYS[6])
elseif ARGV[11] == 'none' then
  redis.call('DEL', KEYS[6])  -- the round leaves no fact at all
else
  -- many fields per HSET / HDEL call (chunks keep unpack well inside Lua's stack limit)
  local i = 12
  local last = 11 + 2 * tonumber(ARGV[11])
  while i <= last do
    local j = math.min(i + 999, last)
    redis.call('HSET', KEYS[6], unpack(ARGV, i, j))
    i = j + 1
  end
  while i <= #ARGV do
    local j = math.min(i + 999, #ARGV)
    redis.call('HDEL', KEYS[6], unpack(ARGV, i, j))
    i = j + 1
  end
end
local version = tonumber(st[2] or '0') + 1
if tonumber(st[3] or '0') == tonumber(ARGV[8]) then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[3], 'active', ARGV[4], 'version', version, 'pmaxts', 0)
else
  redis.call('HSET', KEYS[1], 'cursor', ARGV[3], 'active', ARGV[4], 'version', version)
end
local pruned = prune(ARGV[6], tonumber(ARGV[3]), ARGV[7])
touch(ARGV[5])
return pruned
"""
)

# KEYS: state obs obsid obsts obsgone facts pending. ARGV: soft_before|'' up_to hard_before|''
_PRUNE = (
    _PRUNE_LUA
    + r"""
local soft, hard = nil, nil
if ARGV[1] ~= '' then soft = ARGV[1] end
if ARGV[3] ~= '' then hard = ARGV[3] end
return prune(soft, tonumber(ARGV[2]), hard)
"""
)

# KEYS: state obs obsid obsts obsgone facts pending. ARGV: ttl now mode(upsert|delete) args...
_FACTS = (
    _PRUNE_LUA
    + r"""
local n = 0
if ARGV[3] == 'upsert' then
  for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1]); n = n + 1 end
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  touch(ARGV[1])
else
  for i = 4, #ARGV do n = n + redis.call('HDEL', KEYS[6], ARGV[i]) end
  -- nothing deleted, nothing to fence (and no state key created for an erased identity)
  if n > 0 then
    redis.call('HINCRBY', KEYS[1], 'version', 1)
    touch(ARGV[1])
  end
end
return n
"""
)

# KEYS: state obs obsid obsts obsgone facts pending. ARGV: ttl (id, lastReinforcedAt,
# updatedAt) triples. Deletes each fact only if it is stored unchanged since it was read.
_FACTS_IF_UNCHANGED = (
    _PRUNE_LUA
    + r"""
local n = 0
for i = 2, #ARGV, 3 do
  local row = redis.call('HGET', KEYS[6], ARGV[i])
  if row then
    local ok, fact = pcall(cjson.decode, row)
    if ok and type(fact) == 'table' and fact['lastReinforcedAt'] == tonumber(ARGV[i + 1])
        and fact['updatedAt'] == tonumber(ARGV[i + 2]) then
      n = n + redis.call('HDEL', KEYS[6], ARGV[i])
    end
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  touch(ARGV[1])
end
return n
"""
)

# KEYS: state obs obsid obsts obsgone facts pending. ARGV: cursor. Sets the checkpoint and
# drains the pending counts of the observations it now covers (seq in (old cursor, cursor]).
_CHECKPOINT = (
    _PRUNE_LUA
    + r"""
local old = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
local new = tonumber(ARGV[1])
if new > old then unpend('(' .. old, new) end
redis.call('HSET', KEYS[1], 'cursor', new)
return 1
"""
)

# KEYS: state obs obsid obsts obsgone facts pending stage. Deletes everything; nothing
# lingers. A consolidation that read before the erasure is fenced by the generation it read.
_ERASE = r"""
local obs = redis.call('ZCARD', KEYS[2])
local facts = redis.call('HLEN', KEYS[6])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return {obs, facts}
"""

# KEYS: state obs obsid obsts obsgone facts pending stage. Removes the identity only if it
# holds no observation, no fact and nothing pending (atomic: nothing arriving can be lost).
_REMOVE_IF_EMPTY = r"""
if redis.call('ZCARD', KEYS[2]) > 0 or redis.call('HLEN', KEYS[6]) > 0
    or redis.call('HLEN', KEYS[7]) > 0 then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return 1
"""

# KEYS: index. ARGV: identity, score read before the removal. Drops the index entry unless
# the identity became active again meanwhile.
_UNINDEX = r"""
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""

STAGE_MIN_UPSERTS = 32

_KEY_NAMES = ("state", "obs", "obsid", "obsts", "obsgone", "facts", "pending")

_SCRIPTS = {
    "append": _APPEND,
    "commit": _COMMIT,
    "prune": _PRUNE,
    "facts": _FACTS,
    "facts_if_unchanged": _FACTS_IF_UNCHANGED,
    "checkpoint": _CHECKPOINT,
    "erase": _ERASE,
    "remove_if_empty": _REMOVE_IF_EMPTY,
    "unindex": _UNINDEX,
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_FACTS_ADAPTER: TypeAdapter[list[Fact]] = TypeAdapter(list[Fact])


def _parse_facts(rows: Sequence[Any]) -> list[Fact]:
    """Parse many fact JSON documents in one validator call."""
    if not rows:
        return []
    try:
        blob = b",".join(rows)
    except TypeError:  # a client decoding responses gives str
        blob = b",".join(r if isinstance(r, bytes) else str(r).encode() for r in rows)
    return _FACTS_ADAPTER.validate_json(b"[" + blob + b"]")


_FACT_HEAD = b'{"confidence":'
_TAIL_START = b',"createdAt":'
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _fact_head(d: dict[str, Any]) -> str:
    """The mutable fields of a stored fact, in a fixed order, up to (not including) the comma
    before the unchanging ones. The three a round sets to the same values for every fact it
    reinforces come last (``_HeadEncoder`` formats them once per round)."""
    ease = d["ease_factor"]
    cursor = d["round_cursor"]
    return (
        f'{{"confidence":{d["confidence"]!r},"reinforcementCount":{d["reinforcement_count"]},'
        f'"easeFactor":{"null" if ease is None else repr(ease)},'
        f'"lastReinforcedAt":{d["last_reinforced_at"]},"updatedAt":{d["updated_at"]},'
        f'"roundCursor":{"null" if cursor is None else cursor}'
    )


class _HeadEncoder:
    """``_fact_head`` for many facts of one round, as bytes: the (lastReinforcedAt,
    updatedAt, roundCursor) suffix and the confidence texts are formatted once per distinct
    value (a round gives every fact it reinforces the same three)."""

    __slots__ = ("_confidence", "_suffix")

    def __init__(self) -> None:
        self._suffix: dict[tuple[int, int, int | None], str] = {}
        self._confidence: dict[float, str] = {}

    def __call__(self, d: dict[str, Any]) -> bytes:
        key = (d["last_reinforced_at"], d["updated_at"], d["round_cursor"])
        suffix = self._suffix.get(key)
        if suffix is None:
            cursor = "null" if key[2] is None else str(key[2])
            suffix = f',"lastReinforcedAt":{key[0]},"updatedAt":{key[1]},"roundCursor":{cursor}'
            self._suffix[key] = suffix
        value = d["confidence"]
        confidence = self._confidence.get(value)
        if confidence is None:
            confidence = self._confidence[value] = repr(value)
        ease = d["ease_factor"]
        return (
            f'{{"confidence":{confidence},"reinforcementCount":{d["reinforcement_count"]},'
            f'"easeFactor":{"null" if ease is None else repr(ease)}{suffix}'
        ).encode()


def _fact_tail(d: dict[str, Any]) -> str:
    """The fields of a stored fact that never change after it is created."""
    return (
        f'"createdAt":{d["created_at"]},"id":{_dumps(d["id"])},'
        f'"identityId":{_dumps(d["identity_id"])},"category":"{d["category"].value}",'
        f'"subject":{_dumps(d["subject"])},"content":{_dumps(d["content"])}}}'
    )


def encode_fact(fact: Fact) -> bytes:
    """The stored JSON of a fact: the same camelCase object as ``Fact.to_storage_json`` (and
    read the same way), with the six fields a reinforcement changes first, ``easeFactor``
    and ``roundCursor`` always present (``null`` when unset) — so a round rewriting a fact
    it read re-encodes only those and reuses the stored bytes of the rest."""
    d = fact.__dict__
    return (_fact_head(d) + "," + _fact_tail(d)).encode()


def _stored_tail(row: bytes) -> bytes | None:
    """The unchanging part of a stored fact written by ``encode_fact`` (None for any other
    layout, e.g. facts written before it: those are re-encoded in full)."""
    if not row.startswith(_FACT_HEAD):
        return None
    at = row.find(_TAIL_START)  # the head holds numbers only: the first match is the border
    return row[at + 1 :] if at > 0 else None


class _ReadToken:
    """What ``commit_round`` needs back from ``read_round``."""

    __slots__ = ("gen", "pending", "pmaxts", "rows")

    def __init__(self, pending: bytes, pmaxts: int, gen: str, rows: list[bytes]) -> None:
        self.pending = pending
        self.pmaxts = pmaxts
        self.gen = gen
        self.rows = rows


_SEP = "\x1f"
_KIND = {
    ObservationType.TOOL_SUCCESS: "s",
    ObservationType.TOOL_FAILURE: "f",
    ObservationType.ENTITY_ACCESS: "e",
    ObservationType.QUERY_PATTERN: "d",
}


def _label(text: str) -> str:
    return "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text)[:200]


def encode_member(obs: Observation) -> str:
    """``kind␟key␟label␟createdAt\\n<json>``: a header the read script groups by without
    decoding JSON (key fields are validated free of control characters), then the JSON."""
    md = obs.metadata
    if obs.type in (ObservationType.TOOL_SUCCESS, ObservationType.TOOL_FAILURE):
        key = label = str(md["toolName"])
    else:
        _, key = observation_to_fact_key(obs)
        if obs.type is ObservationType.ENTITY_ACCESS:
            label = str(md.get("entityName") or md["entityId"])
        else:
            label = str(md["domain"])
    header = _SEP.join((_KIND[obs.type], key, _label(label), str(obs.created_at)))
    return f"{header}\n{obs.to_storage_json()}"


def decode_member(member: bytes | str) -> str:
    """The observation JSON of a stored member."""
    text = _text(member)
    return text.split("\n", 1)[1]


class _RedisBase:
    """Shared plumbing: keys, scripts, the round-trip counter and retention helpers."""

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = "engram",
        ttl_days: int = 90,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_ms = ttl_days * MS_PER_DAY
        self.clock = clock or SystemClock()
        self.round_trips = 0
        self._sha: dict[str, str] = {}
        # commits with at least this many upserts rewrite the fact set through the stage hash
        self.stage_min_upserts = STAGE_MIN_UPSERTS

    # --- keys -------------------------------------------------------------------------
    def keys(self, identity_id: str) -> list[str]:
        """state, obs, obsid, obsts, obsgone, facts, pending — all tagged ``{identity}``."""
        tag = "{" + identity_id + "}"
        p = self.prefix
        return [f"{p}:{name}:{tag}" for name in _KEY_NAMES]

    def stage_key(self, identity_id: str) -> str:
        """``P:stage:{id}``: the new fact set of a staged commit, written and renamed over the
        facts hash inside one MULTI/EXEC (never outlives the transaction)."""
        return f"{self.prefix}:stage:{{{identity_id}}}"

    def _all_keys(self, identity_id: str) -> list[str]:
        return [*self.keys(identity_id), self.stage_key(identity_id)]

    @property
    def index_key(self) -> str:
        return f"{self.prefix}:identities"

    def shares_backing_with(self, other: object) -> bool:
        """Same prefix on the same Redis server and database (the same client object, or
        clients whose connection pools point at the same host/port/db or socket path)."""
        if not isinstance(other, _RedisBase | _CheckpointView):
            return False
        theirs = _backing(other)
        if theirs.prefix != self.prefix:
            return False
        return theirs.client is self.client or _server_of(theirs.client) == _server_of(self.client)

    # --- script plumbing --------------------------------------------------------------
    def _load(self) -> None:
        if is_cluster(self.client):
            # SCRIPT LOAD goes to every primary: a script runs on the node owning its slot
            shas = [self.client.script_load(source) for source in _SCRIPTS.values()]
        else:
            pipe = self.client.pipeline(transaction=False)
            for source in _SCRIPTS.values():
                pipe.script_load(source)
            shas = pipe.execute()
        self.round_trips += 1
        self._sha = {name: _text(sha) for name, sha in zip(_SCRIPTS, shas, strict=True)}

    def _run(
        self,
        name: str,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        touch: str | None = None,
        touch_existing: bool = False,
    ) -> Any:
        """EVALSHA one script (plus an index ZADD for ``touch``; with ``touch_existing`` only
        if the identity is still indexed) in one round trip."""
        if not self._sha:
            self._load()
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            # execute_command: a cluster pipeline routes EVALSHA by its keys (it refuses .evalsha)
            pipe.execute_command("EVALSHA", self._sha[name], len(keys), *keys, *args)
            if touch is not None:
                pipe.zadd(self.index_key, {touch: self.clock.now_ms()}, xx=touch_existing)
            results = pipe.execute(raise_on_error=False)
            self.round_trips += 1
            first = results[0]
            if isinstance(first, NoScriptError) and attempt == 0:
                self._load()  # the server restarted or flushed its script cache
                continue
            for item in results:
                if isinstance(item, Exception):
                    raise item
            return first
        raise NoScriptError("script could not be loaded")  # pragma: no cover

    def _run_staged(
        self, keys: Sequence[str], args: Sequence[Any], rows: Sequence[Any], identity_id: str
    ) -> Any:
        """The commit script after writing ``rows`` (flat id, JSON pairs: the whole new fact
        set) to the stage hash, inside one MULTI/EXEC (so no other client sees or touches the
        stage), plus the index ``ZADD XX`` after it: one round trip (two on a cluster, where
        the index lives in another slot than the transaction)."""
        if not self._sha:
            self._load()
        stage = keys[7]
        for attempt in range(2):
            commit = ("EVALSHA", self._sha["commit"], len(keys), *keys, *args)
            if is_cluster(self.client):
                result = self._staged_on_cluster(stage, rows, commit, identity_id)
            else:
                result = self._staged_on_server(stage, rows, commit, identity_id)
            if isinstance(result, NoScriptError) and attempt == 0:
                self._load()  # the server restarted or flushed its script cache
                continue
            if isinstance(result, Exception):
                self.client.delete(stage)  # pragma: no cover - the script failed: nothing kept
                raise result
            return result
        raise NoScriptError("script could not be loaded")  # pragma: no cover

    def _staged_on_server(
        self, stage: str, rows: Sequence[Any], commit: tuple[Any, ...], identity_id: str
    ) -> Any:
        pipe = self.client.pipeline(transaction=False)
        command: Any = pipe.execute_command
        command("MULTI")
        command("DEL", stage)
        if rows:
            command("HSET", stage, *rows)
        command(*commit)
        command("EXEC")
        pipe.zadd(self.index_key, {identity_id: self.clock.now_ms()}, xx=True)
        results = pipe.execute(raise_on_error=False)
        self.round_trips += 1
        for item in results:
            if isinstance(item, Exception):
                raise item
        return results[-2][-1]

    def _staged_on_cluster(
        self, stage: str, rows: Sequence[Any], commit: tuple[Any, ...], identity_id: str
    ) -> Any:
        tx = self.client.pipeline(transaction=True)  # one slot: the identity's
        tx.execute_command("DEL", stage)
        if rows:
            tx.execute_command("HSET", stage, *rows)
        tx.execute_command(*commit)
        results = tx.execute(raise_on_error=False)
        self.client.zadd(self.index_key, {identity_id: self.clock.now_ms()}, xx=True)
        self.round_trips += 2
        for item in results[:-1]:
            if isinstance(item, Exception):
                raise item
        return results[-1]

    # --- retention helpers ------------------------------------------------------------
    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        """Drop observations created before ``before_ms``; with ``up_to_seq`` only those
        already consolidated (seq <= up_to_seq), leaving an idempotency tombstone."""
        if up_to_seq is None:
            args: list[Any] = ["", 0, before_ms]
        else:
            args = [before_ms, up_to_seq, ""]
        return int(self._run("prune", self.keys(identity_id), args))

    def erase(self, identity_id: str) -> dict[str, int]:
        """Delete every key of the identity and its index entry; counts of what was removed."""
        if not self._sha:
            self._load()
        pipe = self.client.pipeline(transaction=False)
        keys = self._all_keys(identity_id)
        pipe.execute_command("EVALSHA", self._sha["erase"], len(keys), *keys)
        pipe.zrem(self.index_key, identity_id)
        results = pipe.execute(raise_on_error=False)
        self.round_trips += 1
        if isinstance(results[0], NoScriptError):
            self._load()
            return self.erase(identity_id)
        for item in results:
            if isinstance(item, Exception):
                raise item
        obs, facts = results[0]
        return {"observations": int(obs), "facts": int(facts)}

    def remove_if_empty(self, identity_id: str) -> bool:
        """Atomically drop an identity that holds nothing (no observation, fact or pending
        count) and its index entry; False (and nothing changed) otherwise."""
        score = self.client.zscore(self.index_key, identity_id)
        self.round_trips += 1
        if not self._run("remove_if_empty", self._all_keys(identity_id), []):
            return False
        if score is not None:
            self._run("unindex", [self.index_key], [identity_id, repr(float(score))])
        return True

    @overload
    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int = 0, limit: int = 100
    ) -> tuple[list[str], int]: ...

    @overload
    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: str, limit: int = 100
    ) -> tuple[list[str], str]: ...

    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int | str = 0, limit: int = 100
    ) -> tuple[list[str], int] | tuple[list[str], str]:
        """One page of identity ids (least recently active first, ties by id) and the next
        cursor. ``active_before_ms`` keeps identities idle since before that time.

        An int ``cursor`` is an offset (next offset returned, ``0`` when done). A str
        ``cursor`` (``""`` to start) is an opaque keyset cursor, stable under concurrent
        removals and additions (next cursor returned, ``""`` when done); see
        ``engram.behaviour.ports.BehaviourStore.list_identities``.
        """
        if limit < 1:
            raise InvalidInput("limit", "must be at least 1")
        high: int | str = "+inf" if active_before_ms is None else f"({active_before_ms}"
        if isinstance(cursor, int):
            if cursor < 0:
                raise InvalidInput("cursor", "must be a non-negative offset")
            rows = self.client.zrangebyscore(self.index_key, "-inf", high, start=cursor, num=limit)
            self.round_trips += 1
            ids = [_text(r) for r in rows]
            return ids, (cursor + len(ids) if len(ids) == limit else 0)
        after = decode_identity_cursor(cursor) if cursor else None
        low = "-inf" if after is None else repr(after[0])
        page: list[tuple[str, float]] = []
        offset, batch = 0, limit + 1
        while True:
            raw: list[tuple[bytes, float]] = self.client.zrangebyscore(  # type: ignore[assignment]
                self.index_key, low, high, start=offset, num=batch, withscores=True
            )
            self.round_trips += 1
            rows_ = [(_text(m), float(sc)) for m, sc in raw]
            page += rows_ if after is None else page_after(rows_, after, limit - len(page))
            page = page[:limit]
            # more rows with the cursor's own score than one batch: keep reading (rare)
            if len(page) == limit or len(raw) < batch:
                break
            offset += batch
        ids = [m for m, _ in page]
        if len(page) < limit:
            return ids, ""
        return ids, encode_identity_cursor(page[-1][1], page[-1][0])

    def export(self, identity_id: str) -> dict[str, Any]:
        """Everything stored for the identity (stored, not decayed, confidence), as one
        snapshot: one MULTI/EXEC over keys of one slot, so the checkpoint, the observations
        and the facts agree even while the consumer appends or a round commits."""
        state, obs, _, _, _, facts, _ = self.keys(identity_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(state)
        pipe.zrange(obs, 0, -1, withscores=True)
        pipe.hvals(facts)
        st, rows, fact_rows = pipe.execute()
        self.round_trips += 1
        cursor = st.get(b"cursor") if st else None
        return {
            "identityId": identity_id,
            "checkpoint": int(cursor) if cursor is not None else None,
            "observations": [
                {**json.loads(decode_member(member)), "seq": int(score)} for member, score in rows
            ],
            "facts": [json.loads(v) for v in fact_rows],
        }

    def delete_fact(self, identity_id: str, fact_id: str) -> bool:
        n = self._run("facts", self.keys(identity_id), [self.ttl_ms, 0, "delete", fact_id])
        return int(n) == 1

    # --- the atomic consolidation store -------------------------------------------------
    def read_round(self, identity_id: str) -> RoundInput:
        """One MULTI/EXEC round trip: cursor, version, arrival seq, the pending aggregate
        (counts per fact key, kept up to date by ``append``) and the facts — O(distinct
        keys), not O(observations)."""
        keys = self.keys(identity_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(keys[0], "cursor", "version", "seq", "pmaxts", "gen")
        pipe.hgetall(keys[6])
        pipe.hvals(keys[5])
        (cursor, version, seq, pmaxts, gen), pairs, fact_rows = pipe.execute()
        self.round_trips += 1
        cursor, version, seq, pmaxts = (int(x or 0) for x in (cursor, version, seq, pmaxts))
        groups, count, pending = _groups(pairs, seq)
        rows = fact_rows
        if rows and type(rows[0]) is not bytes:  # a client decoding responses gives str
            rows = [str(r).encode() for r in rows]
        return RoundInput(
            cursor=cursor,
            version=version,
            facts=_parse_facts(rows),
            groups=groups,
            observation_count=count,
            max_seq=seq,
            max_created_at=pmaxts,
            token=_ReadToken(pending, pmaxts, _text(gen) if gen is not None else "", rows),
        )

    def commit_round(
        self,
        identity_id: str,
        *,
        read: RoundInput,
        upserts: Sequence[Fact],
        deletes: Sequence[str],
        prune_before_ms: int,
        hard_prune_before_ms: int,
        now_ms: int,
    ) -> bool:
        """The fenced commit. Few changes go to the script as arguments; many (at least
        ``stage_min_upserts``) are written as the whole new fact set to the stage hash and
        renamed over the facts hash by the script — plain ``HSET`` arguments cost Redis a
        tenth of what script arguments cost."""
        token = read.token if isinstance(read.token, _ReadToken) else _ReadToken(b"", 0, "", [])
        args: list[Any] = [
            read.cursor,
            read.version,
            read.max_seq,
            now_ms,
            self.ttl_ms,
            prune_before_ms,
            hard_prune_before_ms,
            token.pmaxts,
            token.gen,
            token.pending,
        ]
        keys = self._all_keys(identity_id)
        if len(upserts) >= self.stage_min_upserts and len(token.rows) == len(read.facts):
            rows = _new_fact_set(read.facts, token.rows, upserts, deletes)
            args.append("stage" if rows else "none")
            result = self._run_staged(keys, args, rows, identity_id)
        else:
            args.append(len(upserts))
            args += _encode_upserts(upserts, read.facts, token.rows)
            args += deletes
            result = self._run("commit", keys, args, touch=identity_id, touch_existing=True)
        return int(result) >= 0


def _reencode(read_fact: Fact, row: bytes, fact: Fact) -> bytes:
    """The stored JSON of ``fact``, a change of ``read_fact`` (stored as ``row``): only the
    head is encoded when the unchanging fields are the same (always for a fact reinforced
    in place)."""
    tail = _stored_tail(row)
    if tail is not None and (read_fact is fact or _same_tail(read_fact.__dict__, fact.__dict__)):
        return _fact_head(fact.__dict__).encode() + b"," + tail
    return encode_fact(fact)


def _new_fact_set(
    read_facts: Sequence[Fact],
    rows: Sequence[bytes],
    upserts: Sequence[Fact],
    deletes: Sequence[str],
) -> list[Any]:
    """Flat (id, JSON) pairs of the fact set after the round: the read facts as stored (bytes
    reused, not re-encoded) with the upserts applied and the deletes left out. The hot loop
    of a large round: ``_reencode`` inlined."""
    changed = {f.__dict__["id"]: f for f in upserts}
    deleted = set(deletes)
    out: list[Any] = []
    append = out.append
    pop = changed.pop
    head_start, tail_start = _FACT_HEAD, _TAIL_START
    head = _HeadEncoder()
    for read_fact, row in zip(read_facts, rows, strict=True):
        d = read_fact.__dict__
        fid = d["id"]
        fact = pop(fid, None)
        if deleted and fid in deleted:
            continue
        append(fid)
        if fact is None:
            append(row)
            continue
        at = row.find(tail_start) if row.startswith(head_start) else -1
        if at > 0 and (fact is read_fact or _same_tail(d, fact.__dict__)):
            append(head(fact.__dict__) + row[at:])
        else:
            append(encode_fact(fact))
    for fid, fact in changed.items():
        if fid not in deleted:
            append(fid)
            append(encode_fact(fact))
    return out


def _encode_upserts(
    upserts: Sequence[Fact], read_facts: Sequence[Fact], rows: Sequence[bytes]
) -> list[Any]:
    """(id, stored JSON) pairs of the upserts (see ``_reencode``)."""
    out: list[Any] = []
    if not upserts:
        return out
    read_by_id = (
        {f.__dict__["id"]: (f, row) for f, row in zip(read_facts, rows, strict=True)}
        if len(rows) == len(read_facts)
        else {}
    )
    for fact in upserts:
        fid = fact.__dict__["id"]
        seen = read_by_id.get(fid)
        out.append(fid)
        out.append(encode_fact(fact) if seen is None else _reencode(seen[0], seen[1], fact))
    return out


def _same_tail(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(
        a["created_at"] == b["created_at"]
        and a["identity_id"] == b["identity_id"]
        and a["category"] == b["category"]
        and a["subject"] == b["subject"]
        and a["content"] == b["content"]
    )


def _groups(pairs: dict[Any, Any], max_seq: int) -> tuple[list[KeyGroup], int, bytes]:
    """Key groups from the pending aggregate (``kind␟key`` → count, ``l␟key`` → label), the
    number of pending observations, and the aggregate as the commit sends it back
    (``field␞value␞`` repeated; the script skips the labels)."""
    if pairs and type(next(iter(pairs))) is not bytes:  # a client decoding responses
        pairs = {str(k).encode(): str(v).encode() for k, v in pairs.items()}
    tools: dict[str, list[int]] = {}
    labels: dict[str, str] = {}
    groups: list[KeyGroup] = []
    entities: list[tuple[str, int]] = []
    append = groups.append
    make = KeyGroup._make
    total = 0
    for raw_field, raw_value in pairs.items():
        field = raw_field.decode()
        kind = field[0]
        if kind == "l":
            labels[field[2:]] = raw_value.decode()
            continue
        count = int(raw_value)
        if count <= 0:
            continue
        total += count
        if kind == "s":
            tool = tools.get(field[2:])
            if tool is None:
                tools[field[2:]] = [count, 0]
            else:
                tool[0] += count
        elif kind == "f":
            tool = tools.get(field[2:])
            if tool is None:
                tools[field[2:]] = [0, count]
            else:
                tool[1] += count
        elif kind == "d":
            key = field[2:]
            label = key[key.index(":") + 1 :]
            append(make((FactCategory.DOMAIN_PREFERENCE, key, label, count, 0, 0, max_seq)))
        elif kind == "e":
            entities.append((field[2:], count))
    for key, count in entities:
        label = labels.get(key) or key.split(":", 2)[-1]
        append(make((FactCategory.ENTITY_FREQUENCY, key, label, count, 0, 0, max_seq)))
    affinity, avoidance = FactCategory.TOOL_AFFINITY, FactCategory.TOOL_AVOIDANCE
    for tool_name, (succ, fail) in tools.items():
        if succ:
            subject = "tool_affinity:" + tool_name
            append(make((affinity, subject, tool_name, succ, succ, fail, max_seq)))
        if fail:
            subject = "tool_avoidance:" + tool_name
            append(make((avoidance, subject, tool_name, fail, succ, fail, max_seq)))
    pending = b"\x1e".join(chain.from_iterable(pairs.items())) + b"\x1e" if pairs else b""
    return groups, total, pending


def _server_of(client: RedisClient) -> tuple[Any, ...] | None:
    """(host, port, db, path) of a client's connection pool, or the node names of a cluster;
    None when unknown (then only the same client object counts as the same backing)."""
    if is_cluster(client):
        nodes = cast(RedisCluster, client).get_nodes()  # type: ignore[no-untyped-call]
        return ("cluster", frozenset(node.name for node in nodes))
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    host, port, path = kwargs.get("host"), kwargs.get("port"), kwargs.get("path")
    if host is None and path is None:
        return None
    if path is None and host in ("localhost", "::1"):
        host = "127.0.0.1"
    return (host, port if path is None else None, int(kwargs.get("db") or 0), path)


def _backing(obj: object) -> _RedisBase:
    if isinstance(obj, _CheckpointView):
        return obj.store
    assert isinstance(obj, _RedisBase)
    return obj


class RedisObservationLog(_RedisBase):
    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        """Append observations not seen before (by id); returns how many were new."""
        if not observations:
            return 0
        args: list[Any] = [self.ttl_ms, self.clock.now_ms(), uuid.uuid4().hex]
        for obs in observations:
            args += [obs.id, obs.created_at, encode_member(obs)]
        return int(self._run("append", self.keys(identity_id), args, touch=identity_id))

    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        obs = self.keys(identity_id)[1]
        rows: list[tuple[bytes, float]] = self.client.zrangebyscore(  # type: ignore[assignment]
            obs, f"({checkpoint or 0}", "+inf", withscores=True
        )
        self.round_trips += 1
        out = []
        for member, score in rows:
            o = Observation.model_validate_json(decode_member(member), context=TRUSTED)
            out.append(o.model_copy(update={"seq": int(score)}))
        return out


class RedisFactRepository(_RedisBase):
    def get(self, identity_id: str) -> list[Fact]:
        rows = self.client.hvals(self.keys(identity_id)[5])
        self.round_trips += 1
        return _parse_facts(rows)

    def upsert(self, identity_id: str, fact: Fact) -> None:
        self.upsert_batch(identity_id, [fact])

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        if not facts:
            return
        args: list[Any] = [self.ttl_ms, 0, "upsert"]
        for fact in facts:
            args += [fact.id, encode_fact(fact)]
        self._run("facts", self.keys(identity_id), args, touch=identity_id)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        if not fact_ids:
            return 0
        args: list[Any] = [self.ttl_ms, 0, "delete", *fact_ids]
        return int(self._run("facts", self.keys(identity_id), args))

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        """Delete each fact only if it is still stored as read (same ``lastReinforcedAt``
        and ``updatedAt``), atomically: a fact reinforced meanwhile stays."""
        if not facts:
            return 0
        args: list[Any] = [self.ttl_ms]
        for fact in facts:
            args += [fact.id, fact.last_reinforced_at, fact.updated_at]
        return int(self._run("facts_if_unchanged", self.keys(identity_id), args))


class RedisCheckpointStore(_RedisBase):
    def get(self, identity_id: str) -> int | None:
        value = self.client.hget(self.keys(identity_id)[0], "cursor")
        self.round_trips += 1
        return int(value) if value is not None else None

    def set(self, identity_id: str, value: int) -> None:
        """Set the checkpoint and, atomically, drain the pending counts of the observations
        it now covers (else they would be consolidated again by a later round)."""
        self._run("checkpoint", self.keys(identity_id), [value])


class _CheckpointView:
    """The checkpoint port of a ``RedisBehaviourStore``."""

    def __init__(self, store: RedisBehaviourStore) -> None:
        self.store = store

    def get(self, identity_id: str) -> int | None:
        return RedisCheckpointStore.get(self.store, identity_id)  # type: ignore[arg-type]

    def set(self, identity_id: str, value: int) -> None:
        RedisCheckpointStore.set(self.store, identity_id, value)  # type: ignore[arg-type]


class RedisBehaviourStore(RedisObservationLog, RedisFactRepository):
    """Observation log + fact repository + (``.checkpoints``) checkpoint store on one client.

    ``consolidate(id, observations=s, facts=s, checkpoints=s.checkpoints, …)`` takes the
    atomic path: one read, one fenced commit.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = "engram",
        ttl_days: int = 90,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(client, prefix=prefix, ttl_days=ttl_days, clock=clock)
        self.checkpoints = _CheckpointView(self)
