"""In-memory memory store (a ``UnitOfWork``): the store the conformance suite runs beside
PostgreSQL. A unit of work holds the store's lock for its whole block (so transactions are
serial) and journals every write, undone in reverse when the block raises
(``engram.adapters.inmemory_tx``). It enforces the visibility of row-level security
(``engram.memories.privacy``) and one row per key; what a write should do is
``engram.memories.rules``, applied by ``engram.memories.writes``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from engram.adapters import inmemory_versions as histories
from engram.adapters.inmemory_rows import ErasureRecords
from engram.adapters.inmemory_tx import InMemoryTx, MemoryTables
from engram.clock import Clock, SystemClock
from engram.memories.ports import (
    AccessContext,
    EmbeddingTask,
    HistoryRetention,
    MemoryTx,
    UnitOfWork,
)
from engram.memories.privacy import can_see


class InMemoryMemoryStore(MemoryTables, UnitOfWork, HistoryRetention):
    """``erasures``: an erasure log consulted and written beside the erasures this store
    records itself. ``transactions`` counts the units of work begun."""

    def __init__(
        self, clock: Clock | None = None, *, erasures: ErasureRecords | None = None
    ) -> None:
        self._clock = clock or SystemClock()
        self._lock = threading.RLock()
        super().__init__(erasures)
        self.transactions = 0
        self._last = datetime.fromtimestamp(0, UTC)

    def _now(self) -> datetime:
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        # strictly increasing within the store, like a database clock per transaction
        self._last = max(now, self._last)
        return self._last

    @contextmanager
    def __call__(self, ctx: AccessContext) -> Iterator[MemoryTx]:
        with self._lock:
            self.transactions += 1
            tx = InMemoryTx(self, ctx, self._now())
            try:
                yield tx
            except BaseException:
                tx.undo_to(0)
                raise

    # --- EmbeddingBacklog -----------------------------------------------------------------
    def unembedded(self, model_id: str, limit: int) -> list[EmbeddingTask]:
        with self._lock:
            rows = sorted(
                (
                    r
                    for r in self.rows.values()
                    if self.embeddings.get(r.id, (None, None))[0] != model_id
                ),
                key=lambda r: r.id,
            )[:limit]
            return [EmbeddingTask(r.id, r.team_id, r.key, r.value) for r in rows]

    def set_embeddings(
        self, model_id: str, done: list[tuple[EmbeddingTask, list[float] | None]]
    ) -> int:
        stored = 0
        with self._lock:
            for task, vector in done:
                row = self.rows.get(task.memory_id)
                if row is not None and (row.key, row.value) == (task.key, task.value):
                    self.embeddings[row.id] = (model_id, vector)
                    stored += 1
        return stored

    # --- HistoryRetention -----------------------------------------------------------------
    def purge_history(self, before: datetime, limit: int) -> int:
        purged = 0
        with self._lock:
            for memory_id, history in list(self.versions.items()):
                kept = histories.purged(history, before, limit - purged)
                purged += len(history) - len(kept)
                if kept:
                    self.versions[memory_id] = kept
                else:
                    del self.versions[memory_id]
        return purged


__all__ = [
    "ErasureRecords",
    "InMemoryMemoryStore",
    "InMemoryTx",
    "can_see",
]
