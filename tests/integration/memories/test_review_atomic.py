"""Review is atomic and audited, on both stores: approve and reject of one pending memory
released together by a barrier — exactly one wins, the loser gets ``Conflict`` (409), the
winner's audit row is written with it; ``history`` follows the visibility rules."""

from __future__ import annotations

import psycopg
import pytest
from tests.integration.memories.conftest import ADMIN, ALICE, BOB, EVERY_VERSION, Backend
from tests.support.concurrency import race

from engram.errors import Conflict, NotFound
from engram.identity import Caller
from engram.memories.commands import EditMemory, SaveMemory
from engram.memories.models import Memory, Scope, Status

pytestmark = [pytest.mark.integration, EVERY_VERSION]


OTHER = Caller(user_id="carol", team_id="t1", is_team_admin=True)
TRIALS = 20


def test_approve_and_reject_released_together_exactly_one_wins(backend: Backend) -> None:
    svc = backend.service()
    winners = {"approve": 0, "reject": 0}
    for trial in range(TRIALS):
        pending = svc.jobs.propose("t1", "alice", "chef", f"k{trial}", f"value {trial}", 0.8, "c1")
        assert pending is not None
        approve, reject = race(
            lambda p=pending: svc.review.approve(ADMIN, p.id),
            lambda p=pending: svc.review.reject(OTHER, p.id),
        )
        outcomes = [r for r in (approve, reject) if isinstance(r, Memory)]
        losers = [r for r in (approve, reject) if isinstance(r, Exception)]
        assert len(outcomes) == 1, (trial, approve, reject)
        assert len(losers) == 1
        assert isinstance(losers[0], Conflict), losers[0]
        won = outcomes[0]
        action = "approve" if won.status is Status.ACTIVE else "reject"
        winners[action] += 1
        stored = svc.get(ADMIN, pending.id)
        assert stored.status is won.status
        history = svc.review.history(ADMIN, pending.id)
        assert [(a.action, a.actor_id) for a in history] == [
            (action, "root" if action == "approve" else "carol")
        ]
        assert history[0].before is not None
        assert history[0].before["status"] == "pending_review"
        assert history[0].after is not None
        assert history[0].after["status"] == won.status.value
        assert svc.review.history(ALICE, pending.id) == history  # the owner sees it too
    assert sum(winners.values()) == TRIALS
    if backend.url is not None:  # every decision has exactly its one audit row
        with psycopg.connect(backend.url) as conn:
            counts = conn.execute(
                "SELECT count(*), count(DISTINCT memory_id) FROM review_actions"
            ).fetchone()
        assert counts == (TRIALS, TRIALS)


def test_a_decided_memory_answers_conflict_and_an_unknown_one_not_found(backend: Backend) -> None:
    svc = backend.service()
    p = svc.jobs.propose("t1", "alice", None, "pet", "a cat", 0.8, "c1")
    assert p is not None
    svc.review.approve(ADMIN, p.id)
    with pytest.raises(Conflict):
        svc.review.reject(ADMIN, p.id)
    with pytest.raises(Conflict):
        svc.review.approve(ADMIN, p.id)
    with pytest.raises(NotFound):
        svc.review.reject(ADMIN, "00000000-0000-4000-8000-000000000000")
    other_team = Caller(user_id="root", team_id="t2", is_team_admin=True)
    with pytest.raises(NotFound):
        svc.review.approve(other_team, p.id)
    assert [a.action for a in svc.review.history(ALICE, p.id)] == ["approve"]


def test_history_visibility(backend: Backend) -> None:
    svc = backend.service()
    private, _ = svc.save(ALICE, SaveMemory(key="diagnosis", value="private"))
    svc.update(ALICE, private.id, EditMemory(value="still private"))
    assert [a.action for a in svc.review.history(ALICE, private.id)] == ["update"]
    with pytest.raises(NotFound):
        svc.review.history(ADMIN, private.id)  # a user's active user-scope memory is theirs alone
    with pytest.raises(NotFound):
        svc.review.history(BOB, private.id)
    # once deleted, its history stays the owner's
    svc.delete(ALICE, private.id)
    assert [a.action for a in svc.review.history(ALICE, private.id)] == ["update", "delete"]
    with pytest.raises(NotFound):
        svc.review.history(ADMIN, private.id)

    # what admins manage: proposals (pending or rejected), persona and persona_user memories
    proposed = svc.jobs.propose("t1", "alice", None, "hobby", "chess", 0.8, "c1")
    assert proposed is not None
    svc.review.reject(ADMIN, proposed.id)
    assert [a.action for a in svc.review.history(ADMIN, proposed.id)] == ["reject"]
    assert [a.action for a in svc.review.history(ALICE, proposed.id)] == ["reject"]
    pu, _ = svc.save(ALICE, SaveMemory(key="allergy", value="peanuts", persona_id="chef"))
    svc.update(ADMIN, pu.id, EditMemory(value="peanuts and shellfish"))
    assert [a.action for a in svc.review.history(ADMIN, pu.id)] == ["update"]
    assert [a.action for a in svc.review.history(ALICE, pu.id)] == ["update"]
    with pytest.raises(NotFound):
        svc.review.history(BOB, pu.id)
    team, _ = svc.save(
        ADMIN, SaveMemory(key="menu", value="soup", persona_id="chef", scope=Scope.PERSONA)
    )
    svc.update(ADMIN, team.id, EditMemory(value="soup and bread"))
    assert [a.action for a in svc.review.history(OTHER, team.id)] == ["update"]
    with pytest.raises(NotFound):
        svc.review.history(ALICE, team.id)  # persona memories are the team's, not a user's
    with pytest.raises(NotFound):
        svc.review.history(ALICE, "00000000-0000-4000-8000-000000000000")
    approved = svc.jobs.propose("t1", "alice", None, "editor", "vim", 0.8, "c1")
    assert approved is not None
    svc.review.approve(ADMIN, approved.id)  # approved: now the user's active memory
    with pytest.raises(NotFound):
        svc.review.history(ADMIN, approved.id)
    assert [a.action for a in svc.review.history(ALICE, approved.id)] == ["approve"]


def test_admins_cannot_read_or_change_a_users_own_memory(backend: Backend) -> None:
    """What holds for its history holds for the memory itself: a team admin gets 404 on a
    user's own ``user`` memory, active or archived, for reads, edits, archives and deletes;
    a proposal of that user (pending or rejected) is the admin's to read."""
    svc = backend.service()
    private, _ = svc.save(ALICE, SaveMemory(key="diagnosis", value="private"))
    archived, _ = svc.save(ALICE, SaveMemory(key="old", value="gone"))
    svc.archive(ALICE, archived.id)
    for memory_id in (private.id, archived.id):
        with pytest.raises(NotFound):
            svc.get(ADMIN, memory_id)
        with pytest.raises(NotFound):
            svc.update(ADMIN, memory_id, EditMemory(value="read by admin"))
        with pytest.raises(NotFound):
            svc.archive(ADMIN, memory_id)
        with pytest.raises(NotFound):
            svc.delete(ADMIN, memory_id)
    assert svc.get(ALICE, private.id).value == "private"
    assert svc.get(ALICE, archived.id).status is Status.ARCHIVED
    proposed = svc.jobs.propose("t1", "alice", None, "hobby", "chess", 0.8, "c1")
    assert proposed is not None
    assert svc.get(ADMIN, proposed.id).status is Status.PENDING_REVIEW
    svc.review.reject(ADMIN, proposed.id)
    assert svc.get(ADMIN, proposed.id).status is Status.REJECTED
    # an admin's own user memory is theirs
    mine, _ = svc.save(ADMIN, SaveMemory(key="desk", value="3F"))
    assert svc.get(ADMIN, mine.id).value == "3F"
