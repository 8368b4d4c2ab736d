"""consolidate() on the in-memory store: a round's decisions (new facts, one reinforcement a
round, decay and expiry, adaptive ease, ranking) and a crash between facts and checkpoint over
separate stores. What every behaviour store does (idempotency, retention, fencing, crashes and
concurrent rounds) is in tests/integration/behaviour/test_store_conformance.py."""

from __future__ import annotations

import pytest
from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import by_subject, commit, consolidated, one_round

from engram import (
    AdaptiveDecay,
    ExponentialDecay,
    Fact,
    InMemoryBehaviourStore,
    InMemoryCheckpointStore,
    InMemoryFactRepository,
    InMemoryObservationLog,
    consolidate,
)
from engram.behaviour.consolidation import sweep_expired
from engram.clock import MS_PER_DAY, FakeClock


def stored(store: InMemoryBehaviourStore) -> dict[str, Fact]:
    return by_subject(store.get(IDENTITY))


def test_new_facts_start_at_0_5_with_one_reinforcement(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "get_account")])
    f = consolidated(store, clock)["tool_affinity:get_account"]
    assert (f.confidence, f.reinforcement_count, f.id) == (0.5, 1, "fact:tool_affinity:get_account")
    assert f.created_at == f.updated_at == f.last_reinforced_at == clock.now_ms()
    assert 'Tool "get_account"' in f.content


def test_at_most_one_reinforcement_per_fact_per_round(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "a") for _ in range(5)])
    assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 1
    clock.advance(days=1)
    store.append(IDENTITY, [make_obs("tool_success", "a") for _ in range(7)])
    f = consolidated(store, clock)["tool_affinity:a"]
    assert (f.reinforcement_count, f.confidence) == (2, pytest.approx(0.6))


def test_no_new_observations_short_circuits_and_returns_current_confidence(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("query_pattern", "royalty")])
    one_round(store, clock)
    version = store.read_round(IDENTITY).version
    clock.advance(days=10)
    f = consolidated(store, clock)["domain_preference:royalty"]
    assert f.confidence == pytest.approx(0.5 * 0.95**10)
    assert stored(store)["domain_preference:royalty"].confidence == 0.5  # stored stays
    assert store.read_round(IDENTITY).version == version  # nothing written


def test_unreinforced_facts_decay_and_expire(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "old"), make_obs("tool_success", "kept")])
    one_round(store, clock)
    clock.advance(days=20)
    store.append(IDENTITY, [make_obs("tool_success", "kept")])
    facts = consolidated(store, clock)
    assert facts["tool_affinity:old"].confidence == pytest.approx(0.5 * 0.95**20)
    assert stored(store)["tool_affinity:old"].confidence == 0.5  # never persist decayed values
    clock.advance(days=12)  # old: 32 idle days -> below 0.1
    store.append(IDENTITY, [make_obs("tool_success", "kept")])
    facts = consolidated(store, clock)
    assert "tool_affinity:old" not in facts
    assert "tool_affinity:old" not in stored(store)
    assert facts["tool_affinity:kept"].reinforcement_count == 3


def test_quality_feeds_adaptive_ease(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    decay = AdaptiveDecay()
    store.append(IDENTITY, [make_obs("tool_success", "t")])
    one_round(store, clock, decay)
    assert stored(store)["tool_affinity:t"].ease_factor == 2.5
    clock.advance(days=1)
    # 1 success, 2 failures: affinity quality 1/3, avoidance quality 2/3
    store.append(
        IDENTITY,
        [
            make_obs("tool_success", "t"),
            make_obs("tool_failure", "t"),
            make_obs("tool_failure", "t"),
        ],
    )
    one_round(store, clock, decay)
    s = stored(store)
    assert s["tool_affinity:t"].ease_factor == pytest.approx(2.5 + 0.1 - (1 - 1 / 3) * 0.3)
    assert s["tool_avoidance:t"].ease_factor == 2.5  # created this round


def test_returned_facts_are_ranked_and_carry_current_confidence(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "a"), make_obs("tool_success", "b")])
    one_round(store, clock)
    clock.advance(days=1)
    store.append(IDENTITY, [make_obs("tool_success", "b")])
    facts = one_round(store, clock)
    assert [f.subject for f in facts] == ["tool_affinity:b", "tool_affinity:a"]
    assert facts[1].confidence == pytest.approx(0.5 * 0.95)


def test_a_crash_between_facts_and_checkpoint_does_not_reinforce_twice(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    """Separate stores (no atomic commit): facts remember the cursor they were reinforced to."""
    log, facts, checkpoints = (
        InMemoryObservationLog(),
        InMemoryFactRepository(),
        InMemoryCheckpointStore(),
    )

    class Crashing:
        def __init__(self) -> None:
            self.crash = False

        def get(self, identity_id: str) -> int | None:
            return checkpoints.get(identity_id)

        def set(self, identity_id: str, value: int) -> None:
            if self.crash:
                self.crash = False
                raise RuntimeError("process died before the checkpoint")
            checkpoints.set(identity_id, value)

    cp = Crashing()
    decay = ExponentialDecay()
    log.append(IDENTITY, [make_obs("tool_success", "a")])
    consolidate(
        IDENTITY, observations=log, facts=facts, checkpoints=cp, decay=decay, now=clock.now_ms()
    )
    clock.advance(days=1)
    log.append(IDENTITY, [make_obs("tool_success", "a"), make_obs("tool_success", "b")])
    cp.crash = True
    with pytest.raises(RuntimeError):
        consolidate(
            IDENTITY, observations=log, facts=facts, checkpoints=cp, decay=decay, now=clock.now_ms()
        )
    assert {f.subject: f.reinforcement_count for f in facts.get(IDENTITY)}["tool_affinity:a"] == 2
    clock.advance(seconds=5)
    out = consolidate(
        IDENTITY, observations=log, facts=facts, checkpoints=cp, decay=decay, now=clock.now_ms()
    )
    counts = {f.subject: f.reinforcement_count for f in out}
    assert counts == {"tool_affinity:a": 2, "tool_affinity:b": 1}


def test_a_user_deleting_a_fact_mid_round_fences_the_commit(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    read = store.read_round(IDENTITY)
    store.delete_fact(IDENTITY, "fact:tool_affinity:zzz")  # any fact mutation bumps the version
    assert not commit(store, read, clock)
    assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 1


def test_sweep_expired_deletes_only_expired(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    one_round(store, clock)
    later = clock.now_ms() + 40 * MS_PER_DAY
    assert sweep_expired(IDENTITY, facts=store, decay=ExponentialDecay(), now=clock.now_ms()) == 0
    assert sweep_expired(IDENTITY, facts=store, decay=ExponentialDecay(), now=later) == 1
    assert store.get(IDENTITY) == []
