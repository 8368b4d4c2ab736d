"""Every write a version, restore, what was true when, and one key however it is spelt: on the
in-memory store and on PostgreSQL 18 and 16, through the service every surface calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from tests.integration.memories.conftest import ADMIN, ALICE, BOB, EVERY_VERSION, Backend

from engram.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from engram.identity import Caller
from engram.memories.commands import EditMemory, Recall, SaveMemory
from engram.memories.keys import canonical_key
from engram.memories.models import Memory
from engram.memories.service import MemoryService

pytestmark = [pytest.mark.integration, EVERY_VERSION]

#: alice through each surface the versions name
THROUGH = {s: ALICE.model_copy(update={"surface": s}) for s in ("api", "tool:anthropic", "mcp")}
SPELLINGS = [
    "favourite editor",
    "favourite_editor",
    "Favourite-Editor",
    "ＦＡＶＯＵＲＩＴＥ EDITOR",
]


def save(svc: MemoryService, caller: Caller, key: str, value: str) -> Memory:
    return svc.save(caller, SaveMemory(key=key, value=value))[0]


def history(svc: MemoryService, caller: Caller, memory_id: str) -> list[tuple[object, ...]]:
    page = svc.histories.history(caller, memory_id).page
    return [
        (v.version, v.value, v.status, v.actor_id, v.actor_kind, v.surface) for v in page.versions
    ]


def values(svc: MemoryService, caller: Caller, **recall: object) -> list[str]:
    return [m.value for m in svc.recall(caller, Recall(**recall))]  # type: ignore[arg-type]


def test_every_write_is_a_version_and_an_earlier_one_can_be_restored(backend: Backend) -> None:
    svc, clock = backend.service(), backend.clock
    first = save(svc, THROUGH["api"], "editor", "vim")
    times = [clock.now_ms()]
    for value, surface in (("emacs", "api"), ("helix", "tool:anthropic"), ("zed", "mcp")):
        clock.advance(seconds=10)
        times.append(clock.now_ms())
        again = save(svc, THROUGH[surface], "editor", value)
        assert again.id == first.id
    clock.advance(seconds=10)
    save(svc, THROUGH["mcp"], "editor", "zed")  # the same value: no new version

    found = svc.histories.history(ALICE, first.id)
    assert found.page.recorded_from == 1
    assert [
        (v.version, v.value, v.actor_id, v.actor_kind, v.surface) for v in found.page.versions
    ] == [
        (1, "vim", "alice", "user", "api"),
        (2, "emacs", "alice", "user", "api"),
        (3, "helix", "alice", "user", "tool:anthropic"),
        (4, "zed", "alice", "user", "mcp"),
    ]
    spans = [(v.valid_from, v.valid_to) for v in found.page.versions]
    assert [int(start.timestamp() * 1000) for start, _ in spans] == times
    assert [end for _, end in spans[:-1]] == [start for start, _ in spans[1:]]
    assert spans[-1][1] is None

    # what was true between versions 2 and 3, for one memory and for recall
    between = times[1] + 5_000
    assert svc.get(ALICE, first.id, as_of_ms=between).value == "emacs"
    assert values(svc, ALICE, query="editor", as_of_ms=between) == ["emacs"]
    assert values(svc, ALICE, query="editor") == ["zed"]  # now: never a superseded value
    with pytest.raises(NotFound):
        svc.get(ALICE, first.id, as_of_ms=times[0] - 1)  # before it existed

    clock.advance(seconds=10)
    restored = svc.histories.restore(ALICE, first.id, 2, if_versions=frozenset({4}))
    assert (restored.value, restored.version) == ("emacs", 5)
    assert svc.get(ALICE, first.id).value == "emacs"
    assert values(svc, ALICE, query="editor") == ["emacs"]
    assert history(svc, ALICE, first.id)[-1] == (5, "emacs", "active", "alice", "user", "api")
    actions = [a.action for a in svc.histories.history(ALICE, first.id).actions]
    assert actions == ["restore"]


def test_refusals_name_what_is_wrong_and_change_nothing(backend: Backend) -> None:
    svc, clock = backend.service(), backend.clock
    m = save(svc, ALICE, "tea", "green")
    clock.advance(seconds=1)
    save(svc, ALICE, "tea", "black")
    before = history(svc, ALICE, m.id)
    with pytest.raises(NotFound, match="version 7 of memory"):
        svc.histories.restore(ALICE, m.id, 7)
    with pytest.raises(PreconditionFailed):
        svc.histories.restore(ALICE, m.id, 1, if_versions=frozenset({1}))
    with pytest.raises(InvalidInput) as future:
        svc.get(ALICE, m.id, as_of_ms=clock.now_ms() + 60_000)
    assert future.value.field == "asOf"
    with pytest.raises(InvalidInput):
        svc.recall(ALICE, Recall(query="tea", as_of_ms=clock.now_ms() + 1))
    with pytest.raises(NotFound):
        svc.histories.restore(BOB, m.id, 1)  # not bob's to see
    with pytest.raises(NotFound):
        svc.histories.history(BOB, m.id)
    assert history(svc, ALICE, m.id) == before
    assert svc.get(ALICE, m.id).value == "black"


def test_a_deleted_memory_keeps_its_history_and_can_be_restored(backend: Backend) -> None:
    svc, clock = backend.service(), backend.clock
    m = save(svc, ALICE, "city", "Lyon")
    clock.advance(seconds=1)
    svc.delete(ALICE, m.id)
    assert [v[1:3] for v in history(svc, ALICE, m.id)] == [("Lyon", "active"), ("Lyon", "deleted")]
    with pytest.raises(NotFound):
        svc.get(ALICE, m.id)
    clock.advance(seconds=1)
    back = svc.histories.restore(ALICE, m.id, 1)
    assert (back.id, back.value, back.status.value, back.version) == (m.id, "Lyon", "active", 3)
    assert values(svc, ALICE, query="city") == ["Lyon"]
    # its key taken meanwhile, a deleted memory cannot come back under it
    svc.delete(ALICE, m.id)
    save(svc, ALICE, "City", "Paris")
    with pytest.raises(Conflict):
        svc.histories.restore(ALICE, m.id, 1)


def test_one_key_however_it_is_spelt(backend: Backend) -> None:
    svc = backend.service()
    surfaces = ["api", "mcp", "tool:anthropic", "api"]
    saved = [
        save(svc, THROUGH[surface], key, f"editor {n}")
        for n, (key, surface) in enumerate(zip(SPELLINGS, surfaces, strict=True))
    ]
    assert len({m.id for m in saved}) == 1
    assert {canonical_key(k) for k in SPELLINGS} == {"favourite editor"}
    one = svc.get(ALICE, saved[0].id)
    assert (one.key, one.value, one.version) == (
        "favourite editor",
        "editor 3",
        4,
    )  # as first written
    assert [v[1] for v in history(svc, ALICE, one.id)] == [f"editor {n}" for n in range(4)]
    assert values(svc, ALICE, query="favourite editor") == ["editor 3"]


def test_a_rejected_value_stays_refused_under_every_spelling(backend: Backend) -> None:
    svc = backend.service()
    proposed = svc.jobs.propose("t1", "alice", None, "home town", "Leeds", 0.8, "c1")
    assert proposed is not None
    svc.review.reject(ADMIN, proposed.id)
    for spelling in ("Home_Town", "HOME-TOWN", " home town!"):
        assert svc.jobs.propose("t1", "alice", None, spelling, "Leeds", 0.8, "c2") is None
    assert svc.jobs.propose("t1", "alice", None, "Home_Town", "York", 0.8, "c3") is not None


def test_extraction_review_and_retention_are_attributed(backend: Backend) -> None:
    svc, clock = backend.service(), backend.clock
    proposed = svc.jobs.propose("t1", "alice", None, "team", "Falcons", 0.8, "c1")
    assert proposed is not None
    svc.review.approve(ADMIN.model_copy(update={"surface": "console"}), proposed.id)
    clock.advance(days=40)
    svc.jobs.apply_retention("t1", archive_after_days=30, delete_archived_after_days=None)
    assert [v[2:] for v in history(svc, ALICE, proposed.id)] == [
        ("pending_review", "engram-system", "extraction", "extraction"),
        ("active", "root", "admin", "console"),
        ("archived", "engram-system", "maintenance", "maintenance"),
    ]


def test_erasure_removes_the_history_and_history_retention_keeps_what_is_current(
    backend: Backend,
) -> None:
    svc, clock = backend.service(), backend.clock
    mine = save(svc, ALICE, "pet", "cat")
    clock.advance(days=1)
    save(svc, ALICE, "pet", "dog")
    theirs = save(svc, BOB, "pet", "fish")
    clock.advance(days=1)
    svc.delete(BOB, theirs.id)

    clock.advance(days=10)
    five_days_ago = datetime.fromtimestamp(clock.now_ms() / 1000 - 5 * 86_400, UTC)
    assert backend.store.purge_history(five_days_ago, 1) == 1  # at most the limit
    assert (
        backend.store.purge_history(five_days_ago, 100) == 2
    )  # alice's superseded version, and bob's deleted memory whole
    assert [v[1] for v in history(svc, ALICE, mine.id)] == ["dog"]
    assert svc.histories.history(ALICE, mine.id).page.recorded_from == 2
    gone = svc.histories.history(BOB, theirs.id)  # its audit trail stays, its versions went
    assert (gone.page.versions, gone.page.recorded_from, len(gone.actions)) == ([], None, 1)

    learnt = svc.jobs.propose("t1", "alice", "chef", "faq", "guests ask", 0.8, "c1", "persona")
    assert learnt is not None
    svc.review.approve(ADMIN, learnt.id)
    bobs_note = save(svc, BOB, "note", "from bob")
    svc.update(ALICE.model_copy(update={"is_team_admin": True}), learnt.id, EditMemory(value="x"))

    counts = svc.erase(ALICE)
    assert counts["versions"] == 1 + 3  # her pet's current version; the persona memory's three
    with pytest.raises(NotFound):
        svc.histories.history(ALICE, mine.id)
    with pytest.raises(NotFound):  # learnt from her: gone with its history
        svc.histories.history(ADMIN, learnt.id)
    assert len(history(svc, BOB, bobs_note.id)) == 1


def test_concurrent_saves_of_one_key_under_many_spellings_lose_no_version(
    backend: Backend,
) -> None:
    svc = backend.service()
    words = ("favourite", "editor")
    joins = (" ", "_", "-", "  ", " _ ")
    spellings = [
        joins[n % len(joins)].join(w.upper() if n % 3 == 0 else w.title() for w in words)
        for n in range(20)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        saved = list(pool.map(lambda n: save(svc, ALICE, spellings[n], f"editor {n}"), range(20)))
    assert len({m.id for m in saved}) == 1
    versions = svc.histories.history(ALICE, saved[0].id, limit=100).page.versions
    assert [v.version for v in versions] == list(range(1, 21))
    assert sorted(v.value for v in versions) == sorted(f"editor {n}" for n in range(20))
    assert [v.valid_to is None for v in versions] == [False] * 19 + [True]
    assert svc.get(ALICE, saved[0].id).value == versions[-1].value
