"""The store bridges over the real in-memory adapters: erasure backstop, persona retention,
removal of emptied identities."""

from __future__ import annotations

from tests.support import memory_rows
from tests.unit.maintenance.fakes import DAY, FakeErasureLog, FakePolicies, FakeState

from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.behaviour.decay import ExponentialDecay
from engram.behaviour.models import Observation, ObservationType
from engram.clock import FakeClock
from engram.identity import Caller
from engram.maintenance import MaintenanceJob, RetentionPolicy
from engram.maintenance.bridges import BehaviourStoreMaintenance, MemoryStoreMaintenance
from engram.memories.commands import SaveMemory
from engram.memories.models import Scope, Status
from engram.memories.privacy import system_context
from engram.memories.service import MemoryService
from engram.settings import Settings

T0 = FakeClock().now_ms()
GONE = Caller(user_id="gone", team_id="t1")
BACK = Caller(user_id="back", team_id="t1")
ADMIN = Caller(user_id="admin", team_id="t1", is_team_admin=True)


def obs(who: Caller, at: int, tool: str = "search") -> Observation:
    return Observation(
        identity_id=who.identity_id,
        type=ObservationType.TOOL_SUCCESS,
        metadata={"toolName": tool, "durationMs": 5},
        created_at=at,
    )


class World:
    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.behaviour = InMemoryBehaviourStore(clock=self.clock)
        self.memstore = InMemoryMemoryStore(clock=self.clock)
        self.memories = MemoryService(self.memstore, settings=Settings(), clock=self.clock)
        self.erasures = FakeErasureLog()
        self.policies = FakePolicies([])

    def job(self) -> MaintenanceJob:
        return MaintenanceJob(
            clock=self.clock,
            monotonic=FakeClock(0),
            state=FakeState(),
            behaviour=BehaviourStoreMaintenance(self.behaviour, ExponentialDecay()),
            memories=MemoryStoreMaintenance(self.memories.jobs, self.memstore),
            policies=self.policies,
            erasures=self.erasures,
        )

    def erase(self, who: Caller) -> int:
        at = self.clock.now_ms()
        self.behaviour.erase(who.identity_id)
        self.memories.erase(who)
        self.erasures.record(who.team_id, who.user_id, at)
        return at


def test_leftovers_that_predate_an_erasure_are_purged_and_new_life_is_kept() -> None:
    w = World()
    for who in (GONE, BACK):
        w.behaviour.append(who.identity_id, [obs(who, T0 - DAY)])
        w.memories.save(who, SaveMemory(key="pet", value="a cat"))
    w.clock.advance(seconds=10)
    erased_at = {who.user_id: w.erase(who) for who in (GONE, BACK)}
    w.clock.advance(seconds=10)
    # late SQS deliveries of observations made before the erasure
    w.behaviour.append(GONE.identity_id, [obs(GONE, erased_at["gone"] - 5_000, "late")])
    w.behaviour.append(BACK.identity_id, [obs(BACK, erased_at["back"] - 5_000, "late")])
    # "back" returns and uses the product again
    w.behaviour.append(BACK.identity_id, [obs(BACK, w.clock.now_ms(), "fresh")])
    w.memories.save(BACK, SaveMemory(key="drink", value="tea"))

    report = w.job().run(remaining_ms=60_000)

    assert report.tasks["erasure"].counts == {
        "behaviourLeftovers": 2,
        "memoryLeftovers": 0,
        "erasuresChecked": 2,
    }
    assert GONE.identity_id not in w.behaviour.list_identities()[0]
    assert w.behaviour.export(GONE.identity_id)["observations"] == []
    kept = w.behaviour.export(BACK.identity_id)["observations"]
    assert [o["metadata"]["toolName"] for o in kept] == ["fresh"]
    assert [m["key"] for m in w.memories.export(BACK)["memories"]] == ["drink"]


def test_a_memory_written_before_the_erasure_but_missed_by_it_is_purged() -> None:
    w = World()
    w.memories.save(GONE, SaveMemory(key="pet", value="a cat"))  # e.g. a write racing the erase
    w.clock.advance(seconds=1)
    w.erasures.record("t1", "gone", w.clock.now_ms())
    w.clock.advance(seconds=1)
    w.memories.save(
        GONE, SaveMemory(key="drink", value="tea")
    )  # after the erasure: the user came back

    report = w.job().run(remaining_ms=60_000)

    assert report.tasks["erasure"].counts["memoryLeftovers"] == 1
    assert [m["key"] for m in w.memories.export(GONE)["memories"]] == ["drink"]


def test_persona_policy_archives_and_deletes_only_that_personas_memories() -> None:
    w = World()
    w.policies = FakePolicies(
        [
            RetentionPolicy(
                team_id="t1", persona_id="p", archive_after_days=5, delete_archived_after_days=5
            )
        ]
    )
    in_p = w.memories.save(BACK, SaveMemory(key="style", value="short answers", persona_id="p"))[0]
    in_q = w.memories.save(BACK, SaveMemory(key="style", value="long answers", persona_id="q"))[0]
    shared = w.memories.save(
        ADMIN, SaveMemory(key="tone", value="formal", persona_id="p", scope=Scope.PERSONA)
    )[0]
    mine = w.memories.save(BACK, SaveMemory(key="pet", value="a cat"))[0]
    ctx = system_context("t1")

    w.clock.advance(days=6)
    first = w.job().run(remaining_ms=60_000)
    statuses = {
        m.id: getattr(memory_rows.get(w.memstore, ctx, m.id), "status", None) for m in (in_p, in_q)
    }
    assert statuses == {in_p.id: Status.ARCHIVED, in_q.id: Status.ACTIVE}
    shared_now = memory_rows.get(w.memstore, ctx, shared.id)
    assert shared_now is not None
    assert shared_now.status is Status.ARCHIVED
    mine_now = memory_rows.get(w.memstore, ctx, mine.id)
    assert mine_now is not None
    assert mine_now.status is Status.ACTIVE
    assert first.tasks["retention"].counts["memoriesArchived"] == 2

    w.clock.advance(days=6)
    second = w.job().run(remaining_ms=60_000)
    assert memory_rows.get(w.memstore, ctx, in_p.id) is None
    assert memory_rows.get(w.memstore, ctx, shared.id) is None
    assert second.tasks["retention"].counts["memoriesDeleted"] == 2


def test_an_idle_identity_with_observations_left_is_not_removed() -> None:
    w = World()
    who = Caller(user_id="quiet", team_id="t1")
    w.behaviour.append(who.identity_id, [obs(who, T0)])
    w.clock.advance(days=10)

    report = w.job().run(remaining_ms=60_000)

    assert report.tasks["sweep"].counts == {"factsExpired": 0, "identities": 1}
    assert w.behaviour.list_identities()[0] == [who.identity_id]
    w.clock.advance(days=21)  # now its only observation is past the retention
    report = w.job().run(remaining_ms=60_000)
    assert report.tasks["prune"].counts["observationsPruned"] == 1
    assert report.tasks["sweep"].counts["identitiesRemoved"] == 1
    assert w.behaviour.list_identities()[0] == []
