"""Property: Redis and the in-memory reference consolidate any sequence of rounds alike."""

from __future__ import annotations

import uuid

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.rounds import one_round

from engram import AdaptiveDecay, InMemoryBehaviourStore, Observation
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.clock import MS_PER_DAY, FakeClock

KINDS = [
    ("tool_success", {"toolName": "a", "durationMs": 1}),
    ("tool_success", {"toolName": "b:c", "durationMs": 1}),
    ("tool_failure", {"toolName": "a", "durationMs": 1, "error": "x"}),
    ("entity_access", {"entityType": "account", "entityId": "1:2", "entityName": "Ä #*"}),
    ("entity_access", {"entityType": "account", "entityId": "1:2"}),
    ("query_pattern", {"domain": "royalty", "query": "q"}),
]

rounds_strategy = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, len(KINDS) - 1), st.integers(-40, 0)), max_size=10),
        st.integers(0, 20),  # days until the next round
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=rounds_strategy)
def test_redis_matches_the_reference(
    client: redis.Redis, rounds: list[tuple[list[tuple[int, int]], int]]
) -> None:
    clock = FakeClock()
    identity = f"prop:{uuid.uuid4().hex}"
    red = RedisBehaviourStore(client, clock=clock)
    ref = InMemoryBehaviourStore(clock=clock)
    decay = AdaptiveDecay()
    for batch, gap in rounds:
        observations = [
            Observation(
                identity_id=identity,
                type=KINDS[k][0],
                metadata=KINDS[k][1],
                created_at=clock.now_ms() + skew * MS_PER_DAY,
            )
            for k, skew in batch
        ]
        assert red.append(identity, observations) == ref.append(identity, observations)
        got = [one_round(s, clock, decay, identity) for s in (red, ref)]
        assert got[0] == got[1]
        assert len(red.since(identity, None)) == len(ref.since(identity, None))  # same pruning
        clock.advance(days=gap)
    red.erase(identity)
