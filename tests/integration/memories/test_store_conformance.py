"""MemoryStore conformance: the same tests on the in-memory and the PostgreSQL adapter, the
latter on PostgreSQL 18 and on 16 (the major version Aurora runs, with an older pgvector)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from tests.integration.memories.conftest import DIMS, EVERY_VERSION, Backend
from tests.support import memory_rows

from engram.memories.models import (
    MemoryFilter,
    NewMemory,
    Persona,
    RecallRequest,
    RecallTuning,
    Scope,
    Status,
    TeamSettings,
)
from engram.memories.ports import AccessContext, MemoryChange

pytestmark = [pytest.mark.integration, EVERY_VERSION]


T = "team-1"
ALICE = AccessContext(T, "alice")
BOB = AccessContext(T, "bob")
ADMIN = AccessContext(T, "admin", elevated=True)
OTHER_TEAM_ALICE = AccessContext("team-2", "alice")


def new(
    key: str,
    value: str,
    *,
    scope: Scope = Scope.USER,
    owner: str = "alice",
    user: str | None = None,
    team: str = T,
    confidence: float = 1.0,
    status: Status = Status.ACTIVE,
    embedding: list[float] | None = None,
    channel: str | None = None,
) -> NewMemory:
    return NewMemory(
        scope=scope,
        owner_id=owner,
        user_id=user,
        team_id=team,
        key=key,
        value=value,
        confidence=confidence,
        status=status,
        embedding=embedding,
        embedding_model=None if embedding is None else AXES,
        source_channel_id=channel,
    )


AXES = "test-axes"
"""The model id of the unit vectors these tests embed with."""


def axis(i: int) -> list[float]:
    v = [0.0] * DIMS
    v[i] = 1.0
    return v


def recall(
    b: Backend,
    ctx: AccessContext,
    query: str = "",
    *,
    persona: str | None = None,
    limit: int = 20,
    embedding: list[float] | None = None,
) -> list[str]:
    found = memory_rows.recall(
        b.store,
        ctx,
        RecallRequest(
            team_id=ctx.team_id,
            user_id=ctx.user_id,
            persona_id=persona,
            query=query,
            limit=limit,
            embedding=embedding,
            embedding_model=None if embedding is None else AXES,
        ),
    )
    return [m.value for m in found]


# --- upsert / dedup ---------------------------------------------------------------------------
def test_upsert_same_key_updates_value_and_keeps_identity(backend: Backend) -> None:
    first, created = memory_rows.upsert(backend.store, ALICE, new("editor", "vim", confidence=0.5))
    assert created
    backend.clock.advance(seconds=5)
    second, created_again = memory_rows.upsert(
        backend.store, ALICE, new("editor", "emacs", confidence=0.9)
    )
    assert not created_again
    assert second.id == first.id
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert (second.value, second.confidence) == ("emacs", 0.9)
    assert memory_rows.count_by_owner(backend.store, ALICE, Scope.USER, "alice") == 1
    got = memory_rows.get(backend.store, ALICE, first.id)
    assert got is not None
    assert got.value == "emacs"


def test_dedup_is_per_scope_owner_and_user(backend: Backend) -> None:
    a, _ = memory_rows.upsert(backend.store, ALICE, new("diet", "vegan"))
    b, _ = memory_rows.upsert(
        backend.store,
        ALICE,
        new("diet", "vegetarian", scope=Scope.PERSONA_USER, owner="chef", user="alice"),
    )
    c, _ = memory_rows.upsert(backend.store, BOB, new("diet", "omnivore", owner="bob"))
    d, _ = memory_rows.upsert(
        backend.store,
        BOB,
        new("diet", "pescatarian", scope=Scope.PERSONA_USER, owner="chef", user="bob"),
    )
    e, _ = memory_rows.upsert(
        backend.store, ADMIN, new("diet", "menu policy", scope=Scope.PERSONA, owner="chef")
    )
    assert len({a.id, b.id, c.id, d.id, e.id}) == 5


def test_get_unknown_and_malformed_ids_are_none(backend: Backend) -> None:
    assert memory_rows.get(backend.store, ALICE, "00000000-0000-0000-0000-000000000000") is None
    assert memory_rows.get(backend.store, ALICE, "not-a-uuid' OR 1=1 --") is None
    assert not memory_rows.delete(backend.store, ALICE, "not-a-uuid")


# --- list ---------------------------------------------------------------------------------------
def test_list_filters_and_cursor_pagination(backend: Backend) -> None:
    ids = []
    for i in range(7):
        m, _ = memory_rows.upsert(
            backend.store, ALICE, new(f"k{i}", f"v{i}", channel="c1" if i % 2 else None)
        )
        ids.append(m.id)
        backend.clock.advance(seconds=1)
    memory_rows.upsert(
        backend.store, ALICE, new("p", "pv", scope=Scope.PERSONA_USER, owner="chef", user="alice")
    )
    memory_rows.upsert(
        backend.store, ADMIN, new("q", "pending", status=Status.PENDING_REVIEW, owner="alice")
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = memory_rows.list_memories(
            backend.store,
            ALICE,
            MemoryFilter(team_id=T, scope=Scope.USER, status=Status.ACTIVE, limit=3, cursor=cursor),
        )
        seen += [m.id for m in page.memories]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(reversed(ids))  # newest first, each exactly once
    persona_rows = memory_rows.list_memories(
        backend.store, ALICE, MemoryFilter(team_id=T, persona_id="chef")
    )
    assert [m.key for m in persona_rows.memories] == ["p"]
    pending = memory_rows.list_memories(
        backend.store, ALICE, MemoryFilter(team_id=T, status=Status.PENDING_REVIEW)
    )
    assert [m.key for m in pending.memories] == ["q"]
    third = memory_rows.get(backend.store, ALICE, ids[3])
    assert third is not None
    newer = memory_rows.list_memories(
        backend.store,
        ALICE,
        MemoryFilter(
            team_id=T, scope=Scope.USER, updated_after=third.updated_at, status=Status.ACTIVE
        ),
    )
    assert {m.key for m in newer.memories} == {"k4", "k5", "k6"}
    older = memory_rows.list_memories(
        backend.store,
        ALICE,
        MemoryFilter(team_id=T, owner_id="alice", updated_before=third.updated_at),
    )
    assert {m.key for m in older.memories} == {"k0", "k1", "k2"}
    by_user = memory_rows.list_memories(
        backend.store, ALICE, MemoryFilter(team_id=T, user_id="alice")
    )
    assert [m.key for m in by_user.memories] == ["p"]


# --- delete / archive / status ------------------------------------------------------------------
def test_hard_delete_removes_the_row(backend: Backend) -> None:
    m, _ = memory_rows.upsert(backend.store, ALICE, new("tmp", "gone soon"))
    assert memory_rows.delete(backend.store, ALICE, m.id)
    assert memory_rows.get(backend.store, ALICE, m.id) is None
    assert not memory_rows.delete(backend.store, ALICE, m.id)
    assert recall(backend, ALICE, "gone") == []
    again, created = memory_rows.upsert(backend.store, ALICE, new("tmp", "back"))
    assert created
    assert again.id != m.id


def test_archive_hides_from_recall_but_keeps_the_row(backend: Backend) -> None:
    m, _ = memory_rows.upsert(backend.store, ALICE, new("old job", "worked at Initech"))
    archived = memory_rows.archive(backend.store, ALICE, m.id)
    assert archived is not None
    assert archived.status is Status.ARCHIVED
    assert recall(backend, ALICE, "Initech") == []
    assert recall(backend, ALICE) == []
    listed = memory_rows.list_memories(
        backend.store, ALICE, MemoryFilter(team_id=T, status=Status.ARCHIVED)
    )
    assert [x.id for x in listed.memories] == [m.id]


def test_only_active_rows_are_recalled(backend: Backend) -> None:
    memory_rows.upsert(backend.store, ALICE, new("a", "tea active"))
    memory_rows.upsert(backend.store, ADMIN, new("b", "tea pending", status=Status.PENDING_REVIEW))
    memory_rows.upsert(backend.store, ALICE, new("c", "tea archived", status=Status.ARCHIVED))
    assert recall(backend, ALICE, "tea") == ["tea active"]
    assert recall(backend, ALICE) == ["tea active"]


# --- scopes ---------------------------------------------------------------------------------------
def seed_three_scopes(b: Backend) -> None:
    memory_rows.upsert(b.store, ALICE, new("diet", "omnivore user", confidence=1.0))
    memory_rows.upsert(
        b.store, ADMIN, new("diet", "persona kitchen policy", scope=Scope.PERSONA, owner="chef")
    )
    memory_rows.upsert(
        b.store,
        ALICE,
        new(
            "diet",
            "vegan persona_user",
            scope=Scope.PERSONA_USER,
            owner="chef",
            user="alice",
            confidence=0.2,
        ),
    )
    memory_rows.upsert(b.store, ALICE, new("city", "lives in Lyon"))
    memory_rows.upsert(
        b.store, ADMIN, new("hours", "kitchen open 9-5", scope=Scope.PERSONA, owner="chef")
    )
    memory_rows.upsert(
        b.store, ADMIN, new("city", "persona city Paris", scope=Scope.PERSONA, owner="chef")
    )


def test_scope_priority_and_shadowing(backend: Backend) -> None:
    seed_three_scopes(backend)
    with_persona = recall(backend, ALICE, persona="chef", limit=50)
    assert "vegan persona_user" in with_persona
    assert "omnivore user" not in with_persona
    assert "persona kitchen policy" not in with_persona
    assert "persona city Paris" in with_persona
    assert "lives in Lyon" not in with_persona
    assert "kitchen open 9-5" in with_persona
    # shadowed rows stay hidden even when only they match the query
    assert recall(backend, ALICE, "omnivore", persona="chef") == []
    assert recall(backend, ALICE, "Lyon", persona="chef") == []
    # no persona: user scope only
    assert sorted(recall(backend, ALICE)) == ["lives in Lyon", "omnivore user"]
    assert recall(backend, ALICE, "kitchen") == []


def test_persona_user_rows_of_another_persona_or_user_are_not_recalled(backend: Backend) -> None:
    seed_three_scopes(backend)
    memory_rows.upsert(
        backend.store,
        BOB,
        new("diet", "bob keto", scope=Scope.PERSONA_USER, owner="chef", user="bob"),
    )
    memory_rows.upsert(
        backend.store,
        ALICE,
        new("tutor", "alice tutor note", scope=Scope.PERSONA_USER, owner="tutor", user="alice"),
    )
    assert "bob keto" not in recall(backend, ALICE, persona="chef", limit=50)
    assert "alice tutor note" not in recall(backend, ALICE, persona="chef", limit=50)
    assert recall(backend, BOB, "vegan keto", persona="chef") == ["bob keto"]


# --- recall ranking ---------------------------------------------------------------------------
def test_recall_matches_any_one_of_several_terms(backend: Backend) -> None:
    memory_rows.upsert(backend.store, ALICE, new("language", "prefers Go over Python"))
    memory_rows.upsert(backend.store, ALICE, new("infra", "deploys with Kubernetes and Traefik"))
    memory_rows.upsert(backend.store, ALICE, new("pet", "has a cat named Miso"))
    assert recall(backend, ALICE, "kubernetes zebra unicorn") == [
        "deploys with Kubernetes and Traefik"
    ]
    both = recall(backend, ALICE, "python traefik spaceship")
    assert sorted(both) == ["deploys with Kubernetes and Traefik", "prefers Go over Python"]
    assert recall(backend, ALICE, "zebra unicorn") == []


def test_more_matching_terms_rank_first(backend: Backend) -> None:
    memory_rows.upsert(backend.store, ALICE, new("one", "coffee in the morning"))
    backend.clock.advance(seconds=1)
    memory_rows.upsert(backend.store, ALICE, new("two", "coffee and croissant for breakfast"))
    assert recall(backend, ALICE, "coffee croissant") == [
        "coffee and croissant for breakfast",
        "coffee in the morning",
    ]


def test_empty_query_orders_by_confidence_then_recency(backend: Backend) -> None:
    memory_rows.upsert(backend.store, ALICE, new("a", "low", confidence=0.3))
    backend.clock.advance(seconds=1)
    memory_rows.upsert(backend.store, ALICE, new("b", "high old", confidence=0.9))
    backend.clock.advance(seconds=1)
    memory_rows.upsert(backend.store, ALICE, new("c", "high new", confidence=0.9))
    assert recall(backend, ALICE) == ["high new", "high old", "low"]
    assert recall(backend, ALICE, limit=2) == ["high new", "high old"]


def test_vector_path_finds_without_keyword_overlap(backend: Backend) -> None:
    memory_rows.upsert(backend.store, ALICE, new("near", "semantic neighbour", embedding=axis(0)))
    memory_rows.upsert(backend.store, ALICE, new("far", "unrelated thing", embedding=axis(1)))
    memory_rows.upsert(backend.store, ALICE, new("none", "no embedding at all"))
    assert recall(backend, ALICE, "qqq", embedding=axis(0)) == ["semantic neighbour"]


def save_fusion_rows(backend: Backend) -> None:
    """Rows a, b, c for "apple banana" at axis 0: a both words, no vector match; b one word,
    the vector; c no word, cosine 0.6."""
    memory_rows.upsert(backend.store, ALICE, new("a", "apple banana smoothie", embedding=axis(1)))
    memory_rows.upsert(backend.store, ALICE, new("b", "apple pie", embedding=axis(0)))
    c_vec = [0.0] * DIMS
    c_vec[0], c_vec[2] = 0.6, 0.8
    memory_rows.upsert(backend.store, ALICE, new("c", "orchard notes", embedding=c_vec))


def test_rrf_fusion_orders_as_documented(backend: Backend) -> None:
    # A: keyword rank 1 only -> 1/61. B: keyword rank 2 and vector rank 1 -> 1/62 + 1/61.
    # C: vector rank 2 only (cos 0.6) -> 1/62; ties with nothing, after A.
    save_fusion_rows(backend)
    assert recall(backend, ALICE, "apple banana", embedding=axis(0)) == [
        "apple pie",
        "apple banana smoothie",
        "orchard notes",
    ]
    # keyword-only (no embedding configured): plain text rank
    assert recall(backend, ALICE, "apple banana") == ["apple banana smoothie", "apple pie"]
    assert math.isclose(1 / 62 + 1 / 61, 0.0325, abs_tol=1e-3)


def test_weighted_rrf_and_score_fusion_order_as_documented(backend: Backend) -> None:
    # keyword: A has both words (best, 1.0 once divided by the best), B "apple" only
    # (BM25 of the commoner word x coverage 0.5: about 0.16 of A); cosine to axis 0: A 0,
    # B 1, C 0.6
    save_fusion_rows(backend)

    def fused(**tuning: object) -> list[str]:
        found = memory_rows.recall(
            backend.store,
            ALICE,
            RecallRequest(
                team_id=T,
                user_id="alice",
                query="apple banana",
                embedding=axis(0),
                embedding_model=AXES,
                tuning=RecallTuning.model_validate(tuning),
            ),
        )
        return [m.key for m in found]

    # score fusion, 3:1 keywords: A 0.75, B 0.75 x 0.16 + 0.25, C 0.25 x 0.6
    assert fused(fusion="score", min_similarity=0.0, keyword_weight=0.75, vector_weight=0.25) == [
        "a",
        "b",
        "c",
    ]
    # score fusion, vectors first: B 0.3 x 0.16 + 0.7, C 0.7 x 0.6, A 0.3
    assert fused(fusion="score", min_similarity=0.0, keyword_weight=0.3, vector_weight=0.7) == [
        "b",
        "c",
        "a",
    ]
    # weighted RRF (k 10): vectors weigh 3: B 1/12 + 3/11, C 3/12, A 1/11
    assert fused(rrf_k=10, keyword_weight=1.0, vector_weight=3.0) == ["b", "c", "a"]
    # the embedder's threshold drops C from the vector list
    assert fused(rrf_k=10, keyword_weight=1.0, vector_weight=3.0, min_similarity=0.7) == [
        "b",
        "a",
    ]


def test_injection_shaped_keys_and_queries_are_literal(backend: Backend) -> None:
    key = "'; DROP TABLE memories; --"
    value = "Robert'); DELETE FROM memories WHERE ('1'='1 %s %(x)s $1 \\x00ish"
    m, _ = memory_rows.upsert(backend.store, ALICE, new(key, value))
    got = memory_rows.get(backend.store, ALICE, m.id)
    assert got is not None
    assert (got.key, got.value) == (key, value)
    assert recall(backend, ALICE, "DROP TABLE") == [value]
    assert recall(backend, ALICE, "' OR '1'='1' --") == [value]
    assert recall(backend, ALICE, "!!! & | ( ) : * <-> \\") == []
    assert memory_rows.count_by_owner(backend.store, ALICE, Scope.USER, "alice") == 1


# --- isolation ------------------------------------------------------------------------------------
def test_isolation_between_users_and_teams(backend: Backend) -> None:
    mine, _ = memory_rows.upsert(backend.store, ALICE, new("secret", "alice secret"))
    pu, _ = memory_rows.upsert(
        backend.store,
        ALICE,
        new("pu", "alice persona note", scope=Scope.PERSONA_USER, owner="chef", user="alice"),
    )
    other_team, _ = memory_rows.upsert(
        backend.store, OTHER_TEAM_ALICE, new("secret", "alice team2 secret", team="team-2")
    )
    for ctx in (BOB, OTHER_TEAM_ALICE):
        assert memory_rows.get(backend.store, ctx, mine.id) is None
        assert memory_rows.get(backend.store, ctx, pu.id) is None
        assert not memory_rows.delete(backend.store, ctx, mine.id)
        assert memory_rows.archive(backend.store, ctx, mine.id) is None
        assert (
            memory_rows.update(backend.store, ctx, mine.id, MemoryChange(value="hijacked")) is None
        )
    assert recall(backend, BOB, "secret") == []
    assert memory_rows.list_memories(backend.store, BOB, MemoryFilter(team_id=T)).memories == []
    assert recall(backend, ALICE, "secret") == ["alice secret"]
    assert recall(backend, OTHER_TEAM_ALICE, "secret") == ["alice team2 secret"]
    assert memory_rows.get(backend.store, ALICE, other_team.id) is None
    # team admins see their team, never another
    assert memory_rows.get(backend.store, ADMIN, pu.id) is not None
    assert memory_rows.get(backend.store, ADMIN, other_team.id) is None
    assert memory_rows.get(backend.store, ALICE, mine.id) is not None


def test_writes_outside_the_callers_rows_are_refused(backend: Backend) -> None:
    with pytest.raises(Exception):  # noqa: B017,PT011 - each adapter's refusal
        memory_rows.upsert(backend.store, BOB, new("x", "bob writes alice", owner="alice"))
    with pytest.raises(Exception):  # noqa: B017,PT011
        memory_rows.upsert(
            backend.store, ALICE, new("x", "persona by user", scope=Scope.PERSONA, owner="chef")
        )
    assert memory_rows.count_by_owner(backend.store, ADMIN, Scope.USER, "alice") == 0
    assert memory_rows.count_by_owner(backend.store, ADMIN, Scope.PERSONA, "chef") == 0


# --- erase / retention / personas ------------------------------------------------------------
def test_erase_user_removes_user_and_persona_user_rows_only(backend: Backend) -> None:
    seed_three_scopes(backend)
    memory_rows.upsert(backend.store, BOB, new("b", "bob's", owner="bob"))
    counts = memory_rows.erase_user(backend.store, ALICE, "alice")
    assert counts == {
        "user": 2,
        "persona_user": 1,
        "persona": 0,
        "review_actions": 0,
        "suppressions": 0,
        "versions": 3,  # one each: the rows were created once
        "changes": 0,
    }
    assert sorted(recall(backend, ALICE, persona="chef", limit=50)) == [
        "kitchen open 9-5",
        "persona city Paris",
        "persona kitchen policy",
    ]
    assert recall(backend, BOB) == ["bob's"]


def test_retention_archives_then_deletes(backend: Backend) -> None:
    old, _ = memory_rows.upsert(backend.store, ALICE, new("old", "old fact"))
    gone, _ = memory_rows.upsert(
        backend.store, ALICE, new("gone", "archived long ago", status=Status.ARCHIVED)
    )
    backend.clock.advance(days=100)
    fresh, _ = memory_rows.upsert(backend.store, ALICE, new("fresh", "fresh fact"))
    now = fresh.updated_at
    result = memory_rows.apply_retention(
        backend.store,
        ADMIN,
        archive_before=now - timedelta(days=90),
        delete_archived_before=now - timedelta(days=30),
    )
    assert result == {"archived": 1, "deleted": 1}
    o = memory_rows.get(backend.store, ALICE, old.id)
    assert o is not None
    assert o.status is Status.ARCHIVED
    assert memory_rows.get(backend.store, ALICE, gone.id) is None
    f = memory_rows.get(backend.store, ALICE, fresh.id)
    assert f is not None
    assert f.status is Status.ACTIVE


def test_personas_and_team_settings_round_trip(backend: Backend) -> None:
    assert memory_rows.get_persona(backend.store, ALICE, "chef") is None
    memory_rows.put_persona(
        backend.store,
        ADMIN,
        Persona(persona_id="chef", team_id=T, allowed_groups=["cooks"], memory_enabled=False),
    )
    got = memory_rows.get_persona(backend.store, ALICE, "chef")
    assert got is not None
    assert got.allowed_groups == ["cooks"]
    assert not got.memory_enabled
    assert memory_rows.get_persona(backend.store, OTHER_TEAM_ALICE, "chef") is None
    assert memory_rows.get_team_settings(backend.store, ALICE) is None
    memory_rows.put_team_settings(
        backend.store, ADMIN, TeamSettings(team_id=T, memory_enabled=False)
    )
    ts = memory_rows.get_team_settings(backend.store, ALICE)
    assert ts is not None
    assert not ts.memory_enabled
    assert memory_rows.get_team_settings(backend.store, OTHER_TEAM_ALICE) is None
