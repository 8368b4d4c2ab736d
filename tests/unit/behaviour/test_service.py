"""BehaviourService: load (facts, prompt section, affinities), durable record, reads.

How a session degrades when the store is down or slow: tests/unit/use_cases/test_session.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tests.support.observations import IDENTITY, MakeObs

from engram import InMemoryBehaviourStore
from engram.behaviour.commands import QueryAsked, ToolRan
from engram.behaviour.models import Observation
from engram.behaviour.ports import RoundInput
from engram.behaviour.service import BehaviourContext, BehaviourService
from engram.clock import FakeClock
from engram.errors import InvalidInput, NotFound, Unavailable


class Broken(InMemoryBehaviourStore):
    def read_round(self, identity_id: str) -> RoundInput:
        raise ConnectionError("redis is down")

    def append(self, identity_id: str, observations: Any) -> int:
        raise ConnectionError("redis is down")


def test_load_returns_facts_prompt_and_affinities(clock: FakeClock, make_obs: MakeObs) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    svc.record(
        IDENTITY, [make_obs("tool_success", "get_account"), make_obs("tool_failure", "slow_tool")]
    )
    load = svc.load(IDENTITY)
    assert isinstance(load, BehaviourContext)
    assert {f.subject for f in load.facts} == {
        "tool_affinity:get_account",
        "tool_avoidance:slow_tool",
    }
    assert load.prompt_section.startswith("## What you know about this user")
    assert load.tool_affinities == {"get_account": 0.5, "slow_tool": -0.5}


def test_load_raises_on_store_trouble(clock: FakeClock) -> None:
    with pytest.raises(ConnectionError):
        BehaviourService(Broken(), clock=clock).load(IDENTITY)


def test_record_is_durable_and_idempotent(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore()
    svc = BehaviourService(store, clock=clock)
    batch = [make_obs("tool_success", "a"), make_obs("tool_success", "b")]
    assert svc.record(IDENTITY, batch) == 2
    assert svc.record(IDENTITY, batch) == 0  # a redelivered message adds nothing
    assert len(store.since(IDENTITY, None)) == 2


def test_record_drops_observations_older_than_retention(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore()
    svc = BehaviourService(store, clock=clock, observation_retention_days=7)
    day = 86_400_000
    aged = make_obs("tool_success", "a", at=clock.now_ms() - 8 * day)
    fresh = make_obs("tool_success", "b", at=clock.now_ms() - 6 * day)
    assert svc.record(IDENTITY, [aged, fresh]) == 1
    assert [o.id for o in store.since(IDENTITY, None)] == [fresh.id]
    # a late redelivery of only aged observations stores nothing and does not raise
    assert svc.record(IDENTITY, [aged]) == 0
    assert len(store.since(IDENTITY, None)) == 1


def test_record_raises_unavailable_on_store_trouble(clock: FakeClock, make_obs: MakeObs) -> None:
    svc = BehaviourService(Broken(), clock=clock)
    with pytest.raises(Unavailable):
        svc.record(IDENTITY, [make_obs("tool_success", "a")])


def test_record_refuses_observations_of_another_identity(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    store = InMemoryBehaviourStore()
    svc = BehaviourService(store, clock=clock)
    with pytest.raises(InvalidInput) as err:
        svc.record(
            IDENTITY, [make_obs("tool_success", "a"), make_obs("tool_success", "b", identity="x:y")]
        )
    assert err.value.field == "observations.1.identityId"
    assert store.since(IDENTITY, None) == []


def test_list_forget_export_erase(clock: FakeClock, make_obs: MakeObs) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    svc.record(IDENTITY, [make_obs("tool_success", "a"), make_obs("query_pattern", "royalty")])
    svc.load(IDENTITY)
    clock.advance(days=2)
    facts = svc.list_facts(IDENTITY)
    assert {f.subject for f in facts} == {"tool_affinity:a", "domain_preference:royalty"}
    assert all(f.confidence == pytest.approx(0.5 * 0.95**2) for f in facts)
    svc.forget_fact(IDENTITY, "fact:tool_affinity:a")
    with pytest.raises(NotFound):
        svc.forget_fact(IDENTITY, "fact:tool_affinity:a")
    exported = svc.export(IDENTITY)
    assert [f["subject"] for f in exported["facts"]] == ["domain_preference:royalty"]
    assert exported["facts"][0]["confidence"] == 0.5
    assert exported["currentFacts"][0]["confidence"] == pytest.approx(0.5 * 0.95**2)
    assert len(exported["observations"]) == 2
    assert svc.erase(IDENTITY) == {"observations": 2, "facts": 1}
    assert svc.list_facts(IDENTITY) == []


def test_observations_from_events_then_record(clock: FakeClock) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    obs = svc.observations_from_events(
        IDENTITY,
        [
            QueryAsked(text="revenue by product"),
            ToolRan(tool_name="get_account", ok=True, duration_ms=3, result={"id": "A"}),
        ],
        now_ms=clock.now_ms(),
        batch_id="req-1",
    )
    assert svc.record(IDENTITY, obs) == 4
    assert (
        svc.record(
            IDENTITY,
            svc.observations_from_events(
                IDENTITY,
                [QueryAsked(text="revenue by product")],
                now_ms=clock.now_ms(),
                batch_id="req-1",
            ),
        )
        == 0
    )
    subjects = {f.subject for f in svc.load(IDENTITY).facts}
    assert subjects == {
        "domain_preference:revenue",
        "domain_preference:product",
        "tool_affinity:get_account",
        "entity_frequency:account:A",
    }


def test_in_memory_remove_if_empty(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore(clock=clock)
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    assert store.remove_if_empty(IDENTITY) is False
    store.prune(IDENTITY, clock.now_ms() + 1)
    assert store.remove_if_empty(IDENTITY) is True
    assert store.list_identities() == ([], 0)


def test_derived_append_many_reports_each_identity(clock: FakeClock, make_obs: MakeObs) -> None:
    class Flaky(InMemoryBehaviourStore):
        def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
            if identity_id == "team-a:down":
                raise ConnectionError("down")
            return super().append(identity_id, observations)

    store = Flaky(clock=clock)
    up, down = "team-a:up", "team-a:down"
    got = store.append_many(
        {
            down: [make_obs("tool_success", "a", identity=down)],
            up: [make_obs("tool_success", "a", identity=up)],
        }
    )
    assert got[up] == 1
    assert isinstance(got[down], ConnectionError)
    assert len(store.since(up, None)) == 1


def test_the_three_store_shapes_still_answer_isinstance() -> None:
    from engram import InMemoryCheckpointStore, InMemoryFactRepository, InMemoryObservationLog
    from engram.behaviour.ports import CheckpointStore, FactRepository, ObservationLog

    store = InMemoryBehaviourStore()
    assert isinstance(store, ObservationLog)
    assert isinstance(store, FactRepository)
    assert isinstance(store.checkpoints, CheckpointStore)
    assert isinstance(InMemoryObservationLog(), ObservationLog)
    assert isinstance(InMemoryFactRepository(), FactRepository)
    assert isinstance(InMemoryCheckpointStore(), CheckpointStore)
    assert not isinstance(object(), ObservationLog)
