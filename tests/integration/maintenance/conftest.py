"""Fixtures of the maintenance integration tests: a migrated embedded PostgreSQL database, a
real redis-server, and a ``World`` = one ``Container`` over both with a fake clock and the
local SQS stand-in (the extraction queue pulled by the job, as ``engram serve`` runs it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.support.callers import team_caller
from tests.support.services import RedisTarget

from engram.adapters.postgres.pool import Database
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.adapters.redis_client import make_redis
from engram.adapters.sqs import SqsSender
from engram.api.models import TranscriptRequest
from engram.behaviour.service import BehaviourService
from engram.bootstrap import Container
from engram.bootstrap.maintenance import build_maintenance_job
from engram.clock import MS_PER_DAY, FakeClock
from engram.extraction import TranscriptJob
from engram.local.pullqueue import PullQueue
from engram.local.sqs import LocalSqs
from engram.maintenance import MaintenanceJob, MaintenanceReport
from engram.settings import Settings

DIMS = 64
DAY = MS_PER_DAY
T0 = 1_767_225_600_000 + 100 * DAY


@pytest.fixture(autouse=True)
def _quiet_powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


class Ticking:
    """A monotonic clock that moves ``step_ms`` every time it is read (a run that takes
    time, deterministically)."""

    def __init__(self, step_ms: int = 0) -> None:
        self.now = 0
        self.step_ms = step_ms

    def now_ms(self) -> int:
        self.now += self.step_ms
        return self.now


@dataclass
class World:
    settings: Settings
    container: Container
    clock: FakeClock
    queue: PullQueue
    url: str
    redis_target: RedisTarget

    caller = staticmethod(team_caller)

    def transcript(
        self,
        user: str,
        conversation_id: str,
        *contents: str,
        team: str = "acme",
        persona_id: str | None = None,
    ) -> TranscriptJob:
        """Queued exactly as ``POST /v1/conversations/{id}/transcript`` queues it."""
        request = TranscriptRequest.model_validate(
            {
                "personaId": persona_id,
                "messages": [{"role": "user", "content": c} for c in contents],
            }
        )
        return self.container.ingest.queue_transcript(
            self.caller(user, team), request.command(conversation_id)
        )

    def job(self, **kwargs: Any) -> MaintenanceJob:
        return build_maintenance_job(self.container, **kwargs)

    def run(self, **kwargs: Any) -> MaintenanceReport:
        remaining = kwargs.pop("remaining_ms", 600_000)
        return self.job(**kwargs).run(remaining_ms=remaining)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """As the database owner (no RLS): what is really stored."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(query, params).fetchall())


@pytest.fixture
def world(redis_target: RedisTarget, db: Database, tmp_path: Path) -> Iterator[World]:
    clock = FakeClock(T0)
    settings = Settings(
        **redis_target.settings(),
        database_url=db.conninfo,
        data_dir=tmp_path,
        embedding_dimensions=DIMS,
        extraction_max_receives=3,
    )
    redis = make_redis(settings)
    # the behavioural store on the fake clock too (its identity index records activity times)
    store = RedisBehaviourStore(redis, prefix=settings.redis_key_prefix, clock=clock)
    behaviour = BehaviourService(store, clock=clock)
    sqs = LocalSqs()
    queue = PullQueue("engram-extraction")
    sqs.add_queue(queue)
    container = Container(
        settings,
        clock=clock,
        redis=redis,
        behaviour=behaviour,
        database=db,
        database_url=db.conninfo,
        migrate=False,
        sqs=sqs,
        ingest_queue=None,
        extraction_queue=SqsSender(sqs, queue.url),
        transcript_queue=queue,
    )
    try:
        yield World(settings, container, clock, queue, db.conninfo, redis_target)
    finally:
        container.close()
        redis.close()
