"""Erasure also clears the review audit trail (on both adapters): rows about the erased
user's memories go (they hold before/after copies of the values); rows where the user acted
on memories that stay keep their copies but lose the actor's id."""

from __future__ import annotations

import psycopg
import pytest
from tests.integration.memories.conftest import Backend
from tests.support import memory_rows

from engram.errors import NotFound
from engram.identity import Caller
from engram.maintenance.bridges import MemoryStoreMaintenance
from engram.memories.commands import Approve, EditMemory, SaveMemory
from engram.memories.models import ERASED_ACTOR, Scope
from engram.memories.ports import AccessContext

ALICE = Caller(user_id="alice", team_id="t1")
ALICE_ADMIN = Caller(user_id="alice", team_id="t1", is_team_admin=True)
BOB = Caller(user_id="bob", team_id="t1")
ROOT = Caller(user_id="root", team_id="t1", is_team_admin=True)
AUDITOR = AccessContext("t1", "auditor", elevated=True)


def test_erasure_clears_the_audit_of_the_users_memories_and_their_actor_id(
    backend: Backend,
) -> None:
    svc = backend.service()
    # alice's own memories: edited, deleted, and one proposal a team admin approved
    kept, _ = svc.save(ALICE, SaveMemory(key="diagnosis", value="private medical detail"))
    svc.update(ALICE, kept.id, EditMemory(value="another private detail"))
    gone, _ = svc.save(ALICE, SaveMemory(key="address", value="private street 1"))
    svc.update(ALICE, gone.id, EditMemory(value="private street 2"))
    svc.delete(ALICE, gone.id)
    proposal = svc.jobs.propose("t1", "alice", "chef", "allergy", "private peanuts", 0.8, "c1")
    assert proposal is not None
    assert proposal.scope is Scope.PERSONA_USER
    svc.review.approve(ROOT, proposal.id)
    # bob's memory, edited by bob and (as a team admin) reviewed by alice: stays
    bobs = svc.jobs.propose("t1", "bob", None, "pet", "a cat", 0.8, "c2")
    assert bobs is not None
    svc.review.approve(ALICE_ADMIN, bobs.id, Approve(value="a black cat"))
    svc.update(BOB, bobs.id, EditMemory(value="two cats"))
    team_memory, _ = svc.save(
        ROOT, SaveMemory(key="menu", value="soup", persona_id="chef", scope=Scope.PERSONA)
    )
    svc.update(ALICE_ADMIN, team_memory.id, EditMemory(value="soup and bread"))

    svc.erase(ALICE)

    for memory_id in (kept.id, gone.id, proposal.id):
        assert memory_rows.list_actions(backend.store, AUDITOR, memory_id) == []
    bob_trail = memory_rows.list_actions(backend.store, AUDITOR, bobs.id)
    assert [(a.action, a.actor_id) for a in bob_trail] == [
        ("approve", ERASED_ACTOR),
        ("update", "bob"),
    ]
    assert bob_trail[1].after is not None
    assert bob_trail[1].after["value"] == "two cats"
    menu_trail = memory_rows.list_actions(backend.store, AUDITOR, team_memory.id)
    assert [(a.action, a.actor_id) for a in menu_trail] == [("update", ERASED_ACTOR)]
    if backend.url is not None:  # nothing left in the table itself, whatever the RLS
        with psycopg.connect(backend.url) as conn:
            left = conn.execute(
                "SELECT count(*) FROM review_actions WHERE actor_id = 'alice'"
                " OR before::text LIKE '%private%' OR after::text LIKE '%private%'"
            ).fetchone()
        assert left == (0,)


def test_erasure_leaves_other_teams_audit_alone(backend: Backend) -> None:
    svc = backend.service()
    other = Caller(user_id="alice", team_id="t2")
    mine, _ = svc.save(other, SaveMemory(key="k", value="v1"))
    svc.update(other, mine.id, EditMemory(value="v2"))
    svc.erase(ALICE)  # alice of t1
    trail = memory_rows.list_actions(
        backend.store, AccessContext("t2", "auditor", elevated=True), mine.id
    )
    assert [(a.action, a.actor_id) for a in trail] == [("update", "alice")]


def test_the_erasure_backstop_purges_what_was_learnt_before_the_erasure(backend: Backend) -> None:
    """The maintenance job's purge of late leftovers reaches persona memories learnt from the
    user, as ``DELETE /v1/me`` does, and keeps what the user taught after coming back."""
    svc = backend.service()
    early = svc.jobs.propose("t1", "alice", "chef", "faq", "users ask x", 0.8, "c1", "persona")
    own = svc.jobs.propose("t1", "alice", "chef", "diet", "vegan", 0.8, "c1")
    bobs = svc.jobs.propose("t1", "bob", "chef", "faq2", "users ask y", 0.8, "c2", "persona")
    assert early is not None
    assert own is not None
    assert bobs is not None
    cutoff = backend.clock.now_ms()
    backend.clock.advance(seconds=5)
    later = svc.jobs.propose("t1", "alice", "chef", "faq3", "users ask z", 0.8, "c3", "persona")
    assert later is not None
    purged = MemoryStoreMaintenance(svc.jobs, backend.store).purge_user_before(
        "t1", "alice", cutoff
    )
    assert purged == 2
    left = {m.key for m in svc.review.list_pending(ROOT).memories}
    assert left == {"faq2", "faq3"}
    # no version of what was purged keeps its text
    for gone in (early, own):
        with pytest.raises(NotFound):  # no row, no version, no audit row
            svc.histories.history(ROOT, gone.id)
    assert len(svc.histories.history(ROOT, later.id).page.versions) == 1
