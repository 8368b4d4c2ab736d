"""The explicit-memory lifecycle on both stores: a rejection stays rejected (retention never
deletes it, an equal proposal is never made again), a person's deletion or archive suppresses
the same key and value, a new value is proposed, and a retention-archived memory may be learnt
again."""

from __future__ import annotations

import pytest
from tests.integration.memories.conftest import ADMIN, ALICE, EVERY_VERSION, Backend

from engram.errors import Conflict, NotFound
from engram.identity import Caller
from engram.maintenance.bridges import MemoryStoreMaintenance
from engram.maintenance.models import RetentionPolicy
from engram.memories.commands import EditMemory, Recall, SaveMemory
from engram.memories.models import Memory, Scope, Status
from engram.memories.service import MemoryService

pytestmark = [pytest.mark.integration, EVERY_VERSION]


def run_every_retention_rule(svc: MemoryService, backend: Backend) -> None:
    """Team and persona rules, archive and delete, twice (so an archived row would go)."""
    maintenance = MemoryStoreMaintenance(svc.jobs, backend.store)
    for _ in range(2):
        backend.clock.advance(days=400)
        now = backend.clock.now_ms()
        svc.jobs.apply_retention("t1", archive_after_days=1, delete_archived_after_days=1, now=now)
        chef = RetentionPolicy(
            team_id="t1", persona_id="chef", archive_after_days=1, delete_archived_after_days=1
        )
        maintenance.apply_persona_retention(chef, now)


def proposal(
    svc: MemoryService,
    key: str,
    value: str,
    *,
    persona: str | None = None,
    scope: str | None = None,
) -> Memory | None:
    return svc.jobs.propose("t1", "alice", persona, key, value, 0.8, "conv-1", scope)


def test_a_rejected_proposal_outlives_retention_and_is_never_proposed_again(
    backend: Backend,
) -> None:
    svc = backend.service()
    shapes: list[tuple[str | None, str | None]] = [
        (None, None),  # user scope
        ("chef", None),  # persona_user scope
        ("chef", "persona"),  # persona scope
    ]
    rejected: list[Memory] = []
    for persona, scope in shapes:
        p = proposal(svc, "hobby", "chess", persona=persona, scope=scope)
        assert p is not None
        decided = svc.review.reject(ADMIN, p.id)
        assert decided.status is Status.REJECTED
        rejected.append(decided)
    run_every_retention_rule(svc, backend)
    for row in rejected:
        kept = svc.get(ADMIN, row.id)
        assert (kept.status, kept.value) == (Status.REJECTED, "chess")
    for persona, scope in shapes:
        assert proposal(svc, "hobby", "chess", persona=persona, scope=scope) is None
        # a new value for the key is proposed; the rejected value still is not
        fresh = proposal(svc, "hobby", "go", persona=persona, scope=scope)
        assert fresh is not None
        assert fresh.status is Status.PENDING_REVIEW
        assert fresh.id not in {r.id for r in rejected}
        assert proposal(svc, "hobby", "chess", persona=persona, scope=scope) is None
    assert svc.recall(ALICE, Recall(query="chess", persona_id="chef")) == []


def test_a_rejected_proposal_cannot_be_edited_back_into_play(backend: Backend) -> None:
    svc = backend.service()
    p = proposal(svc, "diet", "keto")
    assert p is not None
    svc.review.reject(ADMIN, p.id)
    with pytest.raises(Conflict):
        svc.update(ALICE, p.id, EditMemory(value="paleo"))
    with pytest.raises(Conflict):
        svc.archive(ALICE, p.id)
    assert svc.get(ALICE, p.id).status is Status.REJECTED
    # the owner may delete it: the deletion then keeps suppressing the value
    svc.delete(ALICE, p.id)
    run_every_retention_rule(svc, backend)
    assert proposal(svc, "diet", "keto") is None


def test_a_users_deletion_suppresses_the_same_key_and_value(backend: Backend) -> None:
    svc = backend.service()
    saved, _ = svc.save(ALICE, SaveMemory(key="editor", value="vim"))
    svc.delete(ALICE, saved.id)
    learnt = proposal(svc, "pet", "a cat", persona="chef")
    assert learnt is not None
    approved = svc.review.approve(ADMIN, learnt.id)
    assert approved.scope is Scope.PERSONA_USER
    svc.delete(ALICE, approved.id)
    run_every_retention_rule(svc, backend)
    assert proposal(svc, "editor", "vim") is None
    assert proposal(svc, "pet", "a cat", persona="chef") is None
    # the same value in another scope is another memory; a new value is proposed
    assert proposal(svc, "editor", "vim", persona="chef") is not None
    again = proposal(svc, "editor", "helix")
    assert again is not None
    assert again.status is Status.PENDING_REVIEW


def test_a_retention_archived_memory_can_be_learnt_again(backend: Backend) -> None:
    svc = backend.service()
    saved, _ = svc.save(ALICE, SaveMemory(key="city", value="Lyon"))
    backend.clock.advance(days=40)
    now = backend.clock.now_ms()
    assert svc.jobs.apply_retention(
        "t1", archive_after_days=30, delete_archived_after_days=None, now=now
    ) == {"archived": 1, "deleted": 0}
    assert svc.get(ALICE, saved.id).status is Status.ARCHIVED
    learnt = proposal(svc, "city", "Lyon")
    assert learnt is not None
    assert (learnt.id, learnt.status) == (saved.id, Status.PENDING_REVIEW)
    assert svc.review.approve(ADMIN, learnt.id).status is Status.ACTIVE
    assert [m.value for m in svc.recall(ALICE, Recall(query="Lyon"))] == ["Lyon"]


def test_an_archive_by_its_owner_is_a_decision_retention_is_not(backend: Backend) -> None:
    svc = backend.service()
    kept, _ = svc.save(ALICE, SaveMemory(key="job", value="Initech"))
    svc.archive(ALICE, kept.id)
    assert proposal(svc, "job", "Initech") is None
    newer = proposal(svc, "job", "Globex")
    assert newer is not None
    assert newer.id == kept.id  # the key's one live row, now a proposal of the new value


def test_a_new_value_replaces_the_rejected_row_and_the_rejection_holds(backend: Backend) -> None:
    """A key has one row: a new value of a rejected key (proposed or saved) replaces the
    rejected row, and the rejected value stays refused through every later change of the key."""
    svc = backend.service()
    p = proposal(svc, "hobby", "chess")
    assert p is not None
    rejected = svc.review.reject(ADMIN, p.id)
    fresh = proposal(svc, "hobby", "go")
    assert fresh is not None
    assert fresh.id != rejected.id
    with pytest.raises(NotFound):  # replaced
        svc.get(ADMIN, rejected.id)
    assert svc.review.reject(ADMIN, fresh.id).status is Status.REJECTED
    assert proposal(svc, "hobby", "chess") is None
    assert proposal(svc, "hobby", "go") is None
    # the owner's own save of the key is a new memory, not a revived rejection
    saved, created = svc.save(ALICE, SaveMemory(key="hobby", value="bridge"))
    assert created
    assert (saved.status, saved.value) == (Status.ACTIVE, "bridge")
    svc.delete(ALICE, saved.id)
    run_every_retention_rule(svc, backend)
    for value in ("chess", "go", "bridge"):
        assert proposal(svc, "hobby", value) is None
    assert proposal(svc, "hobby", "poker") is not None


def test_renaming_a_key_onto_a_rejected_key_replaces_the_rejected_row(backend: Backend) -> None:
    svc = backend.service()
    p = proposal(svc, "sport", "golf")
    assert p is not None
    svc.review.reject(ADMIN, p.id)
    kept, _ = svc.save(ALICE, SaveMemory(key="games", value="tennis"))
    renamed = svc.update(ALICE, kept.id, EditMemory(key="sport"))
    assert (renamed.id, renamed.key, renamed.value) == (kept.id, "sport", "tennis")
    with pytest.raises(NotFound):
        svc.get(ADMIN, p.id)
    assert proposal(svc, "sport", "golf") is None


@pytest.mark.parametrize("editor", [ADMIN, ALICE], ids=["admin", "owner"])
def test_a_persons_edit_of_a_proposal_holds_when_the_key_is_learnt_again(
    backend: Backend, editor: Caller
) -> None:
    svc = backend.service()
    p = proposal(svc, "location", "Lisbon")
    assert p is not None
    # nobody edited it: learning the key again refreshes the proposal
    refreshed = svc.jobs.propose_outcome("t1", "alice", None, "location", "Lisboa", 0.9, "conv-2")
    assert (refreshed.outcome, refreshed.memory and refreshed.memory.value) == (
        "refreshed",
        "Lisboa",
    )
    svc.update(editor, p.id, EditMemory(value="Lisbon, Portugal"))
    for value in ("Lisboa", "Porto"):  # the same transcript again, and a later one
        again = svc.jobs.propose_outcome("t1", "alice", None, "location", value, 0.9, "conv-3")
        assert (again.outcome, again.memory) == ("dropped", None)
    assert svc.get(ADMIN, p.id).value == "Lisbon, Portugal"
    approved = svc.review.approve(ADMIN, p.id)
    assert (approved.status, approved.value) == (Status.ACTIVE, "Lisbon, Portugal")
    assert {m.key: m.value for m in svc.recall(ALICE, Recall())} == {"location": "Lisbon, Portugal"}


def test_an_edited_memory_that_retention_archived_is_learnt_again(backend: Backend) -> None:
    svc = backend.service()
    p = proposal(svc, "location", "Lisbon")
    assert p is not None
    svc.update(ADMIN, p.id, EditMemory(value="Lisbon, Portugal"))
    svc.review.approve(ADMIN, p.id)
    backend.clock.advance(days=400)
    svc.jobs.apply_retention(
        "t1",
        archive_after_days=1,
        delete_archived_after_days=10_000,
        now=backend.clock.now_ms(),
    )
    assert svc.get(ALICE, p.id).status is Status.ARCHIVED
    learnt = svc.jobs.propose_outcome("t1", "alice", None, "location", "Porto", 0.9, "conv-2")
    assert learnt.outcome == "refreshed"
    assert learnt.memory is not None
    assert (learnt.memory.status, learnt.memory.value) == (Status.PENDING_REVIEW, "Porto")
    # the refresh cleared the earlier edit's mark: the next lesson refreshes it again
    later = svc.jobs.propose_outcome("t1", "alice", None, "location", "Braga", 0.9, "conv-3")
    assert (later.outcome, later.memory and later.memory.value) == ("refreshed", "Braga")
