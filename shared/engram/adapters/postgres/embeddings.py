"""The embedding backlog on PostgreSQL (``EmbeddingBacklog``, migration 0013).

The maintenance job reads the rows not embedded by the configured embedder and stores their
vectors through ``SECURITY DEFINER`` functions, from a transaction acting in no team (the
functions refuse a tenant).
"""

from __future__ import annotations

from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.rows import as_uuid, vector_literal
from engram.memories.ports import AccessContext, EmbeddingTask

#: The maintenance job's cross-team calls act in no team (the functions refuse a tenant).
NO_TEAM = AccessContext(team_id="", user_id="engram-maintenance", elevated=False)


class PostgresEmbeddingBacklog:
    """``EmbeddingBacklog`` over ``memories``; mixed into ``PostgresMemoryStore``."""

    _db: Database

    def unembedded(self, model_id: str, limit: int) -> list[EmbeddingTask]:
        with self._db.tenant(NO_TEAM) as conn:
            rows = conn.execute(
                "SELECT id, team_id, key, value FROM engram_embedding_backlog(%s, %s)",
                (model_id, limit),
            ).fetchall()
        return [EmbeddingTask(str(i), t, k, v) for i, t, k, v in rows]

    def set_embeddings(
        self, model_id: str, done: list[tuple[EmbeddingTask, list[float] | None]]
    ) -> int:
        """In one transaction; a row edited since it was read keeps its own save's vector."""
        stored = 0
        with self._db.tenant(NO_TEAM) as conn:
            for task, vector in done:
                row = conn.execute(
                    "SELECT engram_set_embedding(%s, %s, %s, %s, %s::vector)",
                    (
                        as_uuid(task.memory_id),
                        task.key,
                        task.value,
                        model_id,
                        vector_literal(vector),
                    ),
                ).fetchone()
                stored += bool(row and row[0])
        return stored
