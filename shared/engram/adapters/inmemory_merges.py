"""Possible duplicates and merges in the in-memory store (``MemoryTx.nearest`` and
``MemoryTx.fold``), mixed into ``InMemoryTx`` as PostgreSQL does them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from engram.adapters import inmemory_versions as histories
from engram.adapters.inmemory_rows import MISSING
from engram.memories.models import Memory, Status
from engram.memories.ports import AccessContext
from engram.memories.privacy import memory_visible
from engram.memories.recall import cosine
from engram.memories.versions import MemoryVersion

_LIVE = (Status.ACTIVE, Status.PENDING_REVIEW)


class _Tables(Protocol):
    rows: dict[str, Memory]
    embeddings: dict[str, tuple[str | None, list[float] | None]]
    versions: dict[str, list[MemoryVersion]]


class MergeMethods:
    """Needs the tables (``_s``), ``_ctx``, ``_now`` and the journal of ``InMemoryTx``."""

    _s: _Tables
    _ctx: AccessContext
    _now: datetime

    def _assign(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        raise NotImplementedError

    def _put(self, row: Memory) -> None:
        raise NotImplementedError

    def nearest(
        self, memory: Memory, model_id: str, embedding: list[float] | None = None
    ) -> tuple[Memory, float] | None:
        if embedding is None:
            model, embedding = self._s.embeddings.get(memory.id, (None, None))
            if embedding is None or model != model_id:
                return None
        # another row of this owner, scope and user has another key: a key has one row
        owner = (memory.team_id, memory.scope, memory.owner_id, memory.user_id)
        best: tuple[Memory, float] | None = None
        for row in self._s.rows.values():
            model, vector = self._s.embeddings.get(row.id, (None, None))
            if (
                vector is None
                or model != model_id
                or row.id == memory.id
                or (row.team_id, row.scope, row.owner_id, row.user_id) != owner
                or row.status not in _LIVE
                or not memory_visible(self._ctx, row)
            ):
                continue
            similarity = cosine(embedding, vector)
            if best is None or (-similarity, row.id) < (-best[1], best[0].id):
                best = (row, similarity)
        return best

    def fold(self, row: Memory, into: Memory) -> Memory:
        merged = histories.folded(
            self._s.versions.get(row.id, []), self._s.versions.get(into.id, []), into.id, self._now
        )
        moved = len(merged) - len(self._s.versions.get(into.id, []))
        self._assign(self._s.versions, into.id, merged)
        self._assign(self._s.versions, row.id, MISSING)
        after = into.model_copy(update={"version": into.version + moved, "updated_at": self._now})
        self._put(after)
        return after
