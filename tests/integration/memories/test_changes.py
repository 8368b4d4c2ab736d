"""A new value learnt for an active key is a change proposal beside the memory: approving it
makes it the memory's next version under the same id, rejecting it keeps the memory and
refuses that value from then on. On the in-memory store and on PostgreSQL 18 and 16, through
the service the extraction job and the review API call."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.integration.memories.conftest import ADMIN, ALICE, BOB, EVERY_VERSION, Backend

from engram.adapters.local_embedder import WordLlamaEmbedder
from engram.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from engram.memories.commands import Approve, BulkReview, EditMemory, Recall, SaveMemory
from engram.memories.models import Memory, Scope, Status
from engram.memories.ports import Embedder
from engram.memories.service import MemoryService

pytestmark = [pytest.mark.integration, EVERY_VERSION]


def learn(svc: MemoryService, key: str, value: str) -> Memory | None:
    """What the extraction job does with one proposal from alice's transcript."""
    return svc.jobs.propose("t1", "alice", None, key, value, 0.8, "conv-1")


def queue(svc: MemoryService) -> list[tuple[str, str, tuple[object, ...] | None]]:
    return [
        (
            item.memory.key,
            item.memory.value,
            None
            if item.current is None
            else (item.current.id, item.current.version, item.current.value),
        )
        for item in svc.review.list_pending(ADMIN).items
    ]


def approved(svc: MemoryService, key: str, value: str) -> Memory:
    proposal = learn(svc, key, value)
    assert proposal is not None
    return svc.review.approve(ADMIN, proposal.id)


def test_a_new_value_is_one_change_approve_makes_it_current_reject_keeps_refusing(
    backend: Backend,
) -> None:
    svc = backend.service()
    teal = approved(svc, "favourite colour", "teal")
    assert learn(svc, "favourite colour", "teal") is None  # the current value: nothing new

    change = learn(svc, "Favourite_Colour", "crimson")  # any spelling of the key
    assert change is not None
    assert change.id != teal.id
    assert learn(svc, "favourite colour", "crimson") is not None  # the same transcript again
    assert queue(svc) == [("favourite colour", "crimson", (teal.id, teal.version, "teal"))]
    assert svc.get(ALICE, teal.id).value == "teal"  # unchanged until a reviewer decides
    assert [m.value for m in svc.recall(ALICE, Recall(query="colour"))] == ["teal"]

    crimson = svc.review.approve(ADMIN, change.id)
    assert (crimson.id, crimson.value, crimson.version) == (teal.id, "crimson", teal.version + 1)
    assert queue(svc) == []
    with pytest.raises(Conflict):
        svc.review.reject(ADMIN, change.id)  # already decided
    page = svc.histories.history(ALICE, teal.id).page
    assert [(v.value, v.status, v.actor_id) for v in page.versions] == [
        ("teal", "pending_review", "engram-system"),  # proposed
        ("teal", "active", "root"),  # approved
        ("crimson", "active", "root"),  # the change approved
    ]
    assert [m.value for m in svc.recall(ALICE, Recall(query="colour"))] == ["crimson"]

    scarlet = learn(svc, "favourite colour", "scarlet")
    assert scarlet is not None
    refused = svc.review.reject(ADMIN, scarlet.id)
    assert (refused.id, refused.status) == (scarlet.id, Status.REJECTED)
    assert svc.get(ALICE, teal.id).value == "crimson"
    assert learn(svc, "favourite colour", "scarlet") is None  # refused from then on
    assert learn(svc, "favourite colour", "crimson") is None
    assert queue(svc) == []
    actions = [(a.action, a.actor_id) for a in svc.review.history(ALICE, teal.id)]
    assert actions == [("approve", "root"), ("approve", "root"), ("reject", "root")]


def test_a_newer_value_replaces_the_pending_change_and_an_edit_changes_the_value_only(
    backend: Backend,
) -> None:
    svc = backend.service()
    editor = approved(svc, "editor", "vim")
    first = learn(svc, "editor", "emacs")
    second = learn(svc, "editor", "helix")
    assert first is not None
    assert second is not None
    assert second.id == first.id  # one pending change per memory, with the newest value
    assert queue(svc) == [("editor", "helix", (editor.id, editor.version, "vim"))]
    with pytest.raises(InvalidInput) as refused:
        svc.review.approve(ADMIN, first.id, Approve(key="text editor"))
    assert refused.value.field == "key"
    decided = svc.review.approve(ADMIN, first.id, Approve(value="helix 25"))
    assert (decided.id, decided.key, decided.value) == (editor.id, "editor", "helix 25")
    [outcome] = svc.review.review_many(ADMIN, BulkReview(action="approve", ids=[first.id]))
    assert isinstance(outcome.error, Conflict)


def test_a_value_the_user_wrote_is_not_shown_to_reviewers(backend: Backend) -> None:
    svc = backend.service()
    city, _ = svc.save(ALICE, SaveMemory(key="home city", value="Oslo"))
    assert learn(svc, "home city", "Bergen") is not None
    assert queue(svc) == [("home city", "Bergen", (city.id, city.version, None))]
    moved = svc.review.approve(ADMIN, svc.review.list_pending(ADMIN).items[0].memory.id)
    assert (moved.id, moved.value) == (city.id, "Bergen")
    assert learn(svc, "home city", "Tromsø") is not None  # now the reviewers' own value
    assert queue(svc) == [("home city", "Tromsø", (city.id, moved.version, "Bergen"))]


def test_an_approval_racing_the_users_edit_keeps_both_as_versions(backend: Backend) -> None:
    svc = backend.service()
    for round_ in range(4):
        memory = approved(svc, f"tea {round_}", "green")
        change = learn(svc, f"tea {round_}", "black")
        assert change is not None
        with ThreadPoolExecutor(max_workers=2) as pool:
            racing = [
                pool.submit(svc.review.approve, ADMIN, change.id),
                pool.submit(svc.update, ALICE, memory.id, EditMemory(value="oolong")),
            ]
            for future in racing:
                future.result()
        versions = svc.histories.history(ALICE, memory.id).page.versions
        assert [v.version for v in versions] == [1, 2, 3, 4]
        assert sorted(v.value for v in versions[2:]) == ["black", "oolong"]
        assert svc.get(ALICE, memory.id).value == versions[-1].value  # the later one holds
        assert queue(svc) == []


def test_an_erased_users_changes_go_with_them(backend: Backend) -> None:
    svc = backend.service()
    approved(svc, "pet", "a cat")
    assert learn(svc, "pet", "a dog") is not None
    style, _ = svc.save(
        ADMIN, SaveMemory(key="house style", value="formal", scope=Scope.PERSONA, persona_id="chef")
    )
    learnt = svc.jobs.propose("t1", "alice", "chef", "house style", "casual", 0.8, "c", "persona")
    assert learnt is not None
    assert len(queue(svc)) == 2
    receipt = svc.erase(ALICE)
    assert (receipt["user"], receipt["persona"], receipt["changes"]) == (1, 0, 2)
    assert queue(svc) == []
    assert svc.get(ADMIN, style.id).value == "formal"  # the team's memory stays as it was


@pytest.fixture(scope="module")
def wordllama() -> Embedder:
    """The offline embedder ``make run`` can use (a model shipped in a PyPI package)."""
    return WordLlamaEmbedder()


def test_one_value_under_two_keys_is_flagged_with_an_embedder_and_merge_keeps_both_histories(
    backend: Backend, wordllama: Embedder
) -> None:
    svc = backend.service(embedder=wordllama)
    editor, _, none = svc.save_flagged(ALICE, SaveMemory(key="preferred editor", value="vim"))
    assert none is None
    svc.save(ALICE, SaveMemory(key="preferred editor", value="helix"))  # version 2
    other, _, flagged = svc.save_flagged(ALICE, SaveMemory(key="editor of choice", value="helix"))
    assert flagged is not None
    assert (flagged.id, flagged.key) == (editor.id, "preferred editor")
    unrelated = svc.save_flagged(ALICE, SaveMemory(key="favourite film", value="Heat"))
    assert unrelated[2] is None
    # without an embedder nothing is flagged
    plain = backend.service()
    assert plain.save_flagged(ALICE, SaveMemory(key="text editor", value="helix"))[2] is None

    # a proposal too, in the review queue
    proposal = learn(svc, "editor I use", "helix")
    assert proposal is not None
    [item] = [i for i in svc.review.list_pending(ADMIN).items if i.memory.id == proposal.id]
    assert item.duplicate_of is None  # alice's own memories are not shown to reviewers
    twin = learn(svc, "my editor", "helix")
    assert twin is not None
    flags = {i.memory.key: i.duplicate_of for i in svc.review.list_pending(ADMIN).items}
    assert flags["my editor"] is not None
    assert flags["my editor"].key == "editor I use"
    assert {i.memory.key: i.duplicate_of for i in plain.review.list_pending(ADMIN).items} == {
        "editor I use": None,
        "my editor": None,
    }

    before = svc.histories.history(ALICE, editor.id).page.versions
    merged = svc.merge(ALICE, other.id, editor.id, if_versions=frozenset({other.version}))
    assert (merged.id, merged.key, merged.value) == (editor.id, "preferred editor", "helix")
    assert merged.version == editor.version + 2  # its two versions, then the other's one
    assert merged.updated_at >= other.updated_at
    with pytest.raises(NotFound):
        svc.get(ALICE, other.id)
    versions = svc.histories.history(ALICE, editor.id).page.versions
    assert [(v.version, v.key, v.value) for v in versions] == [
        (1, "editor of choice", "helix"),
        (2, "preferred editor", "vim"),
        (3, "preferred editor", "helix"),
    ]
    assert versions[0].valid_to is not None
    assert [v.valid_from for v in versions[1:]] == [v.valid_from for v in before]
    assert svc.get(ALICE, editor.id).version == merged.version
    # the folded key and value are not saved back by the extraction job
    assert learn(svc, "editor of choice", "helix") is None


def test_a_merge_across_owners_or_scopes_is_refused_and_changes_nothing(
    backend: Backend,
) -> None:
    svc = backend.service()
    mine, _ = svc.save(ALICE, SaveMemory(key="editor", value="vim"))
    theirs, _ = svc.save(BOB, SaveMemory(key="editor", value="vim"))
    shared, _ = svc.save(
        ADMIN, SaveMemory(key="editor", value="vim", scope=Scope.PERSONA, persona_id="chef")
    )
    for into, field in ((theirs.id, "into"), (shared.id, "into"), (mine.id, "into")):
        with pytest.raises(InvalidInput) as refused:
            svc.merge(ALICE, mine.id, into)
        assert refused.value.field == field
    film, _ = svc.save(ALICE, SaveMemory(key="film", value="Heat"))
    with pytest.raises(PreconditionFailed):
        svc.merge(ALICE, mine.id, film.id, if_versions=frozenset({99}))
    assert svc.get(ALICE, film.id) == film
    assert svc.get(ALICE, mine.id) == mine
    assert svc.get(BOB, theirs.id) == theirs
    assert len(svc.histories.history(ALICE, mine.id).page.versions) == 1
