"""BehaviourService: load_memory degrades (never raises), emit/drain, durable record."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from tests.support.observations import IDENTITY, MakeObs

from engram import InMemoryBehaviourStore
from engram.behaviour.inputs import QueryEvent, ToolEvent
from engram.behaviour.ports import RoundInput
from engram.behaviour.service import BehaviourService, MemoryLoad
from engram.clock import FakeClock
from engram.errors import InvalidInput, Unavailable


class Broken(InMemoryBehaviourStore):
    def read_round(self, identity_id: str) -> RoundInput:
        raise ConnectionError("redis is down")

    def append(self, identity_id: str, observations: Any) -> int:
        raise ConnectionError("redis is down")


class Slow(InMemoryBehaviourStore):
    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.release = threading.Event()

    def read_round(self, identity_id: str) -> RoundInput:
        self.release.wait(self.delay_s)
        return super().read_round(identity_id)


def test_load_memory_returns_facts_prompt_and_affinities(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    svc.record(
        IDENTITY, [make_obs("tool_success", "get_account"), make_obs("tool_failure", "slow_tool")]
    )
    load = svc.load_memory(IDENTITY)
    assert isinstance(load, MemoryLoad)
    assert load.degraded == []
    assert {f.subject for f in load.facts} == {
        "tool_affinity:get_account",
        "tool_avoidance:slow_tool",
    }
    assert load.prompt_section.startswith("## What you know about this user")
    assert load.tool_affinities == {"get_account": 0.5, "slow_tool": -0.5}
    svc.close()


def test_load_memory_degrades_when_the_store_fails(clock: FakeClock) -> None:
    svc = BehaviourService(Broken(), clock=clock)
    load = svc.load_memory(IDENTITY)
    assert load == MemoryLoad(degraded=["behaviour:unavailable"])
    svc.close()


def test_load_memory_degrades_on_timeout_within_budget_plus_slack(clock: FakeClock) -> None:
    store = Slow(delay_s=5)
    svc = BehaviourService(store, clock=clock, consolidation_budget_ms=100)
    started = time.monotonic()
    load = svc.load_memory(IDENTITY)
    elapsed = time.monotonic() - started
    store.release.set()
    assert load.degraded == ["behaviour:timeout"]
    assert load.facts == []
    assert load.prompt_section == ""
    assert elapsed < 0.1 + 0.4  # budget plus a generous slack, far below the 5 s stall
    svc.close()


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


def test_emit_is_fire_and_forget_and_drain_waits(clock: FakeClock, make_obs: MakeObs) -> None:
    gate = threading.Event()

    class Gated(InMemoryBehaviourStore):
        def append(self, identity_id: str, observations: Any) -> int:
            gate.wait(5)
            return super().append(identity_id, observations)

    store = Gated()
    svc = BehaviourService(store, clock=clock)
    for i in range(5):
        svc.emit(IDENTITY, make_obs("tool_success", f"t{i}"))
    assert svc.in_flight == 5
    assert store.since(IDENTITY, None) == []
    gate.set()
    svc.drain(timeout_s=5)
    assert svc.in_flight == 0
    assert len(store.since(IDENTITY, None)) == 5
    svc.close()


def test_emit_swallows_failures_and_bounds_in_flight(clock: FakeClock, make_obs: MakeObs) -> None:
    svc = BehaviourService(Broken(), clock=clock)
    svc.emit(IDENTITY, make_obs("tool_success", "a"))  # does not raise
    svc.drain(timeout_s=5)
    assert svc.failed == 1

    gate = threading.Event()

    class Gated(InMemoryBehaviourStore):
        def append(self, identity_id: str, observations: Any) -> int:
            gate.wait(5)
            return super().append(identity_id, observations)

    svc2 = BehaviourService(Gated(), clock=clock, max_in_flight=3)
    for i in range(10):
        svc2.emit(IDENTITY, make_obs("tool_success", f"t{i}"))
    assert svc2.in_flight == 3
    assert svc2.dropped == 7
    gate.set()
    svc2.drain(timeout_s=5)
    svc.close()
    svc2.close()


def test_list_forget_export_erase(clock: FakeClock, make_obs: MakeObs) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    svc.record(IDENTITY, [make_obs("tool_success", "a"), make_obs("query_pattern", "royalty")])
    svc.load_memory(IDENTITY)
    clock.advance(days=2)
    facts = svc.list_facts(IDENTITY)
    assert {f.subject for f in facts} == {"tool_affinity:a", "domain_preference:royalty"}
    assert all(f.confidence == pytest.approx(0.5 * 0.95**2) for f in facts)
    assert svc.forget_fact(IDENTITY, "fact:tool_affinity:a") is True
    assert svc.forget_fact(IDENTITY, "fact:tool_affinity:a") is False
    exported = svc.export(IDENTITY)
    assert [f["subject"] for f in exported["facts"]] == ["domain_preference:royalty"]
    assert exported["facts"][0]["confidence"] == 0.5
    assert exported["currentFacts"][0]["confidence"] == pytest.approx(0.5 * 0.95**2)
    assert len(exported["observations"]) == 2
    assert svc.erase(IDENTITY) == {"observations": 2, "facts": 1}
    assert svc.list_facts(IDENTITY) == []
    svc.close()


def test_observations_from_events_then_record(clock: FakeClock) -> None:
    svc = BehaviourService(InMemoryBehaviourStore(), clock=clock)
    obs = svc.observations_from_events(
        IDENTITY,
        [
            QueryEvent(text="revenue by product"),
            ToolEvent(tool_name="get_account", ok=True, duration_ms=3, result={"id": "A"}),
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
                [QueryEvent(text="revenue by product")],
                now_ms=clock.now_ms(),
                batch_id="req-1",
            ),
        )
        == 0
    )
    subjects = {f.subject for f in svc.load_memory(IDENTITY).facts}
    assert subjects == {
        "domain_preference:revenue",
        "domain_preference:product",
        "tool_affinity:get_account",
        "entity_frequency:account:A",
    }
    svc.close()


def test_in_memory_remove_if_empty(clock: FakeClock, make_obs: MakeObs) -> None:
    store = InMemoryBehaviourStore(clock=clock)
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    assert store.remove_if_empty(IDENTITY) is False
    store.prune(IDENTITY, clock.now_ms() + 1)
    assert store.remove_if_empty(IDENTITY) is True
    assert store.list_identities() == ([], 0)
