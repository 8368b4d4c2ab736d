"""Sixty days of one user's life with the real behavioural and memory domains (in-memory
adapters) and the maintenance job run once a day on a fake clock."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from tests.support import memory_rows
from tests.unit.maintenance.fakes import DAY, FakePolicies, FakeState

from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.behaviour.consolidation import consolidate
from engram.behaviour.decay import ExponentialDecay, days_until_expiry
from engram.behaviour.models import Fact, Observation, ObservationType
from engram.clock import FakeClock
from engram.identity import Caller
from engram.maintenance import MaintenanceConfig, MaintenanceJob, RetentionPolicy
from engram.maintenance.bridges import BehaviourStoreMaintenance, MemoryStoreMaintenance
from engram.memories.commands import SaveMemory
from engram.memories.models import Status
from engram.memories.privacy import system_context
from engram.memories.service import MemoryService
from engram.settings import Settings

HOUR = 3_600_000
START = FakeClock().now_ms()  # 2026-01-01T00:00Z
LEAVER = Caller(user_id="leaver", team_id="t1")
REGULAR = Caller(user_id="regular", team_id="t1")
AFFINITY = "tool_affinity:search"
DOMAIN = "domain_preference:royalty"


@dataclass
class Day:
    day: int
    observations: list[int]
    facts: dict[str, Fact]
    current: dict[str, float]
    indexed: set[str]
    memory_status: Status | None
    regular_oldest_observation: int | None
    regular_facts: dict[str, Fact] = field(default_factory=dict)


def _obs(who: Caller, at: int, *, domain: bool) -> list[Observation]:
    out = [
        Observation(
            identity_id=who.identity_id,
            type=ObservationType.TOOL_SUCCESS,
            metadata={"toolName": "search", "durationMs": 120},
            created_at=at,
        )
    ]
    if domain:
        out.append(
            Observation(
                identity_id=who.identity_id,
                type=ObservationType.QUERY_PATTERN,
                metadata={"domain": "royalty", "query": "royalty rates for Q3"},
                created_at=at,
            )
        )
    return out


def test_sixty_days_reinforce_decay_expire_prune_and_retention() -> None:
    clock = FakeClock(START)
    decay = ExponentialDecay()
    behaviour = InMemoryBehaviourStore(clock=clock)
    memstore = InMemoryMemoryStore(clock=clock)
    memories = MemoryService(memstore, settings=Settings(), clock=clock)
    state = FakeState()
    job = MaintenanceJob(
        clock=clock,
        monotonic=FakeClock(0),  # the budget never runs out here
        state=state,
        behaviour=BehaviourStoreMaintenance(behaviour, decay),
        memories=MemoryStoreMaintenance(memories.jobs, memstore),
        policies=FakePolicies(
            [RetentionPolicy(team_id="t1", archive_after_days=20, delete_archived_after_days=10)]
        ),
        config=MaintenanceConfig(observation_retention_days=30, sweep_idle_days=7, page_size=1),
    )

    def session(who: Caller, day: int, *, domain: bool) -> None:
        """Session start consolidates what came before; then the session's observations."""
        consolidate(
            who.identity_id,
            observations=behaviour,
            facts=behaviour,
            checkpoints=behaviour.checkpoints,
            decay=decay,
            now=clock.now_ms(),
        )
        behaviour.append(who.identity_id, _obs(who, clock.now_ms() + 60_000, domain=domain))

    leaver_memory = ""
    days: list[Day] = []
    for day in range(60):
        clock.set(START + day * DAY + 9 * HOUR)
        if day in (0, 2, 4):
            session(LEAVER, day, domain=day == 0)
        if day == 0:
            leaver_memory = memories.save(LEAVER, SaveMemory(key="pet", value="a cat called Tom"))[
                0
            ].id
        if day % 3 == 0:
            session(REGULAR, day, domain=False)
            memories.save(REGULAR, SaveMemory(key="tool", value=f"search, as of day {day}"))

        clock.set(START + day * DAY + 12 * HOUR)
        report = job.run(remaining_ms=60_000)
        assert report.errors == 0
        assert not report.cut_off
        facts = {f.subject: f for f in behaviour.get(LEAVER.identity_id)}
        row = memory_rows.get(memstore, system_context("t1"), leaver_memory)
        regular_obs = behaviour.since(REGULAR.identity_id, None)
        days.append(
            Day(
                day=day,
                observations=[o.created_at for o in behaviour.since(LEAVER.identity_id, None)],
                facts=facts,
                current={s: decay.apply(f, clock.now_ms()) for s, f in facts.items()},
                indexed=set(behaviour.list_identities(limit=1000)[0]),
                memory_status=None if row is None else row.status,
                regular_oldest_observation=min((o.created_at for o in regular_obs), default=None),
                regular_facts={f.subject: f for f in behaviour.get(REGULAR.identity_id)},
            )
        )

    noon = [START + d * DAY + 12 * HOUR for d in range(60)]

    # Facts reinforce: created at the day-2 session, reinforced at day 4 (the day-4
    # observations are never consolidated: the user never starts another session).
    affinity = days[4].facts[AFFINITY]
    assert affinity.reinforcement_count == 2
    assert affinity.confidence == 0.6
    assert days[4].facts[DOMAIN].reinforcement_count == 1
    assert days[59].regular_facts[AFFINITY].reinforcement_count == 19
    assert days[59].regular_facts[AFFINITY].confidence == 1.0

    # ... decay while the user is away ...
    trend = [d.current[AFFINITY] for d in days[4:] if AFFINITY in d.current]
    assert all(later < earlier for earlier, later in itertools.pairwise(trend))
    assert days[20].facts[AFFINITY].confidence == 0.6  # the stored value never decays

    # ... and expire: the sweep deletes each fact at the first run after its expiry.
    for subject in (AFFINITY, DOMAIN):
        fact = days[4].facts[subject]
        expires = fact.last_reinforced_at + days_until_expiry(fact.confidence) * DAY
        for d in days[5:]:
            assert (subject in d.facts) == (noon[d.day] < expires), (subject, d.day)
    assert AFFINITY not in days[59].facts

    # Observations are pruned on schedule: at the first run 30 days after their creation.
    created = days[4].observations
    assert len(created) == 4
    for d in days[4:]:
        assert d.observations == [t for t in created if t >= noon[d.day] - 30 * DAY], d.day
    for d in days:
        oldest = d.regular_oldest_observation
        assert oldest is None or oldest >= noon[d.day] - 30 * DAY
    assert days[59].regular_oldest_observation is not None

    # The identity leaves the index once nothing is left; the regular user stays.
    for d in days[5:]:
        assert (LEAVER.identity_id in d.indexed) == bool(d.facts or d.observations), d.day
        assert REGULAR.identity_id in d.indexed
    assert LEAVER.identity_id not in days[59].indexed
    assert behaviour.export(LEAVER.identity_id)["facts"] == []

    # Retention: the leaver's memory is archived after 20 idle days, deleted 10 days later;
    # the regular user's memory, refreshed every session, stays active.
    status = [d.memory_status for d in days]
    archived_on = status.index(Status.ARCHIVED)
    deleted_on = status.index(None)
    assert archived_on == 20
    assert all(s is Status.ACTIVE for s in status[:20])
    assert deleted_on - archived_on in (10, 11)  # "idle for 10 days": the boundary is the store's
    regular_memories = memories.export(REGULAR)["memories"]
    assert [m["status"] for m in regular_memories] == ["active"]

    # A second run at the same moment changes nothing.
    before = (
        behaviour.export(REGULAR.identity_id),
        memories.export(REGULAR),
        set(behaviour.list_identities(limit=1000)[0]),
    )
    report = job.run(remaining_ms=60_000)
    after = (
        behaviour.export(REGULAR.identity_id),
        memories.export(REGULAR),
        set(behaviour.list_identities(limit=1000)[0]),
    )
    assert after == before
    assert report.tasks["prune"].counts.get("observationsPruned", 0) == 0
    assert report.tasks["retention"].counts == {
        "policies": 1,
        "memoriesArchived": 0,
        "memoriesDeleted": 0,
    }
