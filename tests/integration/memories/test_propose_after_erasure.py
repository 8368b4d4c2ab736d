"""A proposal that lands after ``DELETE /v1/me`` creates nothing (review finding): the store
checks the erasure log in the write itself, so an erasure between the extraction job's
``is_erased`` check and its proposal cannot leave a new pending row behind. Both stores."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tests.integration.memories.conftest import Backend
from tests.support import memory_rows

from engram.adapters.erasure_log import InMemoryErasureLog
from engram.adapters.postgres.erasures import PostgresErasureLog
from engram.adapters.postgres.pool import Database
from engram.extraction.models import Proposal, ProposalScope, TranscriptJob
from engram.identity import Caller
from engram.maintenance.ports import ErasureLog
from engram.maintenance.sink import MemoryProposalSink
from engram.memories.models import MemoryFilter
from engram.memories.ports import AccessContext
from engram.memories.privacy import system_context
from engram.memories.service import MemoryService

ALICE = Caller(user_id="alice", team_id="t1")
ADMIN = Caller(user_id="root", team_id="t1", is_team_admin=True)


@pytest.fixture
def log(backend: Backend) -> Iterator[ErasureLog]:
    """The erasure log ``DELETE /v1/me`` writes: PostgreSQL's table next to the PostgreSQL
    store, an in-memory log next to the in-memory store."""
    if backend.url is None:
        yield InMemoryErasureLog()
        return
    db = Database(backend.url, max_size=1, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        yield PostgresErasureLog(db, clock=backend.clock)
    finally:
        db.close()


def _job(queued_at: int, persona_id: str | None = None) -> TranscriptJob:
    return TranscriptJob.new(
        conversation_id="conv-1",
        team_id="t1",
        user_id="alice",
        persona_id=persona_id,
        messages=[{"role": "user", "content": "I am allergic to peanuts"}],
        queued_at=queued_at,
    )


def _proposal(key: str = "allergy", scope: ProposalScope = ProposalScope.USER) -> Proposal:
    return Proposal(
        key=key, value="peanuts", confidence=0.8, scope=scope, source_channel_id="conv-1"
    )


def _erase(svc: MemoryService, log: ErasureLog, backend: Backend) -> None:
    """What ``MeService.erase`` does: record the erasure, then delete the memories."""
    log.record("t1", "alice", backend.clock.now_ms())
    svc.erase(ALICE)


def _rows(backend: Backend) -> list[str]:
    page = memory_rows.list_memories(
        backend.store, system_context("t1"), MemoryFilter(team_id="t1", limit=100)
    )
    return [m.key for m in page.memories]


def test_erasure_between_the_check_and_the_proposal_creates_nothing(
    backend: Backend, log: ErasureLog
) -> None:
    svc = backend.service()
    sink = MemoryProposalSink(svc.jobs, erasures=log)
    job = _job(queued_at=backend.clock.now_ms(), persona_id="chef")
    assert sink.propose(job, _proposal("before")) == "created"  # the job got going
    backend.clock.advance(seconds=1)
    assert not sink.is_erased("t1", "alice", job.queued_at)  # the drain's check passes
    _erase(svc, log, backend)  # DELETE /v1/me lands now
    backend.clock.advance(seconds=1)
    assert sink.propose(job, _proposal("allergy")) == "dropped"
    assert sink.propose(job, _proposal("tone", ProposalScope.PERSONA)) == "dropped"
    assert _rows(backend) == []
    assert list(svc.review.list_pending(ADMIN).memories) == []


def test_an_erasure_at_the_queue_time_counts_and_an_older_one_does_not(
    backend: Backend, log: ErasureLog
) -> None:
    svc = backend.service()
    _erase(svc, log, backend)
    erased_at = backend.clock.now_ms()
    # a transcript queued at the very millisecond of the erasure: refused
    same = svc.jobs.propose_outcome(
        "t1", "alice", None, "allergy", "peanuts", 0.8, None, not_erased_since_ms=erased_at
    )
    assert same.outcome == "dropped"
    assert same.memory is None
    assert _rows(backend) == []
    # a transcript the user sent after their erasure is a new life: proposed as usual
    backend.clock.advance(seconds=5)
    later = svc.jobs.propose_outcome(
        "t1",
        "alice",
        None,
        "allergy",
        "peanuts",
        0.8,
        None,
        not_erased_since_ms=backend.clock.now_ms(),
    )
    assert later.outcome == "created"
    assert _rows(backend) == ["allergy"]
    # another user of the team is not affected by alice's erasure
    bob = svc.jobs.propose_outcome(
        "t1", "bob", None, "editor", "vim", 0.8, None, not_erased_since_ms=erased_at
    )
    assert bob.outcome == "created"


def test_the_guard_also_stops_a_refresh_of_a_pending_row(backend: Backend, log: ErasureLog) -> None:
    svc = backend.service()
    queued = backend.clock.now_ms()
    first = svc.jobs.propose_outcome(
        "t1", "alice", None, "allergy", "peanuts", 0.8, None, not_erased_since_ms=queued
    )
    assert first.outcome == "created"
    backend.clock.advance(seconds=1)
    log.record("t1", "alice", backend.clock.now_ms())  # recorded; memories not yet deleted
    again = svc.jobs.propose_outcome(
        "t1", "alice", None, "allergy", "shellfish", 0.9, None, not_erased_since_ms=queued
    )
    if backend.url is None:
        # the in-memory store only knows its own erase_user unless handed the log
        assert again.outcome == "refreshed"
    else:
        assert again.outcome == "dropped"
        [row] = list(svc.review.list_pending(ADMIN).memories)
        assert row.value == "peanuts"


def test_a_proposal_during_an_erasure_in_flight_waits_for_it_and_is_dropped(
    backend: Backend,
) -> None:
    """An erasure recorded but not yet committed: a proposal about the user waits for it (on
    PostgreSQL, the user's erasure lock; in memory, the store's lock), then sees it and writes
    nothing, rather than reading the log before the erasure commits and leaving a row the
    erasure never saw."""
    svc = backend.service()
    since = backend.clock.now_ms()
    result: dict[str, Any] = {}

    def propose() -> None:
        result["outcome"] = svc.jobs.propose_outcome(
            "t1", "alice", None, "diet", "vegan", 0.8, "c1", not_erased_since_ms=since
        ).outcome

    worker = threading.Thread(target=propose)
    with backend.store(AccessContext(team_id="t1", user_id="alice")) as tx:
        tx.record_erasure("alice", since)
        tx.erase_user("alice")
        worker.start()
        worker.join(0.5)  # time for a proposal that does not wait to finish before the commit
    worker.join(30)
    assert result == {"outcome": "dropped"}
    assert svc.list_memories(ALICE).memories == []
