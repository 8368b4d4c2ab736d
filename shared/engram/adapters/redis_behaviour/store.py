"""Behavioural memory on Redis: cluster-safe keys, arrival-order cursor, fenced commits.

Every key of one identity (``Keys``: state, log, ids, tombstones, facts, pending aggregate,
stage) shares the hash tag ``{identityId}``, so multi-key Lua works on ElastiCache Serverless
/ cluster mode; the identity index ``P:identities`` is the one key outside it. Every write
refreshes a TTL backstop (``identity_ttl_days``) on all keys of the identity.

A consolidation is one MULTI/EXEC read of the state, the pending aggregate and the facts, and
one ``EVALSHA`` commit that only applies if the generation, cursor and fact version are those
it read (the version is bumped by every fact mutation and by every prune or checkpoint that
lowers a pending count); the index update (``ZADD XX``: never re-creating an erased
identity's entry) rides in the same pipeline. ``round_trips`` counts network calls.

On a Redis Cluster every script and every transaction touches the keys of one identity only
(one slot); the index always travels as a command of its own. Scripts are loaded on every
primary, and a staged commit is a one-slot MULTI/EXEC followed by the index update (two round
trips there, one on a standalone server).

Erasure deletes every key of the identity and its index entry, and leaves nothing behind: a
consolidation that read before the erasure is fenced by the generation (gone with the state
hash; a returning user's first append draws a new one), so it never writes facts back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from engram.adapters.redis_behaviour import index
from engram.adapters.redis_behaviour.codec import (
    encode_fact,
    encode_upserts,
    new_fact_set,
    parse_facts,
)
from engram.adapters.redis_behaviour.keys import Keys, index_key
from engram.adapters.redis_behaviour.log_codec import (
    as_text,
    decode_member,
    decode_pending,
    encode_member,
    labelled_letters,
)
from engram.adapters.redis_behaviour.scripts import ScriptRunner, server_of
from engram.adapters.redis_client import RedisClient
from engram.behaviour.models import TRUSTED, Fact, Observation
from engram.behaviour.ports import BehaviourStore, RoundInput, RoundWrite, whole_store
from engram.clock import MS_PER_DAY, Clock, SystemClock

#: Commits with at least this many upserts rewrite the fact set through the stage hash.
STAGE_MIN_UPSERTS = 32


class _ReadToken:
    """What ``commit_round`` needs back from ``read_round``."""

    __slots__ = ("gen", "pending", "pmaxts", "rows")

    def __init__(self, pending: bytes, pmaxts: int, gen: str, rows: list[bytes]) -> None:
        self.pending = pending
        self.pmaxts = pmaxts
        self.gen = gen
        self.rows = rows


class RedisBehaviourStore(ScriptRunner, BehaviourStore):
    """The whole behaviour store on one Redis client (standalone or cluster): ``read_round``
    is one MULTI/EXEC read, ``commit_round`` one fenced commit."""

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = "engram",
        ttl_days: int = 90,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(client, clock or SystemClock())
        self.prefix = prefix
        self.index_key = index_key(prefix)
        self.ttl_ms = ttl_days * MS_PER_DAY
        self.stage_min_upserts = STAGE_MIN_UPSERTS

    def keys(self, identity_id: str) -> Keys:
        """Every key of the identity, all tagged ``{identity}``."""
        return Keys.of(self.prefix, identity_id)

    def stage_key(self, identity_id: str) -> str:
        """``P:stage:{id}``: the new fact set of a staged commit, written and renamed over the
        facts hash inside one MULTI/EXEC (never outlives the transaction)."""
        return self.keys(identity_id).stage

    def shares_backing_with(self, other: object) -> bool:
        """Same prefix on the same Redis server and database (the same client object, or
        clients whose connection pools point at the same host/port/db or socket path)."""
        theirs = whole_store(other)
        if not isinstance(theirs, RedisBehaviourStore) or theirs.prefix != self.prefix:
            return False
        return theirs.client is self.client or server_of(theirs.client) == server_of(self.client)

    # --- the observation log ----------------------------------------------------------
    def _append_args(self, observations: Sequence[Observation]) -> list[Any]:
        labelled = labelled_letters()
        args: list[Any] = [self.ttl_ms, self.clock.now_ms(), uuid.uuid4().hex, labelled]
        for obs in observations:
            args += [obs.id, obs.created_at, encode_member(obs)]
        return args

    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        """Append observations not seen before (by id); returns how many were new."""
        if not observations:
            return 0
        args = self._append_args(observations)
        return int(self._run("append", self.keys(identity_id).log, args, touch=identity_id))

    def append_many(
        self, groups: Mapping[str, Sequence[Observation]]
    ) -> dict[str, int | Exception]:
        """``append`` for several identities in one pipeline (one round trip; on a cluster
        each shard gets the scripts of its identities); per identity how many were new or the
        exception of its append."""
        calls = {
            identity_id: (self.keys(identity_id).log, self._append_args(observations))
            for identity_id, observations in groups.items()
            if observations
        }
        ran = self._run_many("append", calls) if calls else {}
        out: dict[str, int | Exception] = {}
        for identity_id in groups:
            result = ran.get(identity_id, 0)
            out[identity_id] = result if isinstance(result, Exception) else int(result)
        return out

    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        obs = self.keys(identity_id).obs
        rows: list[tuple[bytes, float]] = self.client.zrangebyscore(  # type: ignore[assignment]
            obs, f"({checkpoint or 0}", "+inf", withscores=True
        )
        self.round_trips += 1
        out = []
        for member, score in rows:
            o = Observation.model_validate_json(decode_member(member), context=TRUSTED)
            out.append(o.model_copy(update={"seq": int(score)}))
        return out

    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        """Drop observations created before ``before_ms``; with ``up_to_seq`` only those
        already consolidated (seq <= up_to_seq), leaving an idempotency tombstone."""
        if up_to_seq is None:
            args: list[Any] = ["", 0, before_ms]
        else:
            args = [before_ms, up_to_seq, ""]
        return int(self._run("prune", self.keys(identity_id).log, args))

    def erase(self, identity_id: str) -> dict[str, int]:
        """Delete every key of the identity and its index entry; counts of what was removed."""
        obs, facts = self._run("erase", self.keys(identity_id), [], unindex=identity_id)
        return {"observations": int(obs), "facts": int(facts)}

    def remove_if_empty(self, identity_id: str) -> bool:
        """Atomically drop an identity that holds nothing (no observation, fact or pending
        count) and its index entry; False (and nothing changed) otherwise."""
        score = self.client.zscore(self.index_key, identity_id)
        self.round_trips += 1
        if not self._run("remove_if_empty", self.keys(identity_id), []):
            return False
        if score is not None:
            self._run("unindex", [self.index_key], [identity_id, repr(float(score))])
        return True

    def identities_at(
        self, offset: int, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], int]:
        self.round_trips += 1
        return index.offset_page(
            self.client,
            self.index_key,
            active_before_ms=active_before_ms,
            offset=offset,
            limit=limit,
        )

    def identities_after(
        self, cursor: str, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], str]:
        ids, after, trips = index.keyset_page(
            self.client,
            self.index_key,
            active_before_ms=active_before_ms,
            cursor=cursor,
            limit=limit,
        )
        self.round_trips += trips
        return ids, after

    # --- facts and the checkpoint ------------------------------------------------------
    def get(self, identity_id: str) -> list[Fact]:
        rows = self.client.hvals(self.keys(identity_id).facts)
        self.round_trips += 1
        return parse_facts(rows)

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        if not facts:
            return
        args: list[Any] = [self.ttl_ms, 0, "upsert"]
        for fact in facts:
            args += [fact.id, encode_fact(fact)]
        self._run("facts", self.keys(identity_id).log, args, touch=identity_id)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        if not fact_ids:
            return 0
        args: list[Any] = [self.ttl_ms, 0, "delete", *fact_ids]
        return int(self._run("facts", self.keys(identity_id).log, args))

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        """Delete each fact only if it is still stored as read (same ``lastReinforcedAt``
        and ``updatedAt``), atomically: a fact reinforced meanwhile stays."""
        if not facts:
            return 0
        args: list[Any] = [self.ttl_ms]
        for fact in facts:
            args += [fact.id, fact.last_reinforced_at, fact.updated_at]
        return int(self._run("facts_if_unchanged", self.keys(identity_id).log, args))

    def get_checkpoint(self, identity_id: str) -> int | None:
        value = self.client.hget(self.keys(identity_id).state, "cursor")
        self.round_trips += 1
        return int(value) if value is not None else None

    def set_checkpoint(self, identity_id: str, value: int) -> None:
        """Set the checkpoint and, atomically, drain the pending counts of the observations
        it now covers (else they would be consolidated again by a later round)."""
        self._run("checkpoint", self.keys(identity_id).log, [value])

    # --- rounds ------------------------------------------------------------------------
    def export(self, identity_id: str) -> dict[str, Any]:
        """Everything stored for the identity (stored, not decayed, confidence), as one
        snapshot: one MULTI/EXEC over keys of one slot, so the checkpoint, the observations
        and the facts agree even while the consumer appends or a round commits."""
        keys = self.keys(identity_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(keys.state)
        pipe.zrange(keys.obs, 0, -1, withscores=True)
        pipe.hvals(keys.facts)
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

    # --- the atomic consolidation store -------------------------------------------------
    def read_round(self, identity_id: str) -> RoundInput:
        """One MULTI/EXEC round trip: cursor, version, arrival seq, the pending aggregate
        (counts per fact key, kept up to date by ``append``) and the facts — O(distinct
        keys), not O(observations)."""
        keys = self.keys(identity_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(keys.state, "cursor", "version", "seq", "pmaxts", "gen")
        pipe.hgetall(keys.pending)
        pipe.hvals(keys.facts)
        (cursor, version, seq, pmaxts, gen), pairs, fact_rows = pipe.execute()
        self.round_trips += 1
        cursor, version, seq, pmaxts = (int(x or 0) for x in (cursor, version, seq, pmaxts))
        groups, count, pending = decode_pending(pairs, seq)
        rows = fact_rows
        if rows and type(rows[0]) is not bytes:  # a client decoding responses gives str
            rows = [str(r).encode() for r in rows]
        return RoundInput(
            cursor=cursor,
            version=version,
            facts=parse_facts(rows),
            groups=groups,
            observation_count=count,
            max_seq=seq,
            max_created_at=pmaxts,
            token=_ReadToken(pending, pmaxts, as_text(gen) if gen is not None else "", rows),
        )

    def apply_round(self, identity_id: str, write: RoundWrite) -> bool:
        """The fenced commit. Few changes go to the script as arguments; many (at least
        ``stage_min_upserts``) are written as the whole new fact set to the stage hash and
        renamed over the facts hash by the script — plain ``HSET`` arguments cost Redis a
        tenth of what script arguments cost."""
        read, upserts, deletes = write.read, write.upserts, write.deletes
        token = read.token if isinstance(read.token, _ReadToken) else _ReadToken(b"", 0, "", [])
        args: list[Any] = [
            read.cursor,
            read.version,
            read.max_seq,
            write.now_ms,
            self.ttl_ms,
            write.prune_before_ms,
            write.hard_prune_before_ms,
            token.pmaxts,
            token.gen,
            token.pending,
        ]
        keys = self.keys(identity_id)
        if len(upserts) >= self.stage_min_upserts and len(token.rows) == len(read.facts):
            rows = new_fact_set(read.facts, token.rows, upserts, deletes)
            args.append("stage" if rows else "none")
            result = self._run_staged(keys, args, rows, identity_id)
        else:
            args.append(len(upserts))
            args += encode_upserts(upserts, read.facts, token.rows)
            args += deletes
            result = self._run("commit", keys, args, touch=identity_id, touch_existing=True)
        return int(result) >= 0
