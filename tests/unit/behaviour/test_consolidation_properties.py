"""Property: a fact's reinforcement count is the number of rounds its key appeared in."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.rounds import one_round

from engram import InMemoryBehaviourStore, Observation
from engram.behaviour.models import observation_to_fact_key
from engram.clock import MS_PER_DAY, FakeClock

ID = "t:u"
KINDS = [
    ("tool_success", {"toolName": "a", "durationMs": 1}),
    ("tool_success", {"toolName": "b", "durationMs": 1}),
    ("tool_failure", {"toolName": "a", "durationMs": 1, "error": "x"}),
    ("entity_access", {"entityType": "account", "entityId": "1"}),
    ("query_pattern", {"domain": "royalty", "query": "q"}),
]

rounds_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, len(KINDS) - 1), st.integers(-3, 0)), max_size=12),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(rounds=rounds_strategy)
def test_reinforcement_count_equals_rounds_with_the_key(
    rounds: list[list[tuple[int, int]]],
) -> None:
    clock = FakeClock()
    store = InMemoryBehaviourStore()
    appeared: Counter[str] = Counter()
    for batch in rounds:
        observations = [
            Observation(
                identity_id=ID,
                type=KINDS[k][0],
                metadata=KINDS[k][1],
                created_at=clock.now_ms() + skew * MS_PER_DAY,  # some arrive "late"
            )
            for k, skew in batch
        ]
        store.append(ID, observations)
        appeared.update({observation_to_fact_key(o)[1] for o in observations})
        facts = one_round(store, clock, identity=ID)
        assert {f.subject: f.reinforcement_count for f in facts} == dict(appeared)
        clock.advance(days=1)  # never long enough for anything to expire
