"""``PostgresMemoryStore``: the memory store (a ``UnitOfWork``) on PostgreSQL with pgvector,
and the ``EmbeddingBacklog`` beside it.

``with store(ctx) as tx`` is one transaction acting as the application role with the tenant
in transaction-local settings (``pool.Database.tenant``, one round trip with its ``BEGIN``),
so row-level security filters every statement ``tx`` (``PostgresTx``) runs; it commits when
the block ends and rolls back when it raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from psycopg.rows import dict_row

from engram.adapters.postgres.embeddings import NO_TEAM, PostgresEmbeddingBacklog
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.tx import PostgresTx
from engram.clock import Clock, SystemClock
from engram.memories.ports import AccessContext, HistoryRetention, MemoryTx, UnitOfWork


class PostgresMemoryStore(PostgresEmbeddingBacklog, UnitOfWork, HistoryRetention):
    """Memories, personas, team settings, review actions and the outbox of one database."""

    def __init__(self, db: Database, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock or SystemClock()

    @contextmanager
    def __call__(self, ctx: AccessContext) -> Iterator[MemoryTx]:
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            yield PostgresTx(cur, ctx, now)

    def purge_history(self, before: datetime, limit: int) -> int:
        with self._db.tenant(NO_TEAM) as conn:
            row = conn.execute("SELECT engram_purge_history(%s, %s)", (before, limit)).fetchone()
        return int(row[0]) if row else 0
