"""The recall statement's shape (``engram.adapters.postgres.recall``): what it computes once.

Its results are tested against the real PostgreSQL (the store conformance and embedder tests);
these pin the parts of the statement that make it cheap at a million rows.
"""

from __future__ import annotations

from engram.adapters.postgres.recall import INDEXED_VECTOR_DIMS, recall_sql
from engram.memories.models import RecallRequest, RecallTuning


def request(dims: int = 256, persona: str | None = None) -> RecallRequest:
    return RecallRequest(
        team_id="t1",
        user_id="alice",
        persona_id=persona,
        query="favourite editor",
        limit=20,
        embedding=[0.1] * dims,
        embedding_model="m",
        tuning=RecallTuning(fusion="score", min_similarity=0.0),
    )


def test_each_rows_distance_is_computed_once_behind_a_fence() -> None:
    sql, params = recall_sql(request(), keyword=True, vector=True)
    assert sql.count("<=>") == 1
    # a derived table the planner may not flatten back into three copies of the distance
    assert "OFFSET 0) x WHERE d <= %(maxdist)s" in sql
    assert params["maxdist"] == 1.0


def test_only_the_fused_top_rows_are_read_back() -> None:
    sql, _ = recall_sql(request(), keyword=True, vector=True)
    fused = sql[sql.index("fused AS") : sql.index(" SELECT m.id, m.team_id")]
    assert fused.rstrip().endswith("LIMIT %(limit)s)")


def test_the_index_of_a_users_vectors_is_named_only_when_it_holds_them() -> None:
    small, _ = recall_sql(request(INDEXED_VECTOR_DIMS), keyword=True, vector=True)
    large, _ = recall_sql(request(INDEXED_VECTOR_DIMS + 1), keyword=True, vector=True)
    assert f"m.embedding_dims <= {INDEXED_VECTOR_DIMS}" in small
    assert "embedding_dims" not in large


def test_shadowed_keys_are_read_once_not_probed_per_row() -> None:
    sql, _ = recall_sql(request(persona="p1"), keyword=True, vector=True)
    assert "EXISTS" not in sql
    held = "COALESCE(m.key_canonical, m.key) NOT IN (SELECT COALESCE(h.key_canonical, h.key)"
    assert sql.count(held) == 4  # 2 lists x 2 scopes
