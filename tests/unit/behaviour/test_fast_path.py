"""The consolidation hot path for the built-in decays (facts updated in place, decay factors
cached) gives exactly the numbers of the reference path that drives any ``DecayStrategy``
through its methods."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.facts import make_fact
from tests.support.rounds import one_round

from engram import AdaptiveDecay, ExponentialDecay, Fact, InMemoryBehaviourStore
from engram.behaviour.consolidation import with_current_confidence
from engram.behaviour.decay import numeric_decay
from engram.behaviour.models import FactCategory, Observation, trusted_fact
from engram.clock import MS_PER_DAY, FakeClock

ID = "t:u"
KINDS = [
    ("tool_success", {"toolName": "a", "durationMs": 1}),
    ("tool_failure", {"toolName": "a", "durationMs": 1, "error": "x"}),
    ("tool_success", {"toolName": "b", "durationMs": 1}),
    ("entity_access", {"entityType": "account", "entityId": "1", "entityName": "Acme"}),
    ("query_pattern", {"domain": "royalty", "query": "q"}),
]


class ViaMethods(ExponentialDecay):
    """Same numbers as ExponentialDecay, but not recognised as built-in: the reference path."""

    def apply(self, fact: Fact, now: int) -> float:
        return super().apply(fact, now)


class AdaptiveViaMethods(AdaptiveDecay):
    def reinforce(self, fact: Fact, quality: float = 1.0, *, now: int) -> Fact:
        return super().reinforce(fact, quality, now=now)


def test_numeric_decay_recognises_only_the_built_in_numbers() -> None:
    exp, ada = ExponentialDecay(), AdaptiveDecay()
    assert numeric_decay(exp) is exp
    assert numeric_decay(ada) is ada
    assert numeric_decay(ViaMethods()) is None
    assert numeric_decay(AdaptiveViaMethods()) is None
    assert numeric_decay(object()) is None

    class Renamed(AdaptiveDecay):  # overrides nothing: same numbers, fast path is fine
        pass

    renamed = Renamed()
    assert numeric_decay(renamed) is renamed


def _rounds(
    fast: Any, reference: Any, rounds: list[list[int]], gaps: list[int]
) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    out = []
    clocks = FakeClock(), FakeClock()
    stores = InMemoryBehaviourStore(), InMemoryBehaviourStore()
    for batch, gap in zip(rounds, gaps, strict=False):
        results = []
        for store, clock, decay in zip(stores, clocks, (fast, reference), strict=True):
            store.append(
                ID,
                [
                    Observation(
                        id=f"{clock.now_ms()}-{i}",
                        identity_id=ID,
                        type=KINDS[k][0],
                        metadata=KINDS[k][1],
                        created_at=clock.now_ms(),
                    )
                    for i, k in enumerate(batch)
                ],
            )
            facts = one_round(store, clock, decay, ID)
            results.append([f.model_dump() for f in facts])
            clock.advance(days=gap)
        out.append((results[0], results[1]))
    return out


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.lists(st.integers(0, len(KINDS) - 1), max_size=8), min_size=1, max_size=8),
    gaps=st.lists(st.integers(0, 40), min_size=8, max_size=8),
    adaptive=st.booleans(),
)
def test_fast_path_equals_the_reference_path(
    rounds: list[list[int]], gaps: list[int], adaptive: bool
) -> None:
    """Reinforcement, quality, ease, decay, expiry (gaps up to 40 idle days) and ranking."""
    fast, reference = (
        (AdaptiveDecay(), AdaptiveViaMethods()) if adaptive else (ExponentialDecay(), ViaMethods())
    )
    for got, expected in _rounds(fast, reference, rounds, gaps):
        assert got == expected


@pytest.mark.parametrize("decay", [ExponentialDecay(), AdaptiveDecay()], ids=["exp", "adaptive"])
def test_current_confidence_is_exactly_apply(decay: Any) -> None:
    now = 1_800_000_000_000
    facts = [
        trusted_fact(
            {
                "id": f"fact:domain_preference:{i}",
                "identity_id": ID,
                "category": FactCategory.DOMAIN_PREFERENCE,
                "subject": f"domain_preference:{i}",
                "content": "x",
                "confidence": 0.1 + (i % 9) / 10,
                "reinforcement_count": 1 + i % 4,
                "last_reinforced_at": now - (i % 5) * 7 * MS_PER_DAY // 3 + (i % 2),
                "created_at": now - 90 * MS_PER_DAY,
                "updated_at": now,
                "ease_factor": None if i % 3 == 0 else 1.3 + i % 4 / 2,
                "round_cursor": None,
            }
        )
        for i in range(60)
    ]
    expected = {f.subject: decay.apply(f, now) for f in facts}
    got = with_current_confidence(facts, decay, now)
    assert {f.subject: f.confidence for f in got} == {
        s: c for s, c in expected.items() if c >= decay.expiry_threshold
    }
    assert got == with_current_confidence(
        facts, ViaMethods() if decay.__class__ is ExponentialDecay else AdaptiveViaMethods(), now
    )


class AlwaysFenced(InMemoryBehaviourStore):
    """Every commit loses the race (a storm of concurrent rounds)."""

    def commit_round(self, identity_id: str, **kw: Any) -> bool:
        return False


@pytest.mark.parametrize("decay", [ExponentialDecay(), AdaptiveDecay()], ids=["exp", "adaptive"])
def test_a_round_fenced_out_every_time_answers_with_the_facts_as_read(decay: Any) -> None:
    clock = FakeClock()
    store = AlwaysFenced()
    store.upsert_batch(
        ID,
        [
            make_fact(
                "tool_affinity:a",
                identity=ID,
                confidence=0.6,
                count=2,
                at=clock.now_ms(),
                ease_factor=2.5,
                round_cursor=0,
            )
        ],
    )
    store.append(
        ID,
        [
            Observation(
                identity_id=ID, type=KINDS[0][0], metadata=KINDS[0][1], created_at=clock.now_ms()
            )
        ],
    )
    (fact,) = one_round(store, clock, decay, ID)
    assert (fact.confidence, fact.reinforcement_count, fact.ease_factor, fact.round_cursor) == (
        0.6,
        2,
        2.5,
        0,
    )
