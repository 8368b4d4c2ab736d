"""The composition of the job (schedules, the local pulled queue, the handler) and its Redis
state store, including Redis being down."""

from __future__ import annotations

import json
from typing import Any

import redis
from functions.maintenance import handler as maintenance_fn
from tests.integration.maintenance.conftest import World
from tests.support.services import RedisServer

from engram.adapters.maintenance_state import RedisMaintenanceState
from engram.adapters.postgres.retention import PostgresRetentionPolicies
from engram.adapters.transcript_queue import SqsTranscriptQueue
from engram.bootstrap import Container
from engram.local.lambda_context import FakeLambdaContext
from engram.memories.commands import SaveMemory
from engram.memories.ports import AccessContext
from engram.settings import Settings


def test_frequent_runs_skip_retention_daily_and_local_runs_include_it(world: World) -> None:
    memories = world.container.memories
    world.clock.advance(days=-30)
    memories.save(world.caller("alice"), SaveMemory(key="editor", value="vim"))
    world.clock.advance(days=30)
    PostgresRetentionPolicies(world.container.database).set_policy(
        AccessContext(team_id="acme", user_id="boss", elevated=True), archive_after_days=7
    )
    ctx = FakeLambdaContext()
    frequent = maintenance_fn.run({"engramSchedule": "frequent"}, ctx, container=world.container)
    assert frequent["tasks"]["retention"]["ran"] is False
    assert frequent["tasks"]["prune"]["ran"] is True
    assert frequent["tasks"]["extraction"]["ran"] is True
    daily = maintenance_fn.run({"engramSchedule": "daily"}, ctx, container=world.container)
    assert daily["tasks"]["retention"]["counts"]["memoriesArchived"] == 1
    local = maintenance_fn.run({"detail-type": "Scheduled Event"}, ctx, container=world.container)
    assert local["tasks"]["retention"]["ran"] is True
    assert local["tasks"]["retention"]["counts"]["memoriesArchived"] == 0
    assert local["state"]["runs"] == 3  # one state document across schedules


def test_state_survives_between_runs_in_redis(world: World) -> None:
    world.run()
    store = RedisMaintenanceState(world.container.redis)
    saved = store.get()
    assert saved is not None
    assert saved["runs"] == 1
    world.run()
    assert store.get()["runs"] == 2  # type: ignore[index]


def test_an_unreadable_state_document_is_replaced(world: World) -> None:
    world.container.redis.set("engram:maintenance:state", "{not json")
    report = world.run()
    assert report.state_reset
    assert report.errors == 0
    fresh = json.loads(world.container.redis.get("engram:maintenance:state"))
    assert fresh["runs"] == 1


def test_redis_down_the_run_fails_soft_and_postgres_tasks_go_on(
    world: World, own_redis: RedisServer
) -> None:
    """Redis dead: the state store and the behavioural tasks (insights too) fail soft (in the
    report); retention, the erasure backstop of memories and extraction (erasure log on
    PostgreSQL) still run."""
    world.clock.advance(days=-30)
    world.container.memories.save(world.caller("alice"), SaveMemory(key="editor", value="vim"))
    world.clock.advance(days=30)
    PostgresRetentionPolicies(world.container.database).set_policy(
        AccessContext(team_id="acme", user_id="boss", elevated=True), archive_after_days=7
    )
    world.transcript("alice", "conv-1", "My favourite editor is vim.")
    dead = redis.Redis.from_url(own_redis.url, socket_timeout=0.2, socket_connect_timeout=0.2)
    own_redis.stop()
    state = RedisMaintenanceState(dead)
    assert state.get() is None  # unreadable: a fresh pass
    state.set({"runs": 1})  # dropped (logged), not raised
    container = Container(
        world.settings,
        clock=world.clock,
        redis=dead,
        database=world.container.database,
        database_url=world.url,
        migrate=False,
        sqs=world.container.sqs,
        transcript_queue=world.queue,
    )
    body = maintenance_fn.run({"engramSchedule": "daily"}, FakeLambdaContext(), container=container)
    tasks = body["tasks"]
    assert tasks["prune"]["error"]
    assert tasks["retention"]["error"] is None
    assert tasks["retention"]["counts"]["memoriesArchived"] == 1
    assert tasks["sweep"]["error"]
    assert tasks["erasure"]["error"] is None  # no erasure pending; the log is on PostgreSQL
    assert tasks["extraction"]["error"] is None
    assert tasks["extraction"]["counts"]["proposalsCreated"] == 1
    assert world.queue.pending() == 0
    # the tasks that read the behavioural store: insights aggregates its facts
    assert sorted(name for name, t in tasks.items() if t["error"]) == ["insights", "prune", "sweep"]
    dead.close()


def test_build_uses_the_sqs_adapter_outside_local() -> None:
    class FakeSqsClient:
        pass

    settings = Settings(
        extraction_queue_url="https://sqs.us-east-1.amazonaws.com/1/q",
        extraction_dlq_url="https://sqs.us-east-1.amazonaws.com/1/q-dlq",
    )
    container = Container(settings, sqs=FakeSqsClient())
    queue: Any = container.transcript_queue
    assert isinstance(queue, SqsTranscriptQueue)
    assert queue.dlq_url == settings.extraction_dlq_url
    assert container.transcript_queue is queue  # built once per container
    assert Container(Settings()).transcript_queue is None
