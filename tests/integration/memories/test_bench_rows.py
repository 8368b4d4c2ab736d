"""The recall benchmark's rows (``bench/recall_data.py``): one binary COPY of rows with the local
embedder's vectors, the service's indexes rebuilt, and a kept database reused by recipe.

Also, on those rows: hybrid recall's vector list is exact within the user's scope and never
short (the same nearest rows, in the same order, as a bare exact scan of the user's vectors).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from bench import recall_data
from bench.bench_recall import VECTOR_FLOOR_SQL, vocabulary
from tests.support import memory_rows
from tests.support.services import EmbeddedPostgres

from engram.adapters.local_embedder import WordLlamaEmbedder
from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.rows import vector_literal
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.memories.models import RecallRequest, RecallTuning
from engram.memories.ports import AccessContext, embedding_text

SIZE = 6_000  # three users of 2,000 rows


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture(scope="module")
def loaded(postgres: EmbeddedPostgres, embedder: WordLlamaEmbedder) -> str:
    url = postgres.create_database("bench_rows_test")
    apply_migrations(url, embedding_dimensions=embedder.dimensions)
    with psycopg.connect(url, autocommit=True) as conn:
        before = _indexes(conn)
        recall_data.load(conn, SIZE, vocabulary(), embedder)
        recall_data.record(conn, SIZE, embedder.model_id)
        assert _indexes(conn) == before  # the service's indexes, rebuilt as they were
    return url


def _indexes(conn: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
    ).fetchall()
    return {(name, definition) for name, definition in rows}


def test_every_row_is_loaded_with_its_own_texts_vector(
    loaded: str, embedder: WordLlamaEmbedder
) -> None:
    with psycopg.connect(loaded) as conn:
        counts = conn.execute(
            "SELECT count(*), count(DISTINCT owner_id),"
            " count(*) FILTER (WHERE status = 'archived'), count(DISTINCT embedding::text),"
            " min(embedding_dims), max(embedding_dims)"
            " FROM memories"
        ).fetchone()
        assert counts == (SIZE, 3, SIZE // 50, SIZE, 256, 256)
        sample = conn.execute(
            "SELECT key, value, embedding::text, embedding_model FROM memories ORDER BY key LIMIT 5"
        ).fetchall()
    for key, value, stored, model in sample:
        assert model == embedder.model_id
        expected = embedder.embed([embedding_text(key, value)])[0]
        got = [float(x) for x in stored.strip("[]").split(",")]
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-6


def test_a_kept_database_is_known_by_its_recipe_and_forgets_a_runs_saves(
    loaded: str, embedder: WordLlamaEmbedder
) -> None:
    with psycopg.connect(loaded, autocommit=True) as conn:
        assert recall_data.kept(conn, SIZE, embedder.model_id)
        assert not recall_data.kept(conn, SIZE + 1, embedder.model_id)
        assert not recall_data.kept(conn, SIZE, "another-model")
        conn.execute(
            "INSERT INTO memories (id, team_id, scope, owner_id, key, value, confidence, status,"
            " created_at, updated_at) VALUES (gen_random_uuid(), 't1', 'user', 'u1',"
            " 'bench 1 x', 'saved by a run', 1, 'active', now(), now())"
        )
        recall_data.forget_saves(conn)
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (SIZE,)


def test_the_vector_list_is_exact_within_the_user_and_never_short(
    loaded: str, embedder: WordLlamaEmbedder
) -> None:
    db = Database(loaded, max_size=1, statement_timeout_ms=10_000)
    try:
        _exact_and_never_short(PostgresMemoryStore(db), loaded, embedder)
    finally:
        db.close()


def _exact_and_never_short(
    store: PostgresMemoryStore, loaded: str, embedder: WordLlamaEmbedder
) -> None:
    words = vocabulary()
    # cosine alone decides the order: the recall's vector list as it is
    cosine_only = RecallTuning(
        fusion="score", min_similarity=-1.0, keyword_weight=0.0, vector_weight=1.0
    )
    for user, query in (("u1", f"{words[3]} {words[40]}"), ("u2", "zzzz qqqq")):
        team = f"t{int(user[1:]) % recall_data.TEAMS}"
        vector = embedder.embed([query])[0]
        found = memory_rows.recall(
            store,
            AccessContext(team, user),
            RecallRequest(
                team_id=team,
                user_id=user,
                query=query,
                limit=50,
                embedding=vector,
                embedding_model=embedder.model_id,
                tuning=cosine_only,
            ),
        )
        with psycopg.connect(loaded) as conn:
            nearest = [
                str(r[0])
                for r in conn.execute(
                    VECTOR_FLOOR_SQL,
                    {
                        "team": team,
                        "user": user,
                        "model": embedder.model_id,
                        "emb": vector_literal(vector),
                    },
                ).fetchall()
            ]
        assert len(found) == 50  # never short, keyword match or not
        assert {m.owner_id for m in found} == {user}
        assert [m.id for m in found] == nearest[:50]
