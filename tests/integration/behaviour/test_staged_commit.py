"""The fast consolidation paths on a real redis-server: the staged fact-set commit (whole new
fact set written to a stage hash and renamed over the facts in one MULTI/EXEC), head-only
re-encoding of stored facts, and reading facts stored in the older (pydantic) layout."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from tests.support.facts import make_fact
from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import commit, one_round, plan
from tests.support.services import APP_PREFIX, RedisTarget

from engram import AdaptiveDecay, ExponentialDecay, Fact
from engram.adapters.redis_behaviour import RedisBehaviourStore, encode_fact
from engram.behaviour.ports import RoundInput
from engram.clock import MS_PER_DAY, FakeClock

NEVER, ALWAYS = 10**9, 0


def stored_rows(client: redis.Redis, store: RedisBehaviourStore) -> dict[str, dict[str, Any]]:
    rows = client.hgetall(store.keys(IDENTITY).facts)
    return {k.decode(): json.loads(v) for k, v in rows.items()}  # type: ignore[union-attr]


def mixed_batch(make_obs: MakeObs, n: int, *, offset: int = 0) -> list[Any]:
    out = []
    for i in range(n):
        k = (i + offset) % 4
        if k == 0:
            out.append(make_obs("tool_success", f"tool_{i % 17}"))
        elif k == 1:
            out.append(make_obs("tool_failure", f"tool_{i % 13}"))
        elif k == 2:
            out.append(make_obs("entity_access", ("account", f"A-{i % 11}", f"Acme {i % 11}")))
        else:
            out.append(make_obs("query_pattern", f"domain_{i % 7}"))
    return out


@pytest.mark.parametrize("decay", [ExponentialDecay(), AdaptiveDecay()], ids=["exp", "adaptive"])
def test_staged_and_script_argument_commits_store_and_return_the_same_facts(
    client: redis.Redis, clock: FakeClock, make_obs: MakeObs, decay: Any
) -> None:
    staged = RedisBehaviourStore(client, prefix=f"{APP_PREFIX}:staged", clock=clock)
    staged.stage_min_upserts = ALWAYS
    scripted = RedisBehaviourStore(client, prefix=f"{APP_PREFIX}:scripted", clock=clock)
    scripted.stage_min_upserts = NEVER
    for round_no in range(4):
        batch = mixed_batch(make_obs, 60 + 10 * round_no, offset=round_no)
        staged.append(IDENTITY, batch)
        scripted.append(IDENTITY, batch)
        a, b = one_round(staged, clock, decay), one_round(scripted, clock, decay)
        assert [f.model_dump() for f in a] == [f.model_dump() for f in b]
        assert stored_rows(client, staged) == stored_rows(client, scripted)
        for store in (staged, scripted):  # head-only re-encoding writes what encode_fact does
            for raw in client.hvals(store.keys(IDENTITY).facts):  # type: ignore[union-attr]
                assert raw == encode_fact(Fact.model_validate_json(raw))
        assert client.exists(staged.stage_key(IDENTITY)) == 0  # never outlives the commit
        clock.advance(days=2)
    counts = {f.subject: f.reinforcement_count for f in staged.get(IDENTITY)}
    assert counts["tool_affinity:tool_0"] == 4  # once per round, however many observations


def test_staged_commit_counts_observations_arriving_after_the_read_exactly_once(
    client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    late = [make_obs("tool_success", "tool_0"), make_obs("tool_success", "late_tool")]

    class LateArrivals(RedisBehaviourStore):
        def read_round(self, identity_id: str) -> RoundInput:
            read = super().read_round(identity_id)
            if late:
                self.append(identity_id, [late.pop(0), late.pop(0)])  # after the read
            return read

    store = LateArrivals(client, clock=clock)
    store.stage_min_upserts = ALWAYS
    store.append(IDENTITY, mixed_batch(make_obs, 40))
    first = {f.subject: f for f in one_round(store, clock)}
    assert "tool_affinity:late_tool" not in first  # arrived after the read: next round
    assert first["tool_affinity:tool_0"].reinforcement_count == 1
    assert store.read_round(IDENTITY).observation_count == 2  # exactly the late two pending
    second = {f.subject: f for f in one_round(store, clock)}
    assert second["tool_affinity:late_tool"].reinforcement_count == 1
    assert second["tool_affinity:tool_0"].reinforcement_count == 2
    assert store.read_round(IDENTITY).observation_count == 0
    assert {f.subject: f.reinforcement_count for f in one_round(store, clock)} == {
        s: f.reinforcement_count for s, f in second.items()
    }


def test_a_fenced_staged_commit_changes_nothing_and_leaves_no_stage(
    store: RedisBehaviourStore, client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.stage_min_upserts = ALWAYS
    store.append(IDENTITY, mixed_batch(make_obs, 40))
    one_round(store, clock)
    store.append(IDENTITY, mixed_batch(make_obs, 40))
    read = store.read_round(IDENTITY)
    upserts, deletes = plan(read, clock, round_cursor=9)
    assert store.delete_fact(IDENTITY, "fact:tool_affinity:tool_0")  # a concurrent change
    before = stored_rows(client, store)
    assert not commit(store, read, clock, upserts=upserts, deletes=deletes)
    assert stored_rows(client, store) == before
    assert client.exists(store.stage_key(IDENTITY)) == 0
    assert store.read_round(IDENTITY).observation_count == 40  # still pending


def test_an_erasure_between_read_and_staged_commit_leaves_nothing(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.stage_min_upserts = ALWAYS
    store.append(IDENTITY, mixed_batch(make_obs, 40))
    read = store.read_round(IDENTITY)
    upserts, deletes = plan(read, clock, round_cursor=9)
    store.erase(IDENTITY)
    assert not commit(store, read, clock, upserts=upserts, deletes=deletes)
    assert [k for k in redis_target.key_names() if b"{" + IDENTITY.encode() + b"}" in k] == []


def test_a_staged_commit_that_leaves_no_fact_deletes_the_fact_set(
    store: RedisBehaviourStore, client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.stage_min_upserts = ALWAYS
    store.append(IDENTITY, [make_obs("tool_success", "a"), make_obs("query_pattern", "x")])
    one_round(store, clock)
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    read = store.read_round(IDENTITY)
    assert commit(store, read, clock, deletes=[f.id for f in read.facts])
    assert store.get(IDENTITY) == []
    assert client.exists(store.keys(IDENTITY).facts, store.stage_key(IDENTITY)) == 0


def test_facts_stored_in_the_older_layout_are_read_and_rewritten(
    store: RedisBehaviourStore, client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    """Facts written before the head-first layout (``Fact.to_storage_json``: id first, no
    null fields) are read as before and re-encoded in full when a round changes them."""
    old = make_fact(
        "tool_affinity:a",
        identity=IDENTITY,
        content='Tool "a" works well for this user',
        confidence=0.7,
        count=3,
        at=clock.now_ms() - MS_PER_DAY,
        created_at=clock.now_ms() - 10 * MS_PER_DAY,
    )
    untouched = old.model_copy(
        update={"id": "fact:domain_preference:x", "subject": "domain_preference:x"}
    )
    client.hset(
        store.keys(IDENTITY).facts,
        mapping={f.id: f.to_storage_json() for f in (old, untouched)},
    )
    assert {f.id: f for f in store.get(IDENTITY)} == {f.id: f for f in (old, untouched)}
    for stage_min in (NEVER, ALWAYS):
        store.stage_min_upserts = stage_min
        store.append(IDENTITY, [make_obs("tool_success", "a")])
        one_round(store, clock)
        clock.advance(ms=1)
    facts = {f.id: f for f in store.get(IDENTITY)}
    assert facts[old.id].reinforcement_count == 5
    assert facts[old.id].content == old.content
    assert facts[old.id].created_at == old.created_at
    assert facts[untouched.id] == untouched  # stored bytes kept as they were
    raw = client.hget(store.keys(IDENTITY).facts, old.id)
    assert isinstance(raw, bytes)
    assert raw.startswith(b'{"confidence":')
    assert raw == encode_fact(facts[old.id])


@pytest.mark.parametrize("stage_min", [NEVER, ALWAYS], ids=["script", "staged"])
def test_a_changed_unchanging_field_is_never_replaced_by_the_stored_bytes(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs, stage_min: int
) -> None:
    """The stored bytes of id/identity/category/subject/content/createdAt are reused only
    for a fact whose values of those are the ones read."""
    store.stage_min_upserts = stage_min
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    one_round(store, clock)
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    read = store.read_round(IDENTITY)
    (fact,) = read.facts
    edited = fact.evolve(content="Edited content", reinforcement_count=7)
    assert commit(store, read, clock, upserts=[edited])
    (after,) = store.get(IDENTITY)
    assert after.content == "Edited content"
    assert after.reinforcement_count == 7


def test_stored_facts_keep_the_camel_case_json_fields(
    store: RedisBehaviourStore, client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, mixed_batch(make_obs, 40))
    one_round(store, clock)
    for row in stored_rows(client, store).values():
        assert Fact.model_validate(row).model_dump(by_alias=True, exclude_none=True) == {
            k: v for k, v in row.items() if v is not None
        }
