"""The one behaviour store port, the same tests on every backend: in-memory, Redis (a
standalone server and a 3-shard cluster) and, for what it offers, ``SeparateStores`` over
three separately constructed in-memory parts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.observations import IDENTITY, MakeObs
from tests.support.services import APP_PREFIX, RedisTarget

from engram.adapters.inmemory_behaviour import (
    InMemoryBehaviourStore,
    InMemoryCheckpointStore,
    InMemoryFactRepository,
    InMemoryObservationLog,
)
from engram.adapters.redis_behaviour import (
    RedisBehaviourStore,
    RedisCheckpointStore,
    RedisFactRepository,
    RedisObservationLog,
)
from engram.behaviour.consolidation import consolidate_store
from engram.behaviour.decay import ExponentialDecay
from engram.behaviour.models import Fact
from engram.behaviour.ports import BehaviourStore
from engram.behaviour.separate import SeparateStores, resolve_store
from engram.clock import MS_PER_DAY, FakeClock

FULL = ("memory", "redis-standalone", "redis-cluster")
FENCED = FULL
EVERY = (*FULL, "separate")
OTHER = "team-a:user-2"


def _make(kind: str, request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[BehaviourStore]:
    if kind == "memory":
        yield InMemoryBehaviourStore(clock=clock)
    elif kind == "separate":
        yield SeparateStores(
            InMemoryObservationLog(), InMemoryFactRepository(), InMemoryCheckpointStore()
        )
    else:
        name = "standalone_redis" if kind == "redis-standalone" else "cluster_redis"
        target: RedisTarget = request.getfixturevalue(name)
        client = target.client()
        try:
            yield RedisBehaviourStore(client, prefix=f"{APP_PREFIX}:conf", clock=clock)
        finally:
            client.close()


@pytest.fixture(params=EVERY)
def store(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[BehaviourStore]:
    yield from _make(request.param, request, clock)


@pytest.fixture(params=FULL)
def full_store(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[BehaviourStore]:
    yield from _make(request.param, request, clock)


def run(store: BehaviourStore, clock: FakeClock) -> dict[str, Fact]:
    facts = consolidate_store(store, IDENTITY, decay=ExponentialDecay(), now=clock.now_ms())
    return {f.subject: f for f in facts}


def fact(subject: str, at: int) -> Fact:
    return Fact.model_validate(
        {
            "id": f"id-{subject}",
            "identityId": IDENTITY,
            "category": "tool_affinity",
            "subject": subject,
            "content": "Tool works well for this user",
            "confidence": 0.6,
            "reinforcementCount": 1,
            "lastReinforcedAt": at,
            "createdAt": at,
            "updatedAt": at,
        }
    )


# --- the observation log ------------------------------------------------------------------
def test_append_is_idempotent_and_since_is_in_arrival_order(
    store: BehaviourStore, make_obs: MakeObs
) -> None:
    a, b, c = (make_obs("tool_success", name) for name in "abc")
    assert store.append(IDENTITY, [a, b]) == 2
    assert store.append(IDENTITY, [b, c]) == 1
    assert store.append(IDENTITY, []) == 0
    got = store.since(IDENTITY, None)
    assert [(o.id, o.seq) for o in got] == [(a.id, 1), (b.id, 2), (c.id, 3)]
    assert [o.id for o in store.since(IDENTITY, 2)] == [c.id]
    assert store.since(OTHER, None) == []


def test_prune_leaves_tombstones_below_the_cursor_and_forgets_past_the_limit(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    now = clock.now_ms()
    old = make_obs("tool_success", "a", at=now - 10 * MS_PER_DAY)
    store.append(IDENTITY, [old, make_obs("tool_success", "b", at=now)])
    store.set_checkpoint(IDENTITY, 2)
    assert store.prune(IDENTITY, now - 7 * MS_PER_DAY, up_to_seq=2) == 1
    assert store.append(IDENTITY, [old]) == 0  # a redelivery of a pruned id adds nothing
    assert store.prune(IDENTITY, now + MS_PER_DAY) == 1  # the hard limit: tombstones go too
    assert store.append(IDENTITY, [old]) == 1


# --- facts and the checkpoint ---------------------------------------------------------------
def test_facts_upsert_get_delete(store: BehaviourStore, clock: FakeClock) -> None:
    a, b = fact("tool_affinity:a", clock.now_ms()), fact("tool_affinity:b", clock.now_ms())
    store.upsert_batch(IDENTITY, [a, b])
    assert sorted(f.subject for f in store.get(IDENTITY)) == [a.subject, b.subject]
    store.upsert(IDENTITY, a.evolve(confidence=0.9))
    assert {f.id: f.confidence for f in store.get(IDENTITY)}[a.id] == 0.9
    assert store.delete(IDENTITY, [a.id, "missing"]) == 1
    assert store.delete_fact(IDENTITY, b.id) is True
    assert store.delete_fact(IDENTITY, b.id) is False
    assert store.get(IDENTITY) == []


def test_delete_unchanged_keeps_a_fact_changed_since_it_was_read(
    store: BehaviourStore, clock: FakeClock
) -> None:
    a, b = fact("tool_affinity:a", clock.now_ms()), fact("tool_affinity:b", clock.now_ms())
    store.upsert_batch(IDENTITY, [a, b])
    read = store.get(IDENTITY)
    store.upsert(IDENTITY, a.evolve(updated_at=a.updated_at + 1))  # a changes after the read
    assert store.delete_unchanged(IDENTITY, read) == 1
    assert [f.id for f in store.get(IDENTITY)] == [a.id]


def test_the_checkpoint_and_its_view(store: BehaviourStore) -> None:
    assert store.get_checkpoint(IDENTITY) is None
    store.set_checkpoint(IDENTITY, 3)
    assert store.get_checkpoint(IDENTITY) == 3
    assert store.checkpoints.get(IDENTITY) == 3
    store.checkpoints.set(IDENTITY, 4)
    assert store.get_checkpoint(IDENTITY) == 4
    assert store.checkpoints.behaviour_store() is store


# --- rounds ---------------------------------------------------------------------------------
def test_a_round_reads_groups_and_commits_facts_and_cursor(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(
        IDENTITY,
        [
            make_obs("tool_success", "a"),
            make_obs("tool_success", "a"),
            make_obs("tool_failure", "a"),
        ],
    )
    read = store.read_round(IDENTITY)
    assert read.observation_count == 3
    assert read.max_seq == 3
    groups = sorted((g.subject, g.count, g.successes, g.failures) for g in read.groups)
    assert groups == [("tool_affinity:a", 2, 2, 1), ("tool_avoidance:a", 1, 2, 1)]
    facts = run(store, clock)
    assert sorted(facts) == ["tool_affinity:a", "tool_avoidance:a"]
    assert store.get_checkpoint(IDENTITY) == 3
    assert store.read_round(IDENTITY).observation_count == 0
    clock.advance(ms=MS_PER_DAY)
    assert run(store, clock)["tool_affinity:a"].reinforcement_count == 1  # nothing new
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    assert run(store, clock)["tool_affinity:a"].reinforcement_count == 2


def test_round_facts_are_the_callers_to_change(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    run(store, clock)
    read = store.read_round(IDENTITY)
    read.facts[0].__dict__["confidence"] = 0.0  # what a round planning in place does
    assert store.get(IDENTITY)[0].confidence > 0.0


@pytest.mark.parametrize("kind", FENCED)
def test_a_commit_on_a_stale_read_is_fenced_out(
    kind: str, request: pytest.FixtureRequest, clock: FakeClock, make_obs: MakeObs
) -> None:
    for store in _make(kind, request, clock):
        store.append(IDENTITY, [make_obs("tool_success", "a")])
        stale, fresh = store.read_round(IDENTITY), store.read_round(IDENTITY)
        now = clock.now_ms()
        args = {"deletes": [], "prune_before_ms": 0, "hard_prune_before_ms": 0, "now_ms": now}
        winner = fact("tool_affinity:a", now)
        assert store.commit_round(IDENTITY, read=fresh, upserts=[winner], **args) is True
        loser = winner.evolve(reinforcement_count=5)
        assert store.commit_round(IDENTITY, read=stale, upserts=[loser], **args) is False
        assert [f.reinforcement_count for f in store.get(IDENTITY)] == [1]
        assert store.get_checkpoint(IDENTITY) == 1


# --- the identity ---------------------------------------------------------------------------
def test_export_is_the_checkpoint_observations_and_facts(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    obs = make_obs("tool_success", "a")
    store.append(IDENTITY, [obs])
    run(store, clock)
    data = store.export(IDENTITY)
    assert data["identityId"] == IDENTITY
    assert data["checkpoint"] == 1
    assert [(o["id"], o["seq"]) for o in data["observations"]] == [(obs.id, 1)]
    assert [f["subject"] for f in data["facts"]] == ["tool_affinity:a"]


def test_erase_and_the_identity_index(
    full_store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store = full_store
    store.append(IDENTITY, [make_obs("tool_success", "a", identity=IDENTITY)])
    clock.advance(ms=1_000)
    store.append(OTHER, [make_obs("tool_success", "b", identity=OTHER)])
    assert store.list_identities() == ([IDENTITY, OTHER], 0)
    first, cursor = store.list_identities(cursor="", limit=1)
    assert first == [IDENTITY]
    assert store.list_identities(cursor=cursor, limit=1)[0] == [OTHER]
    assert store.list_identities(active_before_ms=clock.now_ms())[0] == [IDENTITY]
    run(store, clock)
    assert store.remove_if_empty(IDENTITY) is False
    assert store.erase(IDENTITY) == {"observations": 1, "facts": 1}
    assert store.get(IDENTITY) == []
    assert store.since(IDENTITY, None) == []
    assert store.get_checkpoint(IDENTITY) is None
    assert store.list_identities()[0] == [OTHER]
    store.prune(OTHER, clock.now_ms() + MS_PER_DAY)
    assert store.remove_if_empty(OTHER) is True
    assert store.list_identities()[0] == []


def test_separate_stores_have_no_index_or_erasure() -> None:
    separate = SeparateStores(
        InMemoryObservationLog(), InMemoryFactRepository(), InMemoryCheckpointStore()
    )
    with pytest.raises(NotImplementedError):
        separate.erase(IDENTITY)
    with pytest.raises(NotImplementedError):
        separate.list_identities()
    with pytest.raises(NotImplementedError):
        separate.remove_if_empty(IDENTITY)


# --- several identities at once -------------------------------------------------------------
def test_append_many_appends_per_identity(store: BehaviourStore, make_obs: MakeObs) -> None:
    identities = [f"team-a:user-{n}" for n in range(6)]  # spread over the cluster's slots
    batches = {i: [make_obs("tool_success", "a", identity=i) for _ in range(2)] for i in identities}
    quiet = "team-a:quiet"
    assert store.append_many({**batches, quiet: []}) == {**dict.fromkeys(identities, 2), quiet: 0}
    for identity, batch in batches.items():
        assert [o.id for o in store.since(identity, None)] == [o.id for o in batch]
    again = {i: [*b, make_obs("tool_success", "b", identity=i)] for i, b in batches.items()}
    assert store.append_many(again) == dict.fromkeys(identities, 1)  # a redelivery adds 1
    assert store.append_many({}) == {}


@pytest.mark.parametrize("kind", ["redis-standalone", "redis-cluster"])
def test_append_many_is_one_round_trip_and_reports_a_failing_identity_alone(
    kind: str, request: pytest.FixtureRequest, clock: FakeClock, make_obs: MakeObs
) -> None:
    for store in _make(kind, request, clock):
        assert isinstance(store, RedisBehaviourStore)
        broken, fine = "team-a:broken", "team-a:fine"
        store.client.set(store.keys(broken).state, "not a hash")  # its script fails
        store.append(fine, [make_obs("tool_success", "warm-up", identity=fine)])  # scripts loaded
        before = store.round_trips
        result = store.append_many(
            {
                broken: [make_obs("tool_success", "a", identity=broken)],
                fine: [make_obs("tool_success", "a", identity=fine)],
            }
        )
        assert store.round_trips - before == 1
        assert result[fine] == 1
        assert isinstance(result[broken], Exception)
        assert len(store.since(fine, None)) == 2
        store.client.delete(store.keys(broken).state)
        assert store.append_many({broken: [make_obs("tool_success", "a", identity=broken)]}) == {
            broken: 1
        }


# --- what engram.consolidate resolves its three stores to ------------------------------------
def test_the_documented_combinations_resolve_as_documented(
    standalone_redis: RedisTarget, clock: FakeClock
) -> None:
    memory = InMemoryBehaviourStore(clock=clock)
    assert resolve_store(memory, memory, memory.checkpoints) is memory
    assert resolve_store(memory, memory, memory) is memory
    parts = (InMemoryObservationLog(), InMemoryFactRepository(), InMemoryCheckpointStore())
    assert isinstance(resolve_store(*parts), SeparateStores)
    other = InMemoryBehaviourStore(clock=clock)
    assert isinstance(resolve_store(memory, other, memory.checkpoints), SeparateStores)
    clients = [standalone_redis.client() for _ in range(3)]
    try:
        prefix = f"{APP_PREFIX}:conf"
        log = RedisObservationLog(clients[0], prefix=prefix, clock=clock)
        facts = RedisFactRepository(clients[1], prefix=prefix, clock=clock)
        checkpoints = RedisCheckpointStore(clients[2], prefix=prefix, clock=clock)
        assert resolve_store(log, facts, checkpoints) is log
        elsewhere = RedisCheckpointStore(clients[2], prefix=f"{prefix}:x", clock=clock)
        assert isinstance(resolve_store(log, facts, elsewhere), SeparateStores)
        assert isinstance(resolve_store(log, memory, checkpoints), SeparateStores)
    finally:
        for client in clients:
            client.close()
