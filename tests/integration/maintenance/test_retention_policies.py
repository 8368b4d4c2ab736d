"""Retention policies on PostgreSQL: listing across teams, admin-only writes, and the job
applying team and persona policies to real memories."""

from __future__ import annotations

import pytest
from tests.support import memory_rows
from tests.unit.maintenance.fakes import FakeState

from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.retention import PostgresRetentionPolicies
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.api.memory_inputs import PersonaRequest, TeamSettingsRequest
from engram.clock import FakeClock
from engram.errors import Forbidden, InvalidInput
from engram.identity import Caller
from engram.maintenance import MaintenanceJob
from engram.maintenance.bridges import MemoryStoreMaintenance
from engram.memories.commands import SaveMemory
from engram.memories.models import Status
from engram.memories.ports import AccessContext
from engram.memories.service import MemoryService
from engram.settings import Settings


def admin(team: str) -> AccessContext:
    return AccessContext(team_id=team, user_id="admin", elevated=True)


def test_policies_are_listed_across_teams_in_key_order(db: Database) -> None:
    src = PostgresRetentionPolicies(db)
    src.set_policy(admin("tB"), archive_after_days=30)
    src.set_policy(admin("tA"), persona_id="p2", delete_archived_after_days=7)
    src.set_policy(admin("tA"), archive_after_days=10, delete_archived_after_days=20)
    src.set_policy(admin("tA"), persona_id="p1", archive_after_days=5)
    src.set_policy(admin("tC"), archive_after_days=5)
    src.set_policy(admin("tC"))  # cleared: no rule, not listed
    pages = []
    after = None
    while True:
        page = list(src.list_policies(after=after, limit=2))
        pages.append([p.key for p in page])
        if len(page) < 2:
            break
        after = page[-1].key
    assert pages == [["tA/", "tA/p1"], ["tA/p2", "tB/"], []]
    first = src.list_policies(after=None, limit=1)[0]
    assert (first.archive_after_days, first.delete_archived_after_days) == (10, 20)


def test_only_admins_set_policies_and_bad_days_store_nothing(db: Database) -> None:
    src = PostgresRetentionPolicies(db)
    with pytest.raises(Forbidden):
        src.set_policy(AccessContext(team_id="t1", user_id="u1"), archive_after_days=3)
    for bad in (0, -1, 1.5, True, "7"):
        with pytest.raises(InvalidInput) as err:
            src.set_policy(admin("t1"), archive_after_days=bad)
        assert err.value.field == "archiveAfterDays"
    with pytest.raises(InvalidInput) as err:
        src.set_policy(admin("t1"), delete_archived_after_days=0)
    assert err.value.field == "deleteArchivedAfterDays"
    assert src.list_policies(after=None, limit=10) == []


def test_policy_writes_keep_the_other_settings(db: Database) -> None:
    clock = FakeClock()
    store = PostgresMemoryStore(db, clock)
    service = MemoryService(store, settings=Settings(), clock=clock)
    boss = Caller(user_id="boss", team_id="t1", is_team_admin=True)
    service.personas.put_persona(
        boss,
        PersonaRequest.model_validate(
            {"memoryEnabled": False, "extraction": {"enabled": True}}
        ).command("p1"),
    )
    service.personas.put_team_settings(boss, TeamSettingsRequest(memory_enabled=False).command())
    PostgresRetentionPolicies(db).set_policy(admin("t1"), persona_id="p1", archive_after_days=9)
    PostgresRetentionPolicies(db).set_policy(admin("t1"), archive_after_days=9)
    persona = service.personas.persona_settings("t1", "p1")
    assert (persona.memory_enabled, persona.extraction.enabled) == (False, True)
    assert memory_rows.get_team_settings(store, admin("t1")) is not None
    assert not memory_rows.get_team_settings(store, admin("t1")).memory_enabled  # type: ignore[union-attr]


def test_the_job_applies_team_and_persona_policies(db: Database) -> None:
    clock = FakeClock()
    store = PostgresMemoryStore(db, clock)
    service = MemoryService(store, settings=Settings(), clock=clock)
    policies = PostgresRetentionPolicies(db, clock=clock)
    u1 = Caller(user_id="u1", team_id="t1")
    u2 = Caller(user_id="u2", team_id="t2")
    old_user, _ = service.save(u1, SaveMemory(key="editor", value="vim"))
    old_persona, _ = service.save(u2, SaveMemory(key="tone", value="formal", persona_id="p1"))
    other_persona, _ = service.save(u2, SaveMemory(key="tone", value="brief", persona_id="p9"))
    clock.advance(days=20)
    fresh, _ = service.save(u1, SaveMemory(key="shell", value="zsh"))
    policies.set_policy(admin("t1"), archive_after_days=10, delete_archived_after_days=15)
    policies.set_policy(admin("t2"), persona_id="p1", archive_after_days=10)

    job = MaintenanceJob(
        clock=clock,
        state=FakeState(),
        memories=MemoryStoreMaintenance(service.jobs, store),
        policies=policies,
    )
    report = job.run(remaining_ms=60_000)
    rep = report.tasks["retention"]
    assert rep.error is None
    assert rep.completed_cycle
    assert rep.counts["policies"] == 2
    assert rep.counts["memoriesArchived"] == 2
    t1, t2 = admin("t1"), admin("t2")
    assert memory_rows.get(store, t1, old_user.id).status is Status.ARCHIVED  # type: ignore[union-attr]
    assert memory_rows.get(store, t1, fresh.id).status is Status.ACTIVE  # type: ignore[union-attr]
    assert memory_rows.get(store, t2, old_persona.id).status is Status.ARCHIVED  # type: ignore[union-attr]
    assert memory_rows.get(store, t2, other_persona.id).status is Status.ACTIVE  # type: ignore[union-attr]

    again = job.run(remaining_ms=60_000).tasks["retention"]
    assert again.counts.get("memoriesArchived", 0) == 0
    assert again.counts.get("memoriesDeleted", 0) == 0

    clock.advance(days=16)  # archived 16 days ago: past deleteArchivedAfterDays in team t1
    later = job.run(remaining_ms=60_000).tasks["retention"]
    assert later.counts["memoriesDeleted"] == 1
    assert memory_rows.get(store, t1, old_user.id) is None
    assert memory_rows.get(store, t2, old_persona.id) is not None  # p1's policy has no delete rule
