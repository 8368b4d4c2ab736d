"""The proposal sink reports what the memory service did (created, refreshed, dropped) from
the write itself."""

from __future__ import annotations

from engram.adapters.erasure_log import InMemoryErasureLog
from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.clock import FakeClock
from engram.extraction.models import Proposal, ProposalScope, TranscriptJob
from engram.identity import Caller
from engram.maintenance.sink import MemoryProposalSink
from engram.memories.models import Memory, Status
from engram.memories.service import MemoryService
from engram.settings import Settings

ADMIN = Caller(user_id="root", team_id="t1", is_team_admin=True)


def _job() -> TranscriptJob:
    return TranscriptJob.new(
        conversation_id="conv-1",
        team_id="t1",
        user_id="alice",
        messages=[{"role": "user", "content": "I am allergic to peanuts"}],
        queued_at=1,
    )


def _proposal(key: str, value: str) -> Proposal:
    return Proposal(
        key=key,
        value=value,
        confidence=0.8,
        scope=ProposalScope.USER,
        source_channel_id="conv-1",
    )


def _service(**settings: object) -> MemoryService:
    store = InMemoryMemoryStore(FakeClock())
    return MemoryService(store, settings=Settings(**settings), clock=FakeClock())  # type: ignore[arg-type]


def _pending(service: MemoryService) -> list[Memory]:
    return list(service.review.list_pending(ADMIN).memories)


def test_created_then_refreshed_then_a_change_once_approved() -> None:
    service = _service()
    sink = MemoryProposalSink(service.jobs)
    assert sink.propose(_job(), _proposal("allergy", "peanuts")) == "created"
    assert sink.propose(_job(), _proposal("allergy", "peanuts and shellfish")) == "refreshed"
    [pending] = _pending(service)
    assert (pending.value, pending.status) == ("peanuts and shellfish", Status.PENDING_REVIEW)
    service.review.approve(ADMIN, pending.id)
    # the approved value again is nothing new; another value is a change proposal
    assert sink.propose(_job(), _proposal("allergy", "peanuts and shellfish")) == "dropped"
    assert sink.propose(_job(), _proposal("allergy", "nothing")) == "created"
    assert sink.propose(_job(), _proposal("allergy", "nothing at all")) == "refreshed"


def test_rejected_key_is_dropped_and_memory_off_drops_everything() -> None:
    service = _service()
    sink = MemoryProposalSink(service.jobs)
    assert sink.propose(_job(), _proposal("pet", "a cat")) == "created"
    service.review.reject(ADMIN, _pending(service)[0].id)
    assert sink.propose(_job(), _proposal("pet", "a cat")) == "dropped"
    assert (
        MemoryProposalSink(_service(memory_enabled=False).jobs).propose(
            _job(), _proposal("pet", "a dog")
        )
        == "dropped"
    )


def test_propose_outcome_returns_the_stored_memory_and_propose_stays_compatible() -> None:
    service = _service()
    first = service.jobs.propose_outcome("t1", "alice", None, "editor", "nano", 0.6, "c1")
    assert first.outcome == "created"
    assert first.memory is not None
    assert first.memory.source_channel_id == "c1"
    again = service.jobs.propose("t1", "alice", None, "editor", "vim", 0.7, "c2")
    assert again is not None
    assert again.id == first.memory.id
    assert again.value == "vim"
    service.review.approve(ADMIN, first.memory.id)
    assert service.jobs.propose("t1", "alice", None, "editor", "vim", 0.7, "c3") is None
    dropped = service.jobs.propose_outcome("t1", "alice", None, "editor", "vim", 0.7, "c3")
    assert (dropped.outcome, dropped.memory) == ("dropped", None)


def test_a_proposal_after_the_users_erasure_creates_nothing() -> None:
    clock = FakeClock(10_000)
    log = InMemoryErasureLog()
    store = InMemoryMemoryStore(clock, erasures=log)
    service = MemoryService(store, settings=Settings(), clock=clock)
    sink = MemoryProposalSink(service.jobs, erasures=log)
    job = _job()  # queued at 1
    assert not sink.is_erased("t1", "alice", job.queued_at)  # the drain's check passes
    log.record("t1", "alice", 5_000)  # DELETE /v1/me lands between the check and the write
    assert sink.propose(job, _proposal("allergy", "peanuts")) == "dropped"
    assert _pending(service) == []
    # another user of the team, and alice's transcripts queued after the erasure, go through
    bob = job.model_copy(update={"user_id": "bob"})
    assert sink.propose(bob, _proposal("allergy", "peanuts")) == "created"
    later = job.model_copy(update={"queued_at": 5_001})
    assert sink.propose(later, _proposal("editor", "vim")) == "created"
