"""In-memory behavioural stores (development and unit tests). Thread-safe.

``InMemoryBehaviourStore`` is a ``BehaviourStore`` with a fenced round commit; the three
single-part classes are the separate observation log, fact repository and checkpoint store
``engram.consolidate`` also takes (each its own data: they never share a backing).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from engram.behaviour.models import Fact, Observation
from engram.behaviour.ports import (
    BehaviourStore,
    RoundInput,
    RoundWrite,
    decode_identity_cursor,
    keyset_answer,
    offset_answer,
    page_after,
)
from engram.clock import Clock, SystemClock

_GENERATIONS = itertools.count(1)


class _Base:
    def __init__(self) -> None:
        self._lock = threading.RLock()


class InMemoryObservationLog(_Base):
    def __init__(self) -> None:
        super().__init__()
        self._obs: dict[str, dict[str, Observation]] = {}  # identity -> id -> obs (with seq)
        self._seq: dict[str, int] = {}
        # ids pruned by the 7-day rule: identity -> id -> createdAt, kept (as Redis keeps its
        # tombstones) until the 30-day hard prune, so a redelivery is not counted again
        self._gone: dict[str, dict[str, int]] = {}

    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        added = 0
        with self._lock:
            log = self._obs.setdefault(identity_id, {})
            gone = self._gone.get(identity_id, {})
            for obs in observations:
                if obs.id in log or obs.id in gone:
                    continue
                seq = self._seq.get(identity_id, 0) + 1
                self._seq[identity_id] = seq
                log[obs.id] = obs.model_copy(update={"seq": seq, "identity_id": identity_id})
                added += 1
        return added

    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        after = checkpoint or 0
        with self._lock:
            items = [o for o in self._obs.get(identity_id, {}).values() if (o.seq or 0) > after]
        return sorted(items, key=lambda o: o.seq or 0)

    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        with self._lock:
            log = self._obs.get(identity_id, {})
            doomed = [
                k
                for k, o in log.items()
                if o.created_at < before_ms and (up_to_seq is None or (o.seq or 0) <= up_to_seq)
            ]
            if up_to_seq is not None and doomed:  # the 7-day rule: leave a tombstone
                gone = self._gone.setdefault(identity_id, {})
                for k in doomed:
                    gone[k] = log[k].created_at
            elif up_to_seq is None:  # the hard limit: tombstones go too
                gone = self._gone.get(identity_id, {})
                for k in [k for k, ts in gone.items() if ts < before_ms]:
                    del gone[k]
            for k in doomed:
                del log[k]
        return len(doomed)


class InMemoryFactRepository(_Base):
    def __init__(self) -> None:
        super().__init__()
        self._facts: dict[str, dict[str, Fact]] = {}
        self._version: dict[str, int] = {}

    def _bump(self, identity_id: str) -> None:
        self._version[identity_id] = self._version.get(identity_id, 0) + 1

    def get(self, identity_id: str) -> list[Fact]:
        with self._lock:
            return [f.model_copy() for f in self._facts.get(identity_id, {}).values()]

    def upsert(self, identity_id: str, fact: Fact) -> None:
        self.upsert_batch(identity_id, [fact])

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        with self._lock:
            store = self._facts.setdefault(identity_id, {})
            for fact in facts:
                store[fact.id] = fact.model_copy()
            self._bump(identity_id)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        with self._lock:
            store = self._facts.get(identity_id, {})
            n = sum(1 for fid in fact_ids if store.pop(fid, None) is not None)
            self._bump(identity_id)
        return n

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        """Delete each fact only if it is still stored as read (same ``last_reinforced_at``
        and ``updated_at``): a fact reinforced meanwhile stays."""
        with self._lock:
            store = self._facts.get(identity_id, {})
            n = 0
            for fact in facts:
                cur = store.get(fact.id)
                if (
                    cur is not None
                    and cur.last_reinforced_at == fact.last_reinforced_at
                    and cur.updated_at == fact.updated_at
                ):
                    del store[fact.id]
                    n += 1
            if n:
                self._bump(identity_id)
        return n


class InMemoryCheckpointStore(_Base):
    def __init__(self) -> None:
        super().__init__()
        self._cursor: dict[str, int] = {}

    def get(self, identity_id: str) -> int | None:
        with self._lock:
            return self._cursor.get(identity_id)

    def set(self, identity_id: str, value: int) -> None:
        with self._lock:
            self._cursor[identity_id] = value


class InMemoryBehaviourStore(InMemoryObservationLog, InMemoryFactRepository, BehaviourStore):
    """The whole store on shared state, with a fenced round commit."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        InMemoryObservationLog.__init__(self)
        InMemoryFactRepository.__init__(self)
        self._cursor: dict[str, int] = {}
        self._active: dict[str, int] = {}
        self._gen: dict[str, int] = {}  # drawn on first append; gone with an erasure (fence)
        self.clock = clock or SystemClock()

    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        with self._lock:
            self._active[identity_id] = self.clock.now_ms()
            self._gen.setdefault(identity_id, next(_GENERATIONS))
            return super().append(identity_id, observations)

    def get_checkpoint(self, identity_id: str) -> int | None:
        with self._lock:
            return self._cursor.get(identity_id)

    def set_checkpoint(self, identity_id: str, value: int) -> None:
        with self._lock:
            self._cursor[identity_id] = value

    def read_round(self, identity_id: str) -> RoundInput:
        with self._lock:
            cursor = self._cursor.get(identity_id, 0)
            return RoundInput.of_pending(
                self.since(identity_id, cursor),
                cursor=cursor,
                version=self._version.get(identity_id, 0),
                facts=self.get(identity_id),
                token=self._gen.get(identity_id),
            )

    def apply_round(self, identity_id: str, write: RoundWrite) -> bool:
        read = write.read
        with self._lock:
            if (
                self._gen.get(identity_id) != read.token
                or self._cursor.get(identity_id, 0) != read.cursor
                or self._version.get(identity_id, 0) != read.version
            ):
                return False
            store = self._facts.setdefault(identity_id, {})
            for fact in write.upserts:
                store[fact.id] = fact.model_copy()
            for fid in write.deletes:
                store.pop(fid, None)
            self._bump(identity_id)
            self._active[identity_id] = write.now_ms
            self._cursor[identity_id] = read.max_seq
            self.prune(identity_id, write.prune_before_ms, up_to_seq=read.max_seq)
            self.prune(identity_id, write.hard_prune_before_ms)
            return True

    def erase(self, identity_id: str) -> dict[str, int]:
        with self._lock:
            obs = self._obs.pop(identity_id, {})
            facts = self._facts.pop(identity_id, {})
            self._cursor.pop(identity_id, None)
            self._seq.pop(identity_id, None)
            self._gone.pop(identity_id, None)
            self._active.pop(identity_id, None)
            self._gen.pop(identity_id, None)
            self._version.pop(identity_id, None)
        return {"observations": len(obs), "facts": len(facts)}

    def export(self, identity_id: str) -> dict[str, Any]:
        """The derived export, under the lock: one snapshot."""
        with self._lock:
            return super().export(identity_id)

    def remove_if_empty(self, identity_id: str) -> bool:
        """Atomically drop an identity that holds no observation and no fact."""
        with self._lock:
            if self._obs.get(identity_id) or self._facts.get(identity_id):
                return False
            self.erase(identity_id)
            return True

    def _index_rows(self, active_before_ms: int | None) -> list[tuple[str, float]]:
        """The identity index (id, last activity), least recently active first."""
        with self._lock:
            return [
                (i, float(t))
                for i, t in sorted(self._active.items(), key=lambda kv: (kv[1], kv[0]))
                if active_before_ms is None or t < active_before_ms
            ]

    def identities_at(
        self, offset: int, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], int]:
        ids = [i for i, _ in self._index_rows(active_before_ms)[offset : offset + limit]]
        return offset_answer(ids, offset, limit)

    def identities_after(
        self, cursor: str, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], str]:
        rows = self._index_rows(active_before_ms)
        page = (
            rows[:limit] if not cursor else page_after(rows, decode_identity_cursor(cursor), limit)
        )
        return keyset_answer(page, limit)
