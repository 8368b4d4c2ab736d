"""Application services over in-memory fakes: session degradation and budgets, ingest ids,
the erasure log."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from engram.adapters.erasure_log import InMemoryErasureLog
from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.api.memory_inputs import PersonaRequest
from engram.api.models import EventsRequest, ObservationsRequest, TranscriptRequest
from engram.behaviour.models import Observation
from engram.behaviour.ports import RoundInput
from engram.behaviour.service import BehaviourService
from engram.clock import FakeClock
from engram.errors import Forbidden, InvalidInput, RateLimited, Unavailable
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory
from engram.memories.service import MemoryService
from engram.settings import Settings
from engram.use_cases.ingest import IngestService
from engram.use_cases.session import SessionService

ALICE = Caller(user_id="alice", team_id="acme")
WINDOWS = {"observation_retention_days": 30, "retry_window_s": 600}


class Queue:
    def __init__(self) -> None:
        self.bodies: list[str] = []

    def send(self, bodies: Sequence[str]) -> int:
        self.bodies.extend(bodies)
        return len(bodies)


def services() -> tuple[BehaviourService, MemoryService]:
    clock = FakeClock()
    store = InMemoryMemoryStore(clock)
    memories = MemoryService(store, settings=Settings(), clock=clock)
    behaviour = BehaviourService(InMemoryBehaviourStore(clock=clock), clock=clock)
    return behaviour, memories


def test_session_has_both_sections_in_order() -> None:
    behaviour, memories = services()
    memories.save(ALICE, SaveMemory(key="editor", value="helix"))
    behaviour.record(
        ALICE.identity_id,
        [
            Observation(
                identity_id=ALICE.identity_id,
                type="query_pattern",
                content="Asked about royalty",
                metadata={"domain": "royalty", "query": "royalty"},
                created_at=FakeClock().now_ms(),
            )
        ],
    )
    context = SessionService(behaviour, memories).start(ALICE)
    assert context.degraded == []
    assert context.prompt == f"{context.facts_section}\n\n{context.memories_section}"
    assert context.prompt.index("royalty") < context.prompt.index("helix")


class SlowMemories(MemoryService):
    def __init__(self, inner: MemoryService, gate: threading.Event) -> None:
        self.__dict__.update(inner.__dict__)
        self.gate = gate

    def recall_each(self, caller: Caller, requests: Any) -> list[list[Any]]:
        self.gate.wait(5)
        return super().recall_each(caller, requests)


class BrokenMemories(MemoryService):
    def __init__(self, inner: MemoryService) -> None:
        self.__dict__.update(inner.__dict__)

    def recall_each(self, caller: Caller, requests: Any) -> list[list[Any]]:
        raise Unavailable("PostgreSQL is unavailable")


def test_slow_recall_degrades_to_memories_timeout() -> None:
    behaviour, memories = services()
    gate = threading.Event()
    service = SessionService(behaviour, SlowMemories(memories, gate), budget_ms=50)
    try:
        context = service.start(ALICE)
    finally:
        gate.set()
        service.close()
    assert context.degraded == ["memories:timeout"]
    assert context.memories == []


def test_failing_recall_degrades_to_memories_unavailable() -> None:
    behaviour, memories = services()
    context = SessionService(behaviour, BrokenMemories(memories)).start(ALICE)
    assert context.degraded == ["memories:unavailable"]
    assert context.memories_section == ""


class BrokenStore(InMemoryBehaviourStore):
    def read_round(self, identity_id: str) -> RoundInput:
        raise ConnectionError("redis is down")


class SlowStore(InMemoryBehaviourStore):
    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.release = threading.Event()

    def read_round(self, identity_id: str) -> RoundInput:
        self.release.wait(self.delay_s)
        return super().read_round(identity_id)


def test_failing_consolidation_degrades_to_behaviour_unavailable() -> None:
    _, memories = services()
    memories.save(ALICE, SaveMemory(key="editor", value="helix"))
    context = SessionService(BehaviourService(BrokenStore()), memories).start(ALICE)
    assert context.degraded == ["behaviour:unavailable"]
    assert (context.facts, context.facts_section, context.tool_affinities) == ([], "", {})
    assert context.prompt == context.memories_section != ""  # the other half is served


def test_one_deadline_for_both_halves() -> None:
    """Both halves slow: the session answers at the one deadline, both degraded."""
    _, memories = services()
    gate = threading.Event()
    store = SlowStore(delay_s=5)
    service = SessionService(BehaviourService(store), SlowMemories(memories, gate), budget_ms=100)
    started = time.monotonic()
    try:
        context = service.start(ALICE)
    finally:
        elapsed = time.monotonic() - started
        store.release.set()
        gate.set()
        service.close()
    assert context.degraded == ["behaviour:timeout", "memories:timeout"]
    assert elapsed < 2.5  # the deadline ended the wait, well before the 5 s stall (CI slack)


def test_ingest_ids_are_deterministic_and_keyed() -> None:
    queue = Queue()
    ingest = IngestService(queue, clock=FakeClock(), **WINDOWS)
    request = ObservationsRequest.model_validate(
        {
            "observations": [
                {
                    "type": "tool_success",
                    "content": "ok",
                    "metadata": {"toolName": "t", "durationMs": 1},
                }
            ]
        }
    )
    first = ingest.accept_observations(ALICE, request.command())
    assert first.ids == ingest.accept_observations(ALICE, request.command()).ids
    assert (
        first.ids != ingest.accept_observations(ALICE, request.command(), idempotency_key="a").ids
    )
    bob = Caller(user_id="bob", team_id="acme")
    assert first.ids != ingest.accept_observations(bob, request.command()).ids
    with pytest.raises(InvalidInput) as err:
        ingest.accept_observations(ALICE, request.command(), idempotency_key="x" * 200)
    assert err.value.field == "Idempotency-Key"


def test_ingest_refuses_created_at_outside_the_retention_window() -> None:
    clock = FakeClock()
    queue = Queue()
    ingest = IngestService(queue, clock=clock, **WINDOWS)
    now, day = clock.now_ms(), 86_400_000
    ok = {"type": "tool_success", "content": "ok", "metadata": {"toolName": "t", "durationMs": 1}}

    def request(created: int) -> ObservationsRequest:
        return ObservationsRequest.model_validate(
            {"observations": [ok, {**ok, "createdAt": created}]}
        )

    for created in (now - 31 * day, now + 5 * 60_000 + 1):
        with pytest.raises(InvalidInput) as err:
            ingest.accept_observations(ALICE, request(created).command())
        assert err.value.field == "observations.1.createdAt"
    assert queue.bodies == []
    for created in (now - 30 * day, now + 5 * 60_000):
        assert ingest.accept_observations(ALICE, request(created).command()).accepted == 2


def test_ingest_without_a_queue_is_unavailable() -> None:
    events = EventsRequest.model_validate({"events": [{"kind": "query", "text": "revenue"}]})
    with pytest.raises(Unavailable):
        IngestService(None, **WINDOWS).accept_events(ALICE, events.command())


def test_in_memory_erasure_log() -> None:
    log = InMemoryErasureLog()
    log.record("acme", "alice", 100)
    log.record("acme", "bob", 50)
    assert log.erased_since("acme", "alice", 100)
    assert not log.erased_since("acme", "alice", 101)
    assert not log.erased_since("other", "alice", 0)
    pending = log.pending_purges(after=None, limit=10)
    assert [(r.user_id, r.erased_at_ms) for r in pending] == [("bob", 50), ("alice", 100)]
    assert [r.user_id for r in log.pending_purges(after=pending[0].key, limit=10)] == ["alice"]
    log.mark_purged("acme", "bob", 50)
    assert [r.user_id for r in log.pending_purges(after=None, limit=10)] == ["alice"]


def test_a_refused_rate_limit_queues_nothing() -> None:
    class Refuse:
        def check(self, identity_id: str, cost: int = 1) -> object:
            raise RateLimited(f"{identity_id} over by {cost}", retry_after_s=3)

    queue = Queue()
    events = EventsRequest.model_validate({"events": [{"kind": "query", "text": "revenue"}]})
    with pytest.raises(RateLimited):
        IngestService(queue, limiter=Refuse(), **WINDOWS).accept_events(ALICE, events.command())
    assert queue.bodies == []


def test_a_session_recalls_in_one_unit_of_work() -> None:
    """With a query and a persona: the access check (persona and team switches) and both
    recalls (the hint's and the query's) run in one unit of work."""
    clock = FakeClock()
    store = InMemoryMemoryStore(clock)
    memories = MemoryService(store, settings=Settings(), clock=clock)
    admin = Caller(user_id="root", team_id="acme", is_team_admin=True)
    memories.personas.put_persona(admin, PersonaRequest().command("helper"))
    memories.save(ALICE, SaveMemory(key="editor", value="helix", persona_id="helper"))
    before = store.transactions
    behaviour = BehaviourService(InMemoryBehaviourStore(clock=clock), clock=clock)
    context = SessionService(behaviour, memories).start(ALICE, persona_id="helper", query="editor")
    assert context.degraded == []
    assert [m.key for m in context.memories] == ["editor"]
    assert "helix" in context.memories_section
    assert store.transactions == before + 1


def test_recall_each_refuses_two_personas() -> None:
    _, memories = services()
    with pytest.raises(ValueError, match="same persona"):
        memories.recall_each(
            ALICE,
            [Recall(persona_id="a"), Recall(persona_id="b")],
        )


def test_a_transcript_naming_a_persona_is_checked_before_it_is_charged_or_queued() -> None:
    clock = FakeClock()
    store = InMemoryMemoryStore(clock)
    memories = MemoryService(store, settings=Settings(), clock=clock)
    admin = Caller(user_id="root", team_id="acme", is_team_admin=True)
    memories.personas.put_persona(admin, PersonaRequest(allowed_groups=["staff"]).command("closed"))
    charged: list[int] = []

    class Limiter:
        def check(self, identity_id: str, cost: int = 1) -> None:
            charged.append(cost)

    queue = Queue()
    ingest = IngestService(
        None,
        extraction_queue=queue,
        clock=clock,
        limiter=Limiter(),
        persona_access=memories.core.check_persona_access,
        **WINDOWS,
    )
    messages = [{"role": "user", "content": "I use helix"}]
    closed = TranscriptRequest.model_validate({"personaId": "closed", "messages": messages})
    with pytest.raises(Forbidden):
        ingest.queue_transcript(ALICE, closed.command("c1"))
    assert (charged, queue.bodies) == ([], [])
    open_ = TranscriptRequest.model_validate({"messages": messages})
    ingest.queue_transcript(ALICE, open_.command("c1"))
    assert (charged, len(queue.bodies)) == ([1], 1)
    unchecked = IngestService(None, extraction_queue=queue, clock=clock, **WINDOWS)
    with pytest.raises(Unavailable):
        unchecked.queue_transcript(ALICE, closed.command("c1"))
    assert len(queue.bodies) == 1
