"""Regressions from review, on a real redis-server and Redis Cluster (and the in-memory store
where it applies):
the prune/commit race on pending counts, the sweep/reinforce race, the standalone classes on
one Redis through different clients, and idempotency tombstones after the 7-day prune."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import redis
from tests.support.observations import IDENTITY, MakeObs
from tests.support.services import APP_PREFIX, RedisServer, RedisTarget

from engram import ExponentialDecay, Fact, consolidate
from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.adapters.redis_behaviour import (
    RedisBehaviourStore,
    RedisCheckpointStore,
    RedisFactRepository,
    RedisObservationLog,
)
from engram.behaviour.consolidation import sweep_expired
from engram.clock import MS_PER_DAY, FakeClock


def run(store: Any, clock: FakeClock) -> list[Fact]:
    return consolidate(
        IDENTITY,
        observations=store,
        facts=store,
        checkpoints=store.checkpoints,
        decay=ExponentialDecay(),
        now=clock.now_ms(),
    )


def by_subject(facts: Sequence[Fact]) -> dict[str, Fact]:
    return {f.subject: f for f in facts}


@pytest.fixture(params=["redis", "memory"])
def any_store(request: pytest.FixtureRequest, client: redis.Redis, clock: FakeClock) -> Any:
    if request.param == "redis":
        return RedisBehaviourStore(client, prefix=f"{APP_PREFIX}:races", clock=clock)
    return InMemoryBehaviourStore(clock=clock)


# --- 1. a prune lowering pending counts fences a consolidation that read before it ----------
def test_a_prune_between_read_and_commit_fences_the_commit(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    now = clock.now_ms()
    store.append(IDENTITY, [make_obs("tool_success", "A", at=now - 31 * MS_PER_DAY)])
    read = store.read_round(IDENTITY)
    assert read.observation_count == 1
    assert store.prune(IDENTITY, now - 30 * MS_PER_DAY) == 1  # maintenance: past retention
    fresh = make_obs("tool_success", "A", at=now)
    assert store.append(IDENTITY, [fresh]) == 1
    committed = store.commit_round(
        IDENTITY,
        read=read,
        upserts=[],
        deletes=[],
        prune_before_ms=read.max_created_at - 7 * MS_PER_DAY,
        hard_prune_before_ms=now - 30 * MS_PER_DAY,
        now_ms=now,
    )
    assert committed is False  # it would subtract the pruned observation's count twice
    again = store.read_round(IDENTITY)
    assert again.observation_count == 1  # the fresh observation is still pending
    assert [(g.subject, g.count) for g in again.groups] == [("tool_affinity:A", 1)]
    facts = by_subject(run(store, clock))
    assert facts["tool_affinity:A"].reinforcement_count == 1
    assert store.read_round(IDENTITY).observation_count == 0


# --- 2. the expiry sweep never deletes a fact reinforced after it read it -------------------
class _ReinforcingBetweenReadAndDelete:
    """A fact repository that runs a consolidation round right after the sweep's read."""

    def __init__(self, store: Any, clock: FakeClock, obs: Any) -> None:
        self.store, self.clock, self.obs = store, clock, obs

    def get(self, identity_id: str) -> list[Fact]:
        facts: list[Fact] = self.store.get(identity_id)
        self.store.append(identity_id, [self.obs])
        run(self.store, self.clock)
        return facts

    def upsert(self, identity_id: str, fact: Fact) -> None:
        self.store.upsert(identity_id, fact)

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        self.store.upsert_batch(identity_id, facts)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        return int(self.store.delete(identity_id, fact_ids))

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        return int(self.store.delete_unchanged(identity_id, facts))


def test_the_sweep_keeps_a_fact_reinforced_after_its_read(
    any_store: Any, clock: FakeClock, make_obs: MakeObs
) -> None:
    any_store.append(IDENTITY, [make_obs("tool_success", "A")])
    run(any_store, clock)
    clock.advance(ms=400 * MS_PER_DAY)  # long past expiry
    racing = _ReinforcingBetweenReadAndDelete(any_store, clock, make_obs("tool_success", "A"))
    assert sweep_expired(IDENTITY, facts=racing, decay=ExponentialDecay(), now=clock.now_ms()) == 0
    (fact,) = any_store.get(IDENTITY)
    assert fact.subject == "tool_affinity:A"
    assert fact.reinforcement_count == 2
    # untouched since the read, an expired fact is swept
    clock.advance(ms=400 * MS_PER_DAY)
    assert (
        sweep_expired(IDENTITY, facts=any_store, decay=ExponentialDecay(), now=clock.now_ms()) == 1
    )
    assert any_store.get(IDENTITY) == []


def test_delete_unchanged_deletes_only_facts_stored_as_read(
    any_store: Any, clock: FakeClock, make_obs: MakeObs
) -> None:
    any_store.append(IDENTITY, [make_obs("tool_success", "A"), make_obs("tool_success", "B")])
    run(any_store, clock)
    stale = by_subject(any_store.get(IDENTITY))
    clock.advance(ms=MS_PER_DAY)
    any_store.append(IDENTITY, [make_obs("tool_success", "A")])
    run(any_store, clock)  # A reinforced, B untouched
    gone = any_store.delete_unchanged(IDENTITY, list(stale.values()))
    assert gone == 1
    assert [f.subject for f in any_store.get(IDENTITY)] == ["tool_affinity:A"]
    assert any_store.delete_unchanged(IDENTITY, []) == 0


# --- 3. the standalone classes on one Redis through different clients ----------------------
def test_standalone_classes_on_one_redis_share_backing(
    redis_target: RedisTarget, own_redis: RedisServer, clock: FakeClock
) -> None:
    clients = [redis_target.client() for _ in range(3)]
    other_server = own_redis.target().client()
    try:
        log = RedisObservationLog(clients[0], clock=clock)
        facts = RedisFactRepository(clients[1], clock=clock)
        checkpoints = RedisCheckpointStore(clients[2], clock=clock)
        assert log.shares_backing_with(facts)
        assert log.shares_backing_with(checkpoints)
        assert not log.shares_backing_with(RedisFactRepository(other_server, clock=clock))
        other_prefix = RedisFactRepository(clients[1], prefix=f"{APP_PREFIX}:x")
        assert not log.shares_backing_with(other_prefix)
        assert not log.shares_backing_with(object())
    finally:
        for c in [*clients, other_server]:
            c.close()


def test_the_standalone_checkpoint_drains_what_it_covers(
    redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    a = redis_target.client()
    b = redis_target.client()
    try:
        store = RedisBehaviourStore(a, clock=clock)
        checkpoints = RedisCheckpointStore(b, clock=clock)
        store.append(IDENTITY, [make_obs("tool_success", "A"), make_obs("tool_success", "B")])
        store.append(IDENTITY, [make_obs("tool_success", "C")])
        checkpoints.set(IDENTITY, 2)  # A and B are consolidated elsewhere
        assert checkpoints.get(IDENTITY) == 2
        read = store.read_round(IDENTITY)
        assert [(g.subject, g.count) for g in read.groups] == [("tool_affinity:C", 1)]
        # no phantom reinforcement of A or B by a later round
        assert sorted(by_subject(run(store, clock))) == ["tool_affinity:C"]
        checkpoints.set(IDENTITY, 1)  # moving back drains nothing more
        assert store.read_round(IDENTITY).observation_count == 0
    finally:
        a.close()
        b.close()


# --- 4. ids pruned by the 7-day rule stay known until the 30-day limit ----------------------
def test_a_redelivery_after_the_seven_day_prune_counts_once(
    any_store: Any, clock: FakeClock, make_obs: MakeObs
) -> None:
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    any_store.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)])
    run(any_store, clock)
    kept = [o.id for o in any_store.since(IDENTITY, None)]
    assert len(kept) == 1  # B stays; A was pruned by the 7-day rule
    assert old.id not in kept
    assert any_store.append(IDENTITY, [old]) == 0  # a redelivery: still known
    facts = by_subject(run(any_store, clock))
    assert facts["tool_affinity:A"].reinforcement_count == 1
    # past the 30-day limit the id is forgotten (as the observation itself would be)
    any_store.prune(IDENTITY, now + 21 * MS_PER_DAY)
    assert any_store.append(IDENTITY, [old]) == 1
