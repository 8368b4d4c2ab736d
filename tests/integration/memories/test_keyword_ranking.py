"""Keyword ranking properties (BM25 x coverage, ties by confidence then key) on a small
corpus, on both adapters; and, PostgreSQL only, that the ranking's definer helpers keep the
tenant of the transaction settings."""

from __future__ import annotations

import psycopg
import pytest
from tests.integration.memories.conftest import Backend
from tests.support import memory_rows

from engram.memories.models import NewMemory, RecallRequest, Scope
from engram.memories.ports import AccessContext

pytestmark = pytest.mark.integration

T = "team-r"
ALICE = AccessContext(T, "alice")
BOB = AccessContext(T, "bob")


def save(b: Backend, ctx: AccessContext, key: str, value: str, confidence: float = 1.0) -> None:
    memory_rows.upsert(
        b.store,
        ctx,
        NewMemory(
            scope=Scope.USER,
            owner_id=ctx.user_id,
            team_id=ctx.team_id,
            key=key,
            value=value,
            confidence=confidence,
        ),
    )
    b.clock.advance(seconds=1)


def keys(b: Backend, ctx: AccessContext, query: str, persona: str | None = None) -> list[str]:
    found = memory_rows.recall(
        b.store,
        ctx,
        RecallRequest(
            team_id=ctx.team_id, user_id=ctx.user_id, persona_id=persona, query=query, limit=20
        ),
    )
    return [m.key for m in found]


def common_background(b: Backend, ctx: AccessContext, n: int = 6) -> None:
    """Memories that all mention "garden" (a common word of this owner) and nothing else
    the tests ask for."""
    for i in range(n):
        save(b, ctx, f"bg{i}", f"garden note number {i}")


def test_a_rare_word_outranks_a_common_one(backend: Backend) -> None:
    common_background(backend, ALICE)
    save(backend, ALICE, "common", "watered the garden on sunday")
    save(backend, ALICE, "rare", "bought a telescope on sunday")
    # both match one query word; "telescope" is in one memory of alice's, "garden" in seven
    assert keys(backend, ALICE, "garden telescope")[0] == "rare"
    # written in the other order, the same answer
    other = AccessContext(T, "carol")
    save(backend, other, "rare", "bought a telescope on sunday")
    common_background(backend, other)
    save(backend, other, "common", "watered the garden on sunday")
    assert keys(backend, other, "garden telescope")[0] == "rare"


def test_covering_two_query_words_outranks_repeating_one(backend: Backend) -> None:
    common_background(backend, ALICE)
    # "telescope" is rare, "garden" common: repeating the rare word still loses to having
    # both words, however little the common one weighs
    save(backend, ALICE, "repeats", "telescope telescope telescope telescope telescope")
    save(backend, ALICE, "covers", "a telescope in the garden")
    assert keys(backend, ALICE, "telescope garden")[:2] == ["covers", "repeats"]


def test_document_frequencies_are_the_callers_own(backend: Backend) -> None:
    save(backend, ALICE, "a-rare", "kayak trip in june")
    save(backend, ALICE, "b-common", "lasagna for dinner")
    save(backend, ALICE, "c-common", "lasagna again")
    save(backend, ALICE, "d-common", "lasagna recipe from grandma")
    before = keys(backend, ALICE, "kayak lasagna")
    assert before[0] == "a-rare"
    # bob's memories, full of alice's rare word, change nothing of alice's ranking
    for i in range(20):
        save(backend, BOB, f"k{i}", f"kayak {i}")
    assert keys(backend, ALICE, "kayak lasagna") == before


def test_ties_go_to_confidence_then_key_never_to_write_order(backend: Backend) -> None:
    # identical matches: the same query word once, in memories of the same words
    save(backend, ALICE, "m-beta", "sailing lessons", confidence=0.8)
    save(backend, ALICE, "m-gamma", "sailing lessons", confidence=0.8)
    save(backend, ALICE, "m-alpha", "sailing lessons", confidence=0.8)
    save(backend, ALICE, "z-sure", "sailing lessons", confidence=0.95)
    assert keys(backend, ALICE, "sailing") == ["z-sure", "m-alpha", "m-beta", "m-gamma"]
    # rewriting one (newer updatedAt) moves nothing
    save(backend, ALICE, "m-gamma", "sailing lessons", confidence=0.8)
    save(backend, ALICE, "m-alpha", "sailing lessons", confidence=0.8)
    assert keys(backend, ALICE, "sailing") == ["z-sure", "m-alpha", "m-beta", "m-gamma"]


def test_the_ranking_helpers_keep_the_tenant_of_the_settings(pg_backend: Backend) -> None:
    """The definer helpers behind the keyword ranking take the tenant from the same settings
    as RLS: without them, or with another tenant's, they see nothing of alice's."""
    save(pg_backend, ALICE, "secret", "alice private note")
    save(pg_backend, BOB, "other", "bob private note")
    assert pg_backend.url is not None
    hits = "SELECT count(*) FROM engram_fts_hits(to_tsquery('english', 'note'), %s)"
    count = "SELECT engram_visible_count(%s)"
    rank = "SELECT count(*) FROM engram_fts_rank('note', 'english', %s, 1.2)"
    with psycopg.connect(pg_backend.url) as conn:
        conn.execute("SET ROLE engram_app")
        for sql in (hits, count, rank):
            assert conn.execute(sql, (None,)).fetchone() == (0,)
        conn.execute("SELECT set_config('engram.team_id', 'elsewhere', false)")
        conn.execute("SELECT set_config('engram.user_id', 'alice', false)")
        for sql in (hits, count, rank):
            assert conn.execute(sql, ("chef",)).fetchone() == (0,)
        conn.execute("SELECT set_config('engram.team_id', %s, false)", (T,))
        for sql in (hits, count, rank):
            assert conn.execute(sql, (None,)).fetchone() == (1,)
        conn.rollback()
