"""The Redis adapters on a real redis-server and Redis Cluster: key layout and TTLs, the Lua
grouping against the in-memory reference, round trips, script reloads, the identity index.
What every behaviour store does is in test_store_conformance.py."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot
from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import commit, consolidated, one_round, plan
from tests.support.services import RedisTarget

from engram import (
    AdaptiveDecay,
    ExponentialDecay,
    InMemoryBehaviourStore,
    RedisCheckpointStore,
    RedisFactRepository,
    RedisObservationLog,
    consolidate,
)
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.models import parse_observations
from engram.clock import MS_PER_DAY, FakeClock
from engram.errors import InvalidInput


def test_every_key_of_an_identity_shares_one_hash_slot(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    one_round(store, clock)
    keys = [k.decode() for k in redis_target.key_names("engram:*") if b"identities" not in k]
    assert len(keys) >= 5
    assert all("{team-a:user-1}" in k for k in keys)
    assert len({key_slot(k.encode()) for k in keys}) == 1
    # TTL backstop refreshed on activity
    assert all(0 < store.client.pttl(k) <= 90 * MS_PER_DAY for k in keys)


def test_bad_input_stores_nothing(store: RedisBehaviourStore, redis_target: RedisTarget) -> None:
    good = {"type": "tool_success", "metadata": {"toolName": "a", "durationMs": 1}, "createdAt": 1}
    bad = {"type": "tool_success", "metadata": {"toolName": "a"}, "createdAt": 1}
    with pytest.raises(InvalidInput) as err:
        store.append(IDENTITY, parse_observations([good, bad], identity_id=IDENTITY))
    assert err.value.field == "observations.1.metadata.durationMs"
    assert redis_target.key_names("engram:*") == []


def test_consolidation_matches_the_in_memory_reference(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    """The Lua grouping mirrors the Python one, round after round, with both decays."""
    for decay in (ExponentialDecay(), AdaptiveDecay()):
        ref = InMemoryBehaviourStore()
        identity = f"id-{type(decay).__name__}"
        for day in range(6):
            batch = [
                make_obs("tool_success", "get_account", identity=identity),
                make_obs("tool_failure", "get_account", identity=identity),
                make_obs("tool_success", f"t{day % 3}", identity=identity),
                make_obs("entity_access", ("account", "42", "Acme ☃ # x *y*"), identity=identity),
                make_obs("entity_access", ("schema_table", f"DB.S.T{day % 2}"), identity=identity),
                make_obs("query_pattern", "royalty" if day % 2 else "revenue", identity=identity),
            ]
            store.append(identity, batch)
            ref.append(identity, batch)
            got = consolidated(store, clock, decay, identity)
            want = consolidated(ref, clock, decay, identity)
            assert got == want
            clock.advance(days=4)


def test_round_trips_are_constant_whatever_the_sizes(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "warm")])
    one_round(store, clock)  # loads the scripts
    counts = []
    for n in (10, 100, 1000):
        store.append(IDENTITY, [make_obs("tool_success", f"tool{i % 200}") for i in range(n)])
        before = store.round_trips
        one_round(store, clock)
        counts.append(store.round_trips - before)
        clock.advance(days=1)
    # one read, one commit; a cluster puts the index update of a staged commit (100 and 1000
    # facts) in a round trip of its own, as the index lives in another slot
    staged = 1 if redis_target.cluster else 0
    assert counts == [2, 2 + staged, 2 + staged]
    before = store.round_trips
    one_round(store, clock)  # nothing new: one read
    assert store.round_trips - before == 1


def test_separate_port_objects_on_one_client_take_the_atomic_path(
    client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    log = RedisObservationLog(client, clock=clock)
    facts = RedisFactRepository(client, clock=clock)
    cps = RedisCheckpointStore(client, clock=clock)
    log.append(IDENTITY, [make_obs("tool_success", "a")])
    out = consolidate(
        IDENTITY,
        observations=log,
        facts=facts,
        checkpoints=cps,
        decay=ExponentialDecay(),
        now=clock.now_ms(),
    )
    assert [f.subject for f in out] == ["tool_affinity:a"]
    assert log.round_trips == 4  # script load, append, read, commit
    assert cps.get(IDENTITY) == 1
    assert facts.get(IDENTITY)[0].reinforcement_count == 1


def test_identity_index_erase_export_and_delete_fact(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append("a", [make_obs("tool_success", "x", identity="a")])
    clock.advance(days=1)
    store.append("b", [make_obs("tool_success", "x", identity="b")])
    clock.advance(days=1)
    store.append("c", [make_obs("tool_success", "x", identity="c")])
    assert store.list_identities() == (["a", "b", "c"], 0)
    assert store.list_identities(limit=2) == (["a", "b"], 2)
    assert store.list_identities(cursor=2, limit=2) == (["c"], 0)
    assert store.list_identities(active_before_ms=clock.now_ms() - MS_PER_DAY // 2) == (
        ["a", "b"],
        0,
    )
    one_round(store, clock, identity="a")
    exported = store.export("a")
    assert exported["checkpoint"] == 1
    assert [o["metadata"]["toolName"] for o in exported["observations"]] == ["x"]
    assert [f["subject"] for f in exported["facts"]] == ["tool_affinity:x"]
    assert store.delete_fact("a", "fact:tool_affinity:x") is True
    assert store.delete_fact("a", "fact:tool_affinity:x") is False
    assert store.erase("a") == {"observations": 1, "facts": 0}
    assert [k for k in redis_target.key_names("engram:*") if b"{a}" in k] == []  # nothing lingers
    assert store.list_identities()[0] == ["b", "c"]


def test_scripts_are_reloaded_after_a_script_flush(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    admin = redis_target.admin()
    admin.script_flush()  # every primary's
    admin.close()
    store.append(IDENTITY, [make_obs("tool_success", "b")])
    assert set(consolidated(store, clock)) == {"tool_affinity:a", "tool_affinity:b"}


def test_observations_arriving_during_a_round_wait_for_the_next_one(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(
        IDENTITY, [make_obs("tool_success", "a"), make_obs("entity_access", ("x", "1", "X"))]
    )
    read = store.read_round(IDENTITY)
    upserts, deletes = plan(read, clock)
    # arrives between the read and the commit, for a key of this round and a new one
    store.append(IDENTITY, [make_obs("tool_success", "a"), make_obs("entity_access", ("x", "2"))])
    assert commit(store, read, clock, upserts=upserts, deletes=deletes)
    clock.advance(days=1)
    facts = consolidated(store, clock)
    assert facts["tool_affinity:a"].reinforcement_count == 2
    assert facts["entity_frequency:x:1"].reinforcement_count == 1
    assert facts["entity_frequency:x:2"].reinforcement_count == 1
    assert store.read_round(IDENTITY).observation_count == 0


def test_remove_if_empty_only_removes_identities_that_hold_nothing(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    assert store.remove_if_empty(IDENTITY) is False  # pending observation
    one_round(store, clock)
    assert store.remove_if_empty(IDENTITY) is False  # observation and fact
    clock.advance(days=60)
    assert store.prune(IDENTITY, clock.now_ms() - 30 * MS_PER_DAY) == 1
    assert store.remove_if_empty(IDENTITY) is False  # the fact is still stored
    assert store.delete_fact(IDENTITY, "fact:tool_affinity:a") is True
    assert store.remove_if_empty(IDENTITY) is True
    assert not [k for k in redis_target.key_names("engram:*") if b"{team-a:user-1}" in k]
    assert IDENTITY not in store.list_identities()[0]
