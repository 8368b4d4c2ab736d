"""Whole runs of the maintenance job on real Redis + PostgreSQL: a second run in a row changes
nothing; a run cut off by its time budget resumes where it stopped."""

from __future__ import annotations

from typing import Any

from tests.integration.maintenance.conftest import DAY, T0, Ticking, World

from engram.adapters.postgres.retention import PostgresRetentionPolicies
from engram.behaviour.models import Observation, ObservationType
from engram.maintenance import MaintenanceConfig, MaintenanceReport
from engram.memories.commands import SaveMemory
from engram.memories.ports import AccessContext

MUTATIONS = {
    "prune": ["observationsPruned"],
    "sweep": ["factsExpired", "identitiesRemoved"],
    "retention": ["memoriesArchived", "memoriesDeleted"],
    "erasure": ["behaviourLeftovers", "memoryLeftovers"],
    "extraction": [
        "messagesReceived",
        "proposalsCreated",
        "proposalsRefreshed",
        "jobsDeadLettered",
    ],
}


def observation(identity: str, created_at: int, tool: str = "search") -> Observation:
    return Observation(
        identity_id=identity,
        type=ObservationType.TOOL_SUCCESS,
        metadata={"toolName": tool, "durationMs": 12},
        created_at=created_at,
    )


def redis_snapshot(world: World) -> dict[str, Any]:
    client = world.redis_target.admin()  # lists keys: the administrator's right, not Engram's
    state_key = f"{world.settings.redis_key_prefix}:maintenance:state"
    out: dict[str, Any] = {}
    for raw in client.scan_iter(count=500):
        key = raw.decode() if isinstance(raw, bytes) else raw
        if key == state_key:
            continue
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            value: Any = client.get(key)
        elif kind == "hash":
            value = sorted(client.hgetall(key).items())
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        else:
            value = client.xrange(key) if kind == "stream" else kind
        out[key] = value
    client.close()
    return out


def pg_snapshot(world: World) -> dict[str, Any]:
    return {
        "memories": world.sql(
            "SELECT id, scope, owner_id, user_id, key, value, status, source_channel_id,"
            " created_at, updated_at FROM memories ORDER BY id"
        ),
        "erasures": world.sql("SELECT * FROM erasures ORDER BY 1, 2, 3"),
    }


def mutations(report: MaintenanceReport) -> dict[str, int]:
    return {
        f"{task}.{name}": report.tasks[task].counts.get(name, 0)
        for task, names in MUTATIONS.items()
        for name in names
    }


def seed(world: World) -> None:
    behaviour = world.container.behaviour
    memories = world.container.memories
    # an identity with observations past the 30-day retention, one idle with facts
    world.clock.set(T0 - 40 * DAY)  # recorded when it arrived: record drops aged observations
    behaviour.record("acme:carol", [observation("acme:carol", T0 - 40 * DAY)])
    world.clock.set(T0)
    behaviour.record("acme:carol", [observation("acme:carol", T0 - DAY, "fetch")])
    world.clock.set(T0 - 60 * DAY)
    behaviour.record("acme:dave", [observation("acme:dave", T0 - 60 * DAY)])
    behaviour.consolidate("acme:dave")
    # explicit memories under a team retention policy
    memories.save(world.caller("alice"), SaveMemory(key="editor", value="vim"))
    world.clock.set(T0 - 2 * DAY)
    memories.save(world.caller("alice"), SaveMemory(key="shell", value="zsh"))
    PostgresRetentionPolicies(world.container.database).set_policy(
        AccessContext(team_id="acme", user_id="boss", elevated=True),
        archive_after_days=10,
        delete_archived_after_days=30,
    )
    # erin is erased; an observation from before the erasure arrives late
    memories.save(world.caller("erin"), SaveMemory(key="city", value="Lyon"))
    world.container.me.erase(world.caller("erin"))
    behaviour.record("acme:erin", [observation("acme:erin", T0 - 3 * DAY)])
    world.clock.set(T0)
    world.transcript("frank", "conv-f", "My favourite editor is vim.")


def test_a_second_run_in_a_row_changes_nothing(world: World) -> None:
    seed(world)
    first = world.run()
    assert first.errors == 0
    assert not first.cut_off
    done = mutations(first)
    assert done["prune.observationsPruned"] == 2  # carol's and dave's, past 30 days
    assert done["sweep.factsExpired"] == 1  # dave, idle for 60 days: his fact decayed away
    assert done["sweep.identitiesRemoved"] == 1  # ... and nothing is left of him
    assert done["retention.memoriesArchived"] == 1  # alice's idle "editor"
    assert done["erasure.behaviourLeftovers"] == 1  # erin's late observation
    assert done["extraction.proposalsCreated"] == 1  # frank's transcript
    before = (redis_snapshot(world), pg_snapshot(world))

    second = world.run()
    assert second.errors == 0
    assert mutations(second) == dict.fromkeys(mutations(second), 0)
    assert (redis_snapshot(world), pg_snapshot(world)) == before
    assert second.state.runs == first.state.runs + 1


def test_a_run_cut_off_by_its_budget_resumes_where_it_stopped(world: World) -> None:
    behaviour = world.container.behaviour
    users = [f"acme:u{i:02d}" for i in range(12)]
    for i, ident in enumerate(users):
        world.clock.set(T0 - 40 * DAY + i)  # index order = u00 .. u11
        behaviour.record(ident, [observation(ident, T0 - 40 * DAY)])
    world.clock.set(T0)
    config = MaintenanceConfig(page_size=3, safety_margin_ms=0)

    def remaining() -> dict[str, int]:
        return {u: len(behaviour.store.since(u, None)) for u in users}

    first = world.run(config=config, monotonic=Ticking(step_ms=10), remaining_ms=150)
    assert first.cut_off
    assert first.tasks["prune"].cut_off
    assert first.state.next_task == "prune"
    assert not first.tasks["sweep"].ran  # the cut stops the run, the others wait
    pruned_first = first.tasks["prune"].counts.get("observationsPruned", 0)
    left = remaining()
    done_ids = [u for u in users if left[u] == 0]
    assert 0 < pruned_first < len(users)
    assert done_ids == users[:pruned_first]  # a prefix of the index, in order
    assert first.state.prune.cursor == pruned_first

    second = world.run(config=config, monotonic=Ticking(step_ms=0))
    assert not second.cut_off
    assert second.tasks["prune"].completed_cycle
    assert second.tasks["prune"].counts["observationsPruned"] == len(users) - pruned_first
    assert second.tasks["prune"].counts["identities"] == len(users) - pruned_first
    assert remaining() == dict.fromkeys(users, 0)
    assert second.state.prune.cycle == first.state.prune.cycle + 1
    assert second.state.prune.cursor == 0
