"""The byte codecs of the Redis behaviour store, without a server: stored facts (head/tail
layout, head-only re-encoding), log members and the pending aggregate."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.observations import MakeObs

from engram.adapters.redis_behaviour.codec import (
    HeadEncoder,
    _fact_head,
    encode_fact,
    encode_upserts,
    new_fact_set,
    parse_facts,
    stored_tail,
)
from engram.adapters.redis_behaviour.log_codec import decode_member, decode_pending, encode_member
from engram.behaviour.models import Fact, FactCategory, Observation
from engram.behaviour.ports import KeyGroup


def fact(subject: str = "tool_affinity:A", **over: object) -> Fact:
    values: dict[str, object] = {
        "id": f"id-{subject}",
        "identity_id": "team-a:user-1",
        "category": FactCategory.TOOL_AFFINITY,
        "subject": subject,
        "content": 'Tool "A" works well for this user',
        "confidence": 0.5,
        "reinforcement_count": 1,
        "last_reinforced_at": 1_000,
        "created_at": 1_000,
        "updated_at": 1_000,
    }
    values.update(over)
    return Fact.model_validate(values)


def reinforced(f: Fact, now: int, cursor: int) -> Fact:
    return f.evolve(
        confidence=min(1.0, f.confidence + 0.1),
        reinforcement_count=f.reinforcement_count + 1,
        last_reinforced_at=now,
        updated_at=now,
        round_cursor=cursor,
    )


# --- stored facts ------------------------------------------------------------------------
texts = st.text(min_size=1, max_size=40)


@given(
    content=texts,
    subject=texts,
    confidence=st.floats(0.0, 1.0),
    ease=st.none() | st.floats(1.3, 3.0),
    cursor=st.none() | st.integers(0, 2**40),
)
def test_an_encoded_fact_reads_back_as_the_same_fact(
    content: str, subject: str, confidence: float, ease: float | None, cursor: int | None
) -> None:
    f = fact(subject, content=content, confidence=confidence, ease_factor=ease, round_cursor=cursor)
    raw = encode_fact(f)
    assert Fact.model_validate_json(raw) == f
    assert parse_facts([raw]) == [f]
    # the same camelCase object as the model writes (plus the explicit nulls)
    assert {k: v for k, v in json.loads(raw).items() if v is not None} == json.loads(
        f.to_storage_json()
    )


def test_the_head_holds_the_six_mutable_fields_first_and_the_tail_the_rest() -> None:
    raw = encode_fact(fact())
    keys = list(json.loads(raw))
    assert keys[:6] == [
        "confidence",
        "reinforcementCount",
        "easeFactor",
        "lastReinforcedAt",
        "updatedAt",
        "roundCursor",
    ]
    tail = stored_tail(raw)
    assert tail is not None
    assert tail.startswith(b'"createdAt":')
    assert raw == _fact_head(fact().__dict__).encode() + b"," + tail


def test_a_fact_in_another_layout_has_no_reusable_tail() -> None:
    assert stored_tail(fact().to_storage_json().encode()) is None
    assert stored_tail(b"not json") is None


def test_parse_facts_takes_bytes_or_str_rows_and_nothing() -> None:
    a, b = fact("tool_affinity:A"), fact("tool_affinity:B")
    assert parse_facts([encode_fact(a), encode_fact(b).decode()]) == [a, b]
    assert parse_facts([]) == []


@given(
    confidence=st.floats(0.0, 1.0),
    count=st.integers(0, 10_000),
    ease=st.none() | st.floats(1.3, 3.0),
    cursor=st.none() | st.integers(0, 2**40),
)
def test_the_round_head_encoder_writes_what_the_head_does(
    confidence: float, count: int, ease: float | None, cursor: int | None
) -> None:
    encode = HeadEncoder()
    for _ in range(2):  # the second call is served from its per-round caches
        f = fact(
            confidence=confidence, reinforcement_count=count, ease_factor=ease, round_cursor=cursor
        )
        assert encode(f.__dict__) == _fact_head(f.__dict__).encode()


def test_the_new_fact_set_reuses_stored_bytes_and_applies_the_round() -> None:
    kept, grown, gone = fact("tool_affinity:K"), fact("tool_affinity:G"), fact("tool_affinity:X")
    legacy = fact("tool_affinity:L")
    read = [kept, grown, gone, legacy]
    rows = [encode_fact(kept), encode_fact(grown), encode_fact(gone)]
    rows.append(legacy.to_storage_json().encode())  # written before the head/tail layout
    new = fact("tool_affinity:N")
    upserts = [reinforced(grown, 2_000, 7), reinforced(legacy, 2_000, 7), new]
    pairs = new_fact_set(read, rows, upserts, [gone.id])
    out = dict(zip(pairs[::2], pairs[1::2], strict=True))
    assert list(out) == [kept.id, grown.id, legacy.id, new.id]
    assert out[kept.id] is rows[0]  # untouched: the stored bytes themselves
    for f in upserts:
        assert out[f.id] == encode_fact(f)
        assert Fact.model_validate_json(out[f.id]) == f


def test_a_changed_tail_is_encoded_in_full() -> None:
    old = fact()
    renamed = old.evolve(content="Tool 'A2' works well", updated_at=5_000)
    pairs = new_fact_set([old], [encode_fact(old)], [renamed], [])
    assert pairs == [old.id, encode_fact(renamed)]
    assert encode_upserts([renamed], [old], [encode_fact(old)]) == [old.id, encode_fact(renamed)]


def test_encode_upserts_reencodes_only_heads_of_facts_it_read() -> None:
    a, b = fact("tool_affinity:A"), fact("tool_affinity:B")
    upserts = [reinforced(a, 3_000, 9), fact("tool_affinity:C")]
    pairs = encode_upserts(upserts, [a, b], [encode_fact(a), encode_fact(b)])
    assert pairs == [f for u in upserts for f in (u.id, encode_fact(u))]
    assert encode_upserts([], [a], [encode_fact(a)]) == []
    # rows that do not line up with the read facts: every upsert encoded in full
    assert encode_upserts(upserts, [a, b], []) == pairs


# --- log members and the pending aggregate -------------------------------------------------
def test_a_member_carries_a_groupable_header_and_the_observation_json(make_obs: MakeObs) -> None:
    obs = make_obs("entity_access", ("account", "42", "Acme Corp"))
    member = encode_member(obs)
    header, body = member.split("\n", 1)
    kind, key, label, created = header.split("\x1f")
    assert (kind, key, created) == ("e", "entity_frequency:account:42", str(obs.created_at))
    assert label == "Acme Corp"
    assert decode_member(member) == body == decode_member(member.encode())
    assert Observation.model_validate_json(body) == obs


@pytest.mark.parametrize(
    ("kind", "what", "header"),
    [
        ("tool_success", "search", "s\x1fsearch\x1fsearch"),
        ("tool_failure", "search", "f\x1fsearch\x1fsearch"),
        ("entity_access", ("account", "42"), "e\x1fentity_frequency:account:42\x1f42"),
        ("query_pattern", "billing", "d\x1fdomain_preference:billing\x1fbilling"),
    ],
)
def test_member_headers_per_type(make_obs: MakeObs, kind: str, what: object, header: str) -> None:
    assert encode_member(make_obs(kind, what)).startswith(header + "\x1f")


def test_the_pending_aggregate_decodes_to_the_groups_of_a_round() -> None:
    pairs = {
        b"s\x1fsearch": b"3",
        b"f\x1fsearch": b"1",
        b"f\x1fbroken": b"2",
        b"e\x1fentity_frequency:account:42": b"4",
        b"l\x1fentity_frequency:account:42": b"Acme",
        b"e\x1fentity_frequency:user:7": b"1",
        b"d\x1fdomain_preference:billing": b"2",
        b"s\x1fdrained": b"0",  # drained to zero: no group
    }
    groups, total, echo = decode_pending(pairs, 99)
    tool, ent, dom = FactCategory.TOOL_AFFINITY, FactCategory.ENTITY_FREQUENCY, FactCategory
    assert sorted(groups) == sorted(
        [
            KeyGroup(dom.DOMAIN_PREFERENCE, "domain_preference:billing", "billing", 2, 0, 0, 99),
            KeyGroup(ent, "entity_frequency:account:42", "Acme", 4, 0, 0, 99),
            KeyGroup(ent, "entity_frequency:user:7", "7", 1, 0, 0, 99),
            KeyGroup(tool, "tool_affinity:search", "search", 3, 3, 1, 99),
            KeyGroup(dom.TOOL_AVOIDANCE, "tool_avoidance:search", "search", 1, 3, 1, 99),
            KeyGroup(dom.TOOL_AVOIDANCE, "tool_avoidance:broken", "broken", 2, 0, 2, 99),
        ]
    )
    assert total == 13
    # the aggregate as the commit script reads it back: field␞value␞ repeated
    parts = echo.split(b"\x1e")
    assert parts[-1] == b""
    assert dict(zip(parts[:-1:2], parts[1::2], strict=True)) == pairs
    assert decode_pending({}, 0) == ([], 0, b"")
    # a client decoding responses gives str: the same groups
    decoded = {k.decode(): v.decode() for k, v in pairs.items()}
    assert decode_pending(decoded, 99)[:2] == (groups, total)  # type: ignore[arg-type]
