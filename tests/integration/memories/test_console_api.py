"""What a console needs of ``MemoryService``, on both stores: listing what the caller may see
(by scope, status, persona and conversation) with a cursor that stays stable while rows
change, the personas and team settings, bulk review with a result per id, and edits that only
apply to the version the editor read."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tests.integration.memories.conftest import Backend
from tests.integration.memories.service_callers import ADMIN, ADMIN2, ALICE, ALICE_T2, BOB
from tests.support.concurrency import race

from engram.api.memory_inputs import (
    BulkReviewRequest,
    MemoryListQuery,
    MemorySaveRequest,
    PersonaRequest,
    TeamSettingsRequest,
)
from engram.errors import Forbidden, InvalidInput, NotFound, PreconditionFailed
from engram.identity import Caller
from engram.memories.commands import BulkReview, EditMemory, ListMemories
from engram.memories.models import Memory, MemoryPage, Scope, Status
from engram.memories.service import MemoryService

pytestmark = pytest.mark.integration


def every_page(svc: MemoryService, caller: Caller, **query: Any) -> list[Memory]:
    out: list[Memory] = []
    cursor = None
    while True:
        page = svc.list_memories(caller, MemoryListQuery(**query, cursor=cursor).command())
        out += page.memories
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def save(svc: MemoryService, caller: Caller, key: str, value: str, **kw: Any) -> Memory:
    return svc.save(caller, MemorySaveRequest(key=key, value=value, **kw).command())[0]


# --- listing ---------------------------------------------------------------------------------
def test_250_memories_in_pages_of_50_while_others_are_saved_and_deleted(
    backend: Backend,
) -> None:
    """Every row that exists throughout the listing appears exactly once, although rows are
    saved and deleted between and during the page reads."""
    svc = backend.service()
    throughout = set()
    for i in range(250):
        persona = {"persona_id": "chef"} if i % 5 == 0 else {}
        throughout.add(save(svc, ALICE, f"k{i:03d}", f"value {i}", **persona).id)
        if i % 25 == 0:
            backend.clock.advance(ms=1)  # several creation times, and many ties within one
    doomed = [save(svc, ALICE, f"doomed{i}", "goes during the listing").id for i in range(40)]
    stop = threading.Event()
    churn = {"saved": 0, "deleted": 0}

    def churner() -> None:
        n = 0
        while not stop.is_set() and n < 400:
            backend.clock.advance(ms=1)
            save(svc, ALICE, f"new{n}", "saved during the listing")
            churn["saved"] += 1
            if doomed:
                svc.delete(ALICE, doomed.pop())
                churn["deleted"] += 1
            n += 1

    worker = threading.Thread(target=churner)
    seen: list[str] = []
    pages = 0
    cursor = None
    worker.start()
    try:
        while True:
            page = svc.list_memories(ALICE, ListMemories(limit=50, cursor=cursor))
            pages += 1
            assert len(page.memories) <= 50
            seen += [m.id for m in page.memories]
            # and between pages, for certain: a save, a delete and an edit of a row not yet
            # listed (edits change updatedAt, never the listing order)
            save(svc, ALICE, f"between{pages}", "saved between two pages")
            if doomed:
                svc.delete(ALICE, doomed.pop(0))
            unseen = sorted(throughout - set(seen))
            if unseen:
                svc.update(ALICE, unseen[0], EditMemory(value=f"edited {pages}"))
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    finally:
        stop.set()
        worker.join(timeout=60)
    assert churn["saved"] > 0
    assert len(seen) == len(set(seen)), "a row appeared twice"
    assert throughout <= set(seen), f"{len(throughout - set(seen))} rows were skipped"
    assert pages >= 5


def test_listing_shows_only_what_the_caller_may_see(backend: Backend) -> None:
    svc = backend.service()
    svc.personas.put_persona(ADMIN, PersonaRequest(allowed_groups=["cooks"]).command("chef"))
    svc.personas.put_persona(ADMIN, PersonaRequest(allowed_groups=["sales"]).command("vault"))
    mine = save(svc, ALICE, "editor", "vim")
    mine_chef = save(svc, ALICE, "dish", "soup", persona_id="chef")
    bobs = save(svc, BOB, "editor", "emacs")
    policy = save(
        svc, ADMIN, "policy", "tips go to the kitchen", persona_id="chef", scope="persona"
    )
    vault = save(svc, ADMIN, "code", "1234", persona_id="vault", scope="persona")
    learnt_from_bob = svc.jobs.propose("t1", "bob", "bar", "bob said", "x", 0.8, "c9", "persona")
    learnt_from_alice = svc.jobs.propose(
        "t1", "alice", "chef", "alice said", "y", 0.8, "c8", "persona"
    )
    pending_of_alice = svc.jobs.propose("t1", "alice", None, "likes", "tea", 0.7, "c8")
    assert learnt_from_bob
    assert learnt_from_alice
    assert pending_of_alice
    save(svc, ALICE_T2, "editor", "other team")

    alice = {m.id for m in every_page(svc, ALICE)}
    assert alice == {mine.id, mine_chef.id, policy.id, learnt_from_alice.id, pending_of_alice.id}
    # a persona proposal is shown to the user it was learnt from, to nobody else before review
    bob = {m.id for m in every_page(svc, BOB)}
    assert bob == {bobs.id, vault.id, learnt_from_bob.id}
    # an admin manages proposals and persona memories, not a user's own approved memories
    admin = {m.id for m in every_page(svc, ADMIN)}
    assert admin == {
        mine_chef.id,
        policy.id,
        vault.id,
        learnt_from_bob.id,
        learnt_from_alice.id,
        pending_of_alice.id,
    }


def test_a_persona_closed_to_the_user_still_lists_their_own_persona_user_memories(
    backend: Backend,
) -> None:
    """Closing a persona to a user's groups hides the persona's shared memories from them,
    never the memories they own: My memory lists what export and erasure cover."""
    svc = backend.service()
    svc.personas.put_persona(ADMIN, PersonaRequest(allowed_groups=["cooks"]).command("chef"))
    own = save(svc, ALICE, "dish", "soup", persona_id="chef")
    shared = save(svc, ADMIN, "policy", "tips", persona_id="chef", scope="persona")
    assert {m.id for m in every_page(svc, ALICE)} == {own.id, shared.id}

    svc.personas.put_persona(ADMIN, PersonaRequest(allowed_groups=["waiters"]).command("chef"))
    assert {m.id for m in every_page(svc, ALICE)} == {own.id}
    assert {m.id for m in every_page(svc, ALICE, persona_id="chef")} == {own.id}
    assert {m.id for m in every_page(svc, ALICE, scope="persona")} == set()


def test_listing_filters_by_scope_status_and_persona(backend: Backend) -> None:
    svc = backend.service()
    user = save(svc, ALICE, "editor", "vim")
    chef = save(svc, ALICE, "dish", "soup", persona_id="chef")
    save(svc, ALICE, "drink", "tea", persona_id="bar")
    archived = svc.archive(ALICE, save(svc, ALICE, "old", "gone").id)

    def ids(**query: Any) -> set[str]:
        return {m.id for m in every_page(svc, ALICE, **query)}

    assert ids(scope="user") == {user.id, archived.id}
    assert ids(scope="user", status="active") == {user.id}
    assert ids(status="archived") == {archived.id}
    assert ids(persona_id="chef") == {chef.id}
    assert ids(scope="persona_user", persona_id="bar", status="archived") == set()


def test_provenance_is_exactly_the_callers_visible_memories_of_that_conversation(
    backend: Backend,
) -> None:
    svc = backend.service()
    a1 = save(svc, ALICE, "editor", "vim", source_channel_id="conv-1")
    a2 = save(svc, ALICE, "dish", "soup", persona_id="chef", source_channel_id="conv-1")
    save(svc, ALICE, "drink", "tea", source_channel_id="conv-2")
    save(svc, BOB, "editor", "emacs", source_channel_id="conv-1")  # another user, same id
    save(svc, BOB, "dish", "stew", persona_id="chef", source_channel_id="conv-1")
    bob_learnt = svc.jobs.propose("t1", "bob", "chef", "bob said", "x", 0.8, "conv-1", "persona")
    a3 = svc.jobs.propose("t1", "alice", None, "likes", "jazz", 0.8, "conv-1")
    assert bob_learnt
    assert a3

    got = every_page(svc, ALICE, source_channel_id="conv-1")
    assert {m.id for m in got} == {a1.id, a2.id, a3.id}
    assert all(m.source_channel_id == "conv-1" for m in got)
    assert {m.id for m in every_page(svc, ALICE, source_channel_id="conv-3")} == set()
    assert every_page(svc, BOB, source_channel_id="conv-2") == []


def test_a_cursor_works_only_for_its_own_listing(backend: Backend) -> None:
    svc = backend.service()
    for i in range(3):
        save(svc, ALICE, f"k{i}", "v")
    page = svc.list_memories(ALICE, ListMemories(limit=1))
    assert page.next_cursor is not None
    nxt = svc.list_memories(ALICE, ListMemories(limit=1, cursor=page.next_cursor))
    assert [m.id for m in nxt.memories] != [m.id for m in page.memories]
    for caller, query in (
        (ALICE, ListMemories(limit=1, scope=Scope.USER, cursor=page.next_cursor)),  # other filter
        (BOB, ListMemories(limit=1, cursor=page.next_cursor)),  # another user
        (ALICE, ListMemories(limit=1, cursor=page.next_cursor[:-2] + "AA")),  # tampered
    ):
        with pytest.raises(InvalidInput) as err:
            svc.list_memories(caller, query)
        assert err.value.field == "cursor"


def test_a_listing_ends_with_no_cursor(backend: Backend) -> None:
    svc = backend.service()
    assert svc.list_memories(ALICE) == MemoryPage(memories=[], next_cursor=None)
    save(svc, ALICE, "k", "v")
    page = svc.list_memories(ALICE, ListMemories(limit=1))
    assert len(page.memories) == 1
    assert page.next_cursor is None


# --- personas and team settings ------------------------------------------------------------
def test_admins_list_their_teams_personas_and_read_team_settings(backend: Backend) -> None:
    svc = backend.service()
    svc.personas.put_persona(ADMIN, PersonaRequest(allowed_groups=["front"]).command("waiter"))
    svc.personas.put_persona(ADMIN, PersonaRequest(memory_enabled=False).command("chef"))
    other = Caller(user_id="root", team_id="t2", is_team_admin=True)
    svc.personas.put_persona(other, PersonaRequest().command("spy"))
    listed = svc.personas.list_personas(ADMIN)
    assert [p.persona_id for p in listed] == ["chef", "waiter"]
    assert [p.memory_enabled for p in listed] == [False, True]
    assert listed[1].allowed_groups == ["front"]
    with pytest.raises(Forbidden):
        svc.personas.list_personas(ALICE)

    assert (
        svc.personas.get_team_settings(ADMIN).memory_enabled is True
    )  # never configured: defaults
    svc.personas.put_team_settings(ADMIN, TeamSettingsRequest(memory_enabled=False).command())
    assert svc.personas.get_team_settings(ADMIN).memory_enabled is False
    assert other.team_id != ADMIN.team_id
    assert svc.personas.get_team_settings(other).memory_enabled
    with pytest.raises(Forbidden):
        svc.personas.get_team_settings(ALICE)


# --- bulk review -----------------------------------------------------------------------------
def test_bulk_review_of_20_where_5_were_already_decided(backend: Backend) -> None:
    svc = backend.service()
    ids = []
    for i in range(20):
        proposal = svc.jobs.propose("t1", "alice", "chef", f"k{i}", f"value {i}", 0.8, "c1")
        assert proposal is not None
        ids.append(proposal.id)
    decided_before = ids[3:8]
    for memory_id in decided_before[:3]:
        svc.review.approve(ADMIN2, memory_id)
    for memory_id in decided_before[3:]:
        svc.review.reject(ADMIN2, memory_id)

    outcomes = svc.review.review_many(ADMIN, BulkReview(action="approve", ids=ids))

    assert [o.memory_id for o in outcomes] == ids
    ok = [o for o in outcomes if o.memory is not None]
    conflicts = [o for o in outcomes if o.error is not None]
    assert len(ok) == 15
    assert all(o.memory is not None and o.memory.status is Status.ACTIVE for o in ok)
    assert [o.memory_id for o in conflicts] == decided_before
    assert {o.error.code for o in conflicts if o.error} == {"conflict"}
    for outcome in ok:
        history = svc.review.history(ADMIN, outcome.memory_id)
        assert [(a.action, a.actor_id) for a in history] == [("approve", "root")]
    for memory_id in decided_before:
        history = svc.review.history(ADMIN, memory_id)
        assert [a.actor_id for a in history] == ["carol"], "a conflict writes no audit row"
    statuses = {svc.get(ADMIN, i).status for i in decided_before[:3]}
    assert statuses == {Status.ACTIVE}
    assert {svc.get(ADMIN, i).status for i in decided_before[3:]} == {Status.REJECTED}


def test_bulk_reject_reports_unknown_ids_and_refuses_non_admins(backend: Backend) -> None:
    svc = backend.service()
    proposal = svc.jobs.propose("t1", "alice", None, "likes", "tea", 0.8, "c1")
    assert proposal is not None
    active = save(svc, ALICE, "editor", "vim")
    request = BulkReview(
        action="reject", ids=[proposal.id, "00000000-0000-0000-0000-000000000000", active.id]
    )
    with pytest.raises(Forbidden):
        svc.review.review_many(ALICE, request)
    assert svc.get(ALICE, proposal.id).status is Status.PENDING_REVIEW

    first, unknown, not_a_proposal = svc.review.review_many(ADMIN, request)
    assert first.memory is not None
    assert first.memory.status is Status.REJECTED
    assert unknown.error is not None
    assert unknown.error.code == "not_found"
    # not a proposal: refused as a single rejection would be, and it stays as it is
    assert not_a_proposal.memory is None
    assert not_a_proposal.error is not None
    assert not_a_proposal.error.code in {"conflict", "not_found"}
    assert svc.get(ALICE, active.id).status is Status.ACTIVE


def test_bulk_review_ids_are_distinct_and_bounded() -> None:
    with pytest.raises(ValueError, match="ids"):
        BulkReviewRequest(action="approve", ids=["a", "a"])
    with pytest.raises(ValueError, match="ids"):
        BulkReviewRequest(action="approve", ids=[])
    with pytest.raises(ValueError, match="ids"):
        BulkReviewRequest(action="approve", ids=[f"id{i}" for i in range(101)])


# --- optimistic concurrency ------------------------------------------------------------------
def test_every_change_makes_a_new_version(backend: Backend) -> None:
    svc = backend.service()
    m = save(svc, ALICE, "editor", "vim")
    assert m.version == 1
    again = save(svc, ALICE, "editor", "helix")  # the same key: an update of the same row
    assert (again.id, again.version) == (m.id, 2)
    edited = svc.update(ALICE, m.id, EditMemory(confidence=0.5))
    assert edited.version == 3
    assert svc.archive(ALICE, m.id).version == 4
    assert svc.get(ALICE, m.id).version == 4


def test_two_admins_edit_with_the_same_version_one_wins(backend: Backend) -> None:
    svc = backend.service()
    for trial in range(10):
        memory = save(svc, ADMIN, f"policy{trial}", "v0", persona_id="chef", scope="persona")
        read = svc.get(ADMIN, memory.id)
        first, second = race(
            lambda r=read: svc.update(
                ADMIN, r.id, EditMemory(value="first"), if_versions=frozenset({r.version})
            ),
            lambda r=read: svc.update(
                ADMIN2,
                r.id,
                EditMemory(value="second"),
                if_versions=frozenset({r.version}),
            ),
        )
        winners = [r for r in (first, second) if isinstance(r, Memory)]
        losers = [r for r in (first, second) if isinstance(r, Exception)]
        assert (len(winners), len(losers)) == (1, 1), (first, second)
        assert isinstance(losers[0], PreconditionFailed)
        stored = svc.get(ADMIN, memory.id)
        assert stored.value == winners[0].value
        assert stored.version == read.version + 1
        updates = [a for a in svc.review.history(ADMIN, memory.id) if a.action == "update"]
        assert len(updates) == 1, "the refused edit is not audited"


def test_a_stale_version_changes_nothing(backend: Backend) -> None:
    svc = backend.service()
    m = save(svc, ALICE, "editor", "vim")
    svc.update(ALICE, m.id, EditMemory(value="helix"))
    stale = frozenset({m.version})
    with pytest.raises(PreconditionFailed):
        svc.update(ALICE, m.id, EditMemory(value="nano"), if_versions=stale)
    with pytest.raises(PreconditionFailed):
        svc.archive(ALICE, m.id, if_versions=stale)
    with pytest.raises(PreconditionFailed):
        svc.delete(ALICE, m.id, if_versions=stale)
    with pytest.raises(PreconditionFailed):
        svc.update(ALICE, m.id, EditMemory(value="nano"), if_versions=frozenset())
    now = svc.get(ALICE, m.id)
    assert (now.value, now.status, now.version) == ("helix", Status.ACTIVE, 2)
    svc.delete(ALICE, m.id, if_versions=frozenset({1, 2}))
    with pytest.raises(NotFound):
        svc.get(ALICE, m.id)
