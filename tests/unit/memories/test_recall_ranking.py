from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram.memories.models import Memory, Scope
from engram.memories.recall import (
    HashingEmbedder,
    cosine,
    rank_in_memory,
    rrf_fuse,
    shadow,
    terms,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def mem(
    mid: str, key: str, value: str, *, scope: Scope = Scope.USER, conf: float = 1.0, age_s: int = 0
) -> Memory:
    return Memory(
        id=mid,
        scope=scope,
        owner_id="p" if scope is not Scope.USER else "u",
        user_id="u" if scope is Scope.PERSONA_USER else None,
        team_id="t",
        key=key,
        value=value,
        confidence=conf,
        created_at=T0,
        updated_at=T0 - timedelta(seconds=age_s),
    )


def test_terms_drop_stop_words_and_punctuation() -> None:
    assert terms("The user's favourite Editor, is: VIM!") == ["user", "favourite", "editor", "vim"]
    assert terms("Europe/Berlin ops@example.com snake_case") == [
        "europe",
        "berlin",
        "ops",
        "example",
        "com",
        "snake",
        "case",
    ]
    assert terms("the and of") == []


def test_rrf_sums_reciprocal_ranks_and_breaks_ties_by_confidence_then_key() -> None:
    a, b, c = mem("a", "a", "a"), mem("b", "b", "b"), mem("c", "c", "c")
    # b: 1/62 + 1/61 beats a: 1/61 beats c: 1/62
    assert [m.id for m in rrf_fuse([[a, b], [b, c]], 10)] == ["b", "a", "c"]
    x = mem("x", "x", "x", conf=0.5)
    y = mem("y", "y", "y", conf=0.9)
    assert [m.id for m in rrf_fuse([[x], [y]], 10)] == ["y", "x"]  # equal scores: confidence
    # then the key, whichever was written last
    older_b = mem("1", "b key", "b", conf=0.9, age_s=10)
    newer_a = mem("2", "a key", "a", conf=0.9, age_s=0)
    assert [m.id for m in rrf_fuse([[older_b], [newer_a]], 10)] == ["2", "1"]
    newer_b = mem("1", "b key", "b", conf=0.9, age_s=0)
    older_a = mem("2", "a key", "a", conf=0.9, age_s=10)
    assert [m.id for m in rrf_fuse([[newer_b], [older_a]], 10)] == ["2", "1"]
    assert len(rrf_fuse([[a, b, c]], 2)) == 2


def test_shadow_keeps_the_highest_priority_scope_per_key() -> None:
    rows = [
        mem("1", "diet", "user", scope=Scope.USER),
        mem("2", "diet", "persona", scope=Scope.PERSONA),
        mem("3", "diet", "pu", scope=Scope.PERSONA_USER),
        mem("4", "city", "user city", scope=Scope.USER),
        mem("5", "city", "persona city", scope=Scope.PERSONA),
    ]
    assert sorted(m.id for m in shadow(rows)) == ["3", "5"]
    assert sorted(m.id for m in shadow(reversed(rows))) == ["3", "5"]


def test_shadowed_rows_never_surface_even_when_only_they_match() -> None:
    rows = [mem("1", "diet", "omnivore"), mem("2", "diet", "vegan", scope=Scope.PERSONA_USER)]
    assert rank_in_memory(rows, "omnivore", 10) == []
    assert [m.id for m in rank_in_memory(rows, "", 10)] == ["2"]


def test_hashing_embedder_is_deterministic_and_word_sensitive() -> None:
    e = HashingEmbedder(64)
    v1, v2, v3, v4 = e.embed(["flies to Tokyo", "Tokyo flights", "loves ramen", ""])
    assert e.embed(["flies to Tokyo"])[0] == v1
    assert len(v1) == 64
    assert cosine(v1, v2) > cosine(v1, v3)
    assert not any(v4)
