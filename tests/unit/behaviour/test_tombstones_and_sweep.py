"""In-memory store: ids pruned by the 7-day rule stay known until the 30-day limit (as on
Redis), and the expiry sweep deletes only facts unchanged since it read them."""

from __future__ import annotations

from tests.support.observations import IDENTITY, MakeObs

from engram import ExponentialDecay, InMemoryBehaviourStore, consolidate
from engram.adapters.inmemory_behaviour import InMemoryObservationLog
from engram.behaviour.consolidation import sweep_expired
from engram.clock import MS_PER_DAY, FakeClock


def test_the_single_port_log_keeps_tombstones_until_the_hard_limit(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    log = InMemoryObservationLog()
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    assert log.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)]) == 2
    assert log.prune(IDENTITY, now - 7 * MS_PER_DAY, up_to_seq=2) == 1
    assert log.append(IDENTITY, [old]) == 0  # a redelivery of a pruned id
    assert log.append(old.identity_id + "-other", [old]) == 1  # per identity
    log.prune(IDENTITY, now - 11 * MS_PER_DAY)  # the hard limit, not reached yet
    assert log.append(IDENTITY, [old]) == 0
    log.prune(IDENTITY, now - 9 * MS_PER_DAY)  # past it: the tombstone goes
    assert log.append(IDENTITY, [old]) == 1


def test_erasure_forgets_tombstones(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore(clock=clock)
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    store.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)])
    consolidate(
        IDENTITY,
        observations=store,
        facts=store,
        checkpoints=store.checkpoints,
        decay=ExponentialDecay(),
        now=now,
    )
    assert store.append(IDENTITY, [old]) == 0
    store.erase(IDENTITY)
    assert store.append(IDENTITY, [old]) == 1


def test_the_sweep_deletes_expired_facts_stored_as_read(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore(clock=clock)
    store.append(IDENTITY, [make_obs("tool_success", "A")])
    consolidate(
        IDENTITY,
        observations=store,
        facts=store,
        checkpoints=store.checkpoints,
        decay=ExponentialDecay(),
        now=clock.now_ms(),
    )
    (fact,) = store.get(IDENTITY)
    assert sweep_expired(IDENTITY, facts=store, decay=ExponentialDecay(), now=clock.now_ms()) == 0
    clock.advance(ms=400 * MS_PER_DAY)
    reinforced = fact.model_copy(update={"last_reinforced_at": clock.now_ms()})
    assert store.delete_unchanged(IDENTITY, [reinforced]) == 0  # not the stored fact
    assert sweep_expired(IDENTITY, facts=store, decay=ExponentialDecay(), now=clock.now_ms()) == 1
    assert store.get(IDENTITY) == []
