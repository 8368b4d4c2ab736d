"""The one behaviour store port, the same tests on every backend: in-memory, Redis (a
standalone server and a 3-shard cluster) and, for what it offers, ``SeparateStores`` over
three separately constructed in-memory parts."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import pytest
from tests.support.concurrency import race
from tests.support.facts import make_fact
from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import by_subject, commit, consolidated, one_round, plan
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
from engram.behaviour.consolidation import sweep_expired
from engram.behaviour.decay import ExponentialDecay
from engram.behaviour.models import Fact
from engram.behaviour.ports import BehaviourStore, RoundInput
from engram.behaviour.separate import SeparateStores, resolve_store
from engram.clock import MS_PER_DAY, FakeClock

FULL = ("memory", "redis-standalone", "redis-cluster")
FENCED = FULL
EVERY = (*FULL, "separate")
OTHER = "team-a:user-2"


def _make(
    kind: str, request: pytest.FixtureRequest, clock: FakeClock, mixin: type | None = None
) -> Iterator[BehaviourStore]:
    """The store of ``kind``; with ``mixin``, of a subclass that overrides some of its
    methods with the mixin's (to crash or race a round)."""

    def cls(base: type[Any]) -> type[Any]:
        return base if mixin is None else type(mixin.__name__, (mixin, base), {})

    if kind == "memory":
        yield cls(InMemoryBehaviourStore)(clock=clock)
    elif kind == "separate":
        yield SeparateStores(
            InMemoryObservationLog(), InMemoryFactRepository(), InMemoryCheckpointStore()
        )
    else:
        name = "standalone_redis" if kind == "redis-standalone" else "cluster_redis"
        target: RedisTarget = request.getfixturevalue(name)
        client = target.client()
        try:
            yield cls(RedisBehaviourStore)(client, prefix=f"{APP_PREFIX}:conf", clock=clock)
        finally:
            client.close()


@pytest.fixture(params=EVERY)
def store(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[BehaviourStore]:
    yield from _make(request.param, request, clock)


@pytest.fixture(params=FULL)
def full_store(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[BehaviourStore]:
    yield from _make(request.param, request, clock)


def fact(subject: str, at: int) -> Fact:
    return make_fact(
        subject, confidence=0.6, at=at, identity=IDENTITY, content="Tool works well for this user"
    )


# --- the observation log ------------------------------------------------------------------
def test_append_is_idempotent_and_since_is_in_arrival_order(
    store: BehaviourStore, make_obs: MakeObs
) -> None:
    a, b, c, d = (make_obs("tool_success", name) for name in "abcd")
    assert store.append(IDENTITY, [a, b]) == 2
    assert store.append(IDENTITY, [a, b]) == 0
    assert store.append(IDENTITY, [b, c, c]) == 1  # an id twice in one batch counts once
    assert store.append(IDENTITY, [a, b, c, d]) == 1
    assert store.append(IDENTITY, []) == 0
    got = store.since(IDENTITY, None)
    assert [(o.id, o.seq) for o in got] == [(a.id, 1), (b.id, 2), (c.id, 3), (d.id, 4)]
    assert got[0].model_dump(exclude={"seq"}) == a.model_dump(exclude={"seq"})
    assert [o.id for o in store.since(IDENTITY, 2)] == [c.id, d.id]
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
    facts = consolidated(store, clock)
    assert sorted(facts) == ["tool_affinity:a", "tool_avoidance:a"]
    assert store.get_checkpoint(IDENTITY) == 3
    assert store.read_round(IDENTITY).observation_count == 0
    clock.advance(ms=MS_PER_DAY)
    assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 1  # nothing new
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 2


def test_late_and_same_millisecond_observations_are_never_skipped(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    t = clock.now_ms()
    store.append(
        IDENTITY, [make_obs("tool_success", "a", at=t), make_obs("tool_success", "b", at=t)]
    )
    one_round(store, clock)
    clock.advance(days=2)
    store.append(IDENTITY, [make_obs("tool_success", "early", at=clock.now_ms())])
    one_round(store, clock)
    # they reach the store after a later checkpoint, created before it (the queue delivered
    # them late), and several in one millisecond
    late = [make_obs("tool_success", "late", at=t - MS_PER_DAY)]
    store.append(IDENTITY, [*late, make_obs("query_pattern", "x", at=t)])
    store.append(IDENTITY, [make_obs("query_pattern", "y", at=t)])
    store.append(IDENTITY, [make_obs("entity_access", ("account", "1"), at=t)])
    facts = consolidated(store, clock)
    assert {"tool_affinity:a", "tool_affinity:b", "tool_affinity:early"} <= set(facts)
    assert {"tool_affinity:late", "domain_preference:x", "domain_preference:y"} <= set(facts)
    assert "entity_frequency:account:1" in facts


def tool_names(store: BehaviourStore) -> set[str]:
    return {o.metadata["toolName"] for o in store.since(IDENTITY, None)}


def test_a_round_keeps_7_days_below_the_checkpoint_and_nothing_older_than_30(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    now = clock.now_ms()
    eight = make_obs("tool_success", "eight", at=now - 8 * MS_PER_DAY)
    six = make_obs("tool_success", "six", at=now - 6 * MS_PER_DAY)
    store.append(IDENTITY, [eight, six, make_obs("tool_success", "now", at=now)])
    one_round(store, clock)
    assert tool_names(store) == {"six", "now"}  # 8 days below the checkpoint: gone; 6: kept
    # a redelivery of a pruned observation is still recognised (tombstone) and adds nothing
    assert store.append(IDENTITY, [eight]) == 0
    # an observation that arrives 31 days old is consolidated, then dropped (older than 30)
    store.append(IDENTITY, [make_obs("tool_success", "ancient", at=now - 31 * MS_PER_DAY)])
    assert "tool_affinity:ancient" in consolidated(store, clock)
    assert tool_names(store) == {"six", "now"}
    # an unconsolidated observation is not dropped by the 7-day rule ...
    store.append(IDENTITY, [make_obs("tool_success", "pending", at=now - 20 * MS_PER_DAY)])
    checkpoint = store.get_checkpoint(IDENTITY)
    assert store.prune(IDENTITY, now - 7 * MS_PER_DAY, up_to_seq=checkpoint) == 0
    assert "tool_affinity:pending" in consolidated(store, clock)
    # ... but anything older than 30 days is (the maintenance job's retention): here the
    # consolidated one (7 days below its round's newest are kept) and one never consolidated
    store.append(IDENTITY, [make_obs("tool_success", "dropped", at=now - 20 * MS_PER_DAY)])
    clock.advance(days=11)
    assert store.prune(IDENTITY, clock.now_ms() - 30 * MS_PER_DAY) == 2
    assert tool_names(store) == {"six", "now"}
    assert "tool_affinity:dropped" not in consolidated(store, clock)  # dropped means dropped


def test_round_facts_are_the_callers_to_change(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    one_round(store, clock)
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
        winner = fact("tool_affinity:a", clock.now_ms())
        assert commit(store, fresh, clock, upserts=[winner]) is True
        loser = winner.evolve(reinforcement_count=5)
        assert commit(store, stale, clock, upserts=[loser]) is False
        assert [f.reinforcement_count for f in store.get(IDENTITY)] == [1]
        assert store.get_checkpoint(IDENTITY) == 1


def test_a_round_read_before_an_erasure_cannot_commit_after_it(
    full_store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store = full_store
    store.append(IDENTITY, [make_obs("tool_success", "old")])
    read = store.read_round(IDENTITY)
    upserts, deletes = plan(read, clock)
    assert len(upserts) == 1
    store.erase(IDENTITY)
    # the user returns with exactly as many observations: same seq, cursor and version
    store.append(IDENTITY, [make_obs("tool_success", "new")])
    again = store.read_round(IDENTITY)
    assert (again.cursor, again.version, again.max_seq) == (read.cursor, read.version, 1)
    assert commit(store, read, clock, upserts=upserts, deletes=deletes) is False
    assert store.get(IDENTITY) == []
    assert list(consolidated(store, clock)) == ["tool_affinity:new"]


# --- crashes and races ------------------------------------------------------------------------
class CrashAfterCommit:
    """The commit is applied but its reply never arrives (a crash right after the write)."""

    crash = False

    def commit_round(self, identity_id: str, **kw: Any) -> bool:
        ok: bool = super().commit_round(identity_id, **kw)  # type: ignore[misc]
        if self.crash:
            self.crash = False
            raise ConnectionError("connection lost before the reply")
        return ok


class CrashBeforeCommit:
    """The process dies before the commit."""

    crash = False

    def commit_round(self, identity_id: str, **kw: Any) -> bool:
        if self.crash:
            self.crash = False
            raise ConnectionError("process died before the commit")
        ok: bool = super().commit_round(identity_id, **kw)  # type: ignore[misc]
        return ok


@pytest.mark.parametrize("crash", [CrashAfterCommit, CrashBeforeCommit])
@pytest.mark.parametrize("kind", FENCED)
def test_a_crash_mid_consolidation_does_not_reinforce_twice(
    kind: str, crash: type, request: pytest.FixtureRequest, clock: FakeClock, make_obs: MakeObs
) -> None:
    for store in _make(kind, request, clock, crash):
        store.append(IDENTITY, [make_obs("tool_success", "a")])
        one_round(store, clock)
        store.append(IDENTITY, [make_obs("tool_success", "a")])
        store.crash = True  # type: ignore[attr-defined]
        with pytest.raises(ConnectionError):
            one_round(store, clock)
        assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 2
        assert consolidated(store, clock)["tool_affinity:a"].reinforcement_count == 2


ROUNDS = 20


class Racing:
    """Once ``racing`` is on, each thread's first read waits until ``ROUNDS`` threads have
    read: every round reads before any commits."""

    racing = False
    barrier: threading.Barrier

    def read_round(self, identity_id: str) -> RoundInput:
        read: RoundInput = super().read_round(identity_id)  # type: ignore[misc]
        if self.racing and not getattr(threading.current_thread(), "raced", False):
            threading.current_thread().raced = True  # type: ignore[attr-defined]
            self.barrier.wait(timeout=20)
        return read


@pytest.mark.parametrize("kind", FENCED)
def test_20_concurrent_consolidations_reinforce_exactly_once(
    kind: str, request: pytest.FixtureRequest, clock: FakeClock, make_obs: MakeObs
) -> None:
    for store in _make(kind, request, clock, Racing):
        store.append(IDENTITY, [make_obs("tool_success", "a")])
        one_round(store, clock)
        new = [
            make_obs("tool_success", "a"),
            make_obs("entity_access", ("account", "1")),
            make_obs("query_pattern", "royalty"),
        ]
        store.append(IDENTITY, new)
        store.racing = True  # type: ignore[attr-defined]
        store.barrier = threading.Barrier(ROUNDS)  # type: ignore[attr-defined]
        results = race(*[partial(consolidated, store, clock)] * ROUNDS)
        assert [r for r in results if isinstance(r, BaseException)] == []
        for r in results:  # losers re-read and return the winner's facts
            assert r["tool_affinity:a"].reinforcement_count == 2
            assert r["entity_frequency:account:1"].reinforcement_count == 1
            assert r["domain_preference:royalty"].reinforcement_count == 1
        assert by_subject(store.get(IDENTITY))["tool_affinity:a"].reinforcement_count == 2


# --- retention and the expiry sweep -------------------------------------------------------------
class _ReinforcingBetweenReadAndDelete:
    """A fact repository that runs a consolidation round right after the sweep's read."""

    def __init__(self, store: Any, clock: FakeClock, obs: Any) -> None:
        self.store, self.clock, self.obs = store, clock, obs

    def get(self, identity_id: str) -> list[Fact]:
        facts: list[Fact] = self.store.get(identity_id)
        self.store.append(identity_id, [self.obs])
        one_round(self.store, self.clock)
        return facts

    def upsert(self, identity_id: str, fact: Fact) -> None:
        self.store.upsert(identity_id, fact)

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        self.store.upsert_batch(identity_id, facts)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        return int(self.store.delete(identity_id, fact_ids))

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        return int(self.store.delete_unchanged(identity_id, facts))


def sweep(facts: Any, clock: FakeClock) -> int:
    return sweep_expired(IDENTITY, facts=facts, decay=ExponentialDecay(), now=clock.now_ms())


def test_the_sweep_deletes_only_expired_facts_stored_as_read(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "A")])
    one_round(store, clock)
    assert sweep(store, clock) == 0  # not expired
    clock.advance(ms=400 * MS_PER_DAY)  # long past expiry
    (fact,) = store.get(IDENTITY)
    reinforced = fact.model_copy(update={"last_reinforced_at": clock.now_ms()})
    assert store.delete_unchanged(IDENTITY, [reinforced]) == 0  # not the stored fact
    racing = _ReinforcingBetweenReadAndDelete(store, clock, make_obs("tool_success", "A"))
    assert sweep(racing, clock) == 0
    (fact,) = store.get(IDENTITY)
    assert fact.subject == "tool_affinity:A"
    assert fact.reinforcement_count == 2
    # untouched since the read, an expired fact is swept
    clock.advance(ms=400 * MS_PER_DAY)
    assert sweep(store, clock) == 1
    assert store.get(IDENTITY) == []


def test_delete_unchanged_deletes_only_facts_stored_as_read(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "A"), make_obs("tool_success", "B")])
    one_round(store, clock)
    stale = by_subject(store.get(IDENTITY))
    clock.advance(ms=MS_PER_DAY)
    store.append(IDENTITY, [make_obs("tool_success", "A")])
    one_round(store, clock)  # A reinforced, B untouched
    gone = store.delete_unchanged(IDENTITY, list(stale.values()))
    assert gone == 1
    assert [f.subject for f in store.get(IDENTITY)] == ["tool_affinity:A"]
    assert store.delete_unchanged(IDENTITY, []) == 0


def test_a_redelivery_after_the_seven_day_prune_counts_once(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    store.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)])
    one_round(store, clock)
    kept = [o.id for o in store.since(IDENTITY, None)]
    assert len(kept) == 1  # B stays; A was pruned by the 7-day rule
    assert old.id not in kept
    assert store.append(IDENTITY, [old]) == 0  # a redelivery: still known
    facts = consolidated(store, clock)
    assert facts["tool_affinity:A"].reinforcement_count == 1
    # past the 30-day limit the id is forgotten (as the observation itself would be)
    store.prune(IDENTITY, now + 21 * MS_PER_DAY)
    assert store.append(IDENTITY, [old]) == 1


def test_erasure_forgets_tombstones(
    full_store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    store = full_store
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    store.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)])
    one_round(store, clock)
    assert store.append(IDENTITY, [old]) == 0
    store.erase(IDENTITY)
    assert store.append(IDENTITY, [old]) == 1


# --- the identity ---------------------------------------------------------------------------
def test_export_is_the_checkpoint_observations_and_facts(
    store: BehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    obs = make_obs("tool_success", "a")
    store.append(IDENTITY, [obs])
    one_round(store, clock)
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
    one_round(store, clock)
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
