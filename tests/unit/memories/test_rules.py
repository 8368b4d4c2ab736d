"""The write rules of explicit memories as pure functions: each decision from the rows a unit
of work read or locked (the conformance suite runs them through both stores)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.errors import Conflict
from engram.memories import rules
from engram.memories.lifecycle import Quotas
from engram.memories.models import Memory, NewMemory, Scope, Status
from engram.memories.ports import KeyRow, MemoryChange

AT = datetime(2026, 1, 1, tzinfo=UTC)
PROPOSAL = NewMemory(
    scope=Scope.USER, owner_id="alice", team_id="t1", key="colour", value="crimson"
)


def row(status: Status, value: str = "teal", memory_id: str = "m1") -> Memory:
    return Memory(
        id=memory_id,
        scope=Scope.USER,
        owner_id="alice",
        team_id="t1",
        key="colour",
        value=value,
        status=status,
        created_at=AT,
        updated_at=AT,
    )


@pytest.mark.parametrize(
    ("current", "suppressed", "refusal"),
    [
        (None, False, None),
        (None, True, "suppressed"),
        (KeyRow(row(Status.REJECTED, "crimson")), False, "suppressed"),
        (KeyRow(row(Status.REJECTED, "teal")), False, None),
        (KeyRow(row(Status.ACTIVE)), False, None),  # a change proposal (proposes_change)
        (KeyRow(row(Status.ACTIVE, "crimson")), False, "current"),
        (KeyRow(row(Status.PENDING_REVIEW)), False, None),
        (KeyRow(row(Status.PENDING_REVIEW), edited=True), False, "edited"),
        (KeyRow(row(Status.ARCHIVED), edited=True), False, None),
    ],
)
def test_what_a_proposal_refuses(
    current: KeyRow | None, suppressed: bool, refusal: str | None
) -> None:
    assert rules.proposal_refused(PROPOSAL, current, suppressed=suppressed) == refusal


def test_only_an_active_row_takes_change_proposals() -> None:
    assert rules.proposes_change(KeyRow(row(Status.ACTIVE)))
    for status in (Status.PENDING_REVIEW, Status.ARCHIVED, Status.REJECTED):
        assert not rules.proposes_change(KeyRow(row(status)))
    assert not rules.proposes_change(None)


def test_only_a_rejected_row_gives_way() -> None:
    rejected = row(Status.REJECTED, "teal")
    assert rules.gives_way(KeyRow(rejected)) == rejected
    assert rules.gives_way(KeyRow(row(Status.ACTIVE))) is None
    assert rules.gives_way(None) is None


def test_a_quota_refuses_the_first_full_counter_only() -> None:
    subjects = Quotas(per_user=2, per_team=3).subjects(PROPOSAL)
    assert rules.quota_refusal(subjects, {"team/": 2, "user/alice": 1}) is None
    refusal = rules.quota_refusal(subjects, {"team/": 3, "user/alice": 2})
    assert refusal is not None
    assert refusal.details["quota"] == "memoriesPerTeam"


def test_suppressions_and_edit_marks() -> None:
    active, archived = row(Status.ACTIVE), row(Status.ARCHIVED)
    assert rules.suppresses(active, None, by_person=True)
    assert not rules.suppresses(active, None, by_person=False)  # retention, erasure
    assert rules.suppresses(active, archived, by_person=True)
    assert not rules.suppresses(archived, archived, by_person=True)
    assert rules.suppresses(row(Status.PENDING_REVIEW), row(Status.REJECTED), by_person=False)
    assert rules.marks_edit(MemoryChange(value="x"), by_person=True)
    assert not rules.marks_edit(MemoryChange(confidence=0.5), by_person=True)
    assert not rules.marks_edit(MemoryChange(value="x"), by_person=False)


def test_decisions_on_a_locked_row() -> None:
    with pytest.raises(Conflict):
        rules.check_editable(row(Status.REJECTED))
    with pytest.raises(Conflict):
        rules.check_pending(row(Status.ACTIVE))
    rules.check_pending(row(Status.PENDING_REVIEW))
    mine = row(Status.ACTIVE)
    assert rules.key_taken(mine, KeyRow(row(Status.ACTIVE, memory_id="m2")))
    assert not rules.key_taken(mine, KeyRow(row(Status.REJECTED, memory_id="m2")))
    assert not rules.key_taken(mine, KeyRow(mine))
