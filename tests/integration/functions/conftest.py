"""The Lambda handlers against a real redis-server and the embedded PostgreSQL.

``Stack`` installs one ``engram.bootstrap.Container`` built from real parts and local SQS
stand-ins (whose workers are not started: tests deliver batches with ``deliver()``), and calls
the handlers with API Gateway HTTP API v2 events built like the local server builds them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from functions.ingest import handler as ingest_fn
from functions.ingest_consumer import handler as consumer_fn
from functions.memories import handler as memories_fn
from functions.session import handler as session_fn
from tests.support.services import RedisTarget

from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.sqs import SqsSender
from engram.api.routes import ROUTES as SPEC_ROUTES
from engram.bootstrap import Container, set_container
from engram.clock import Clock
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext
from engram.local.sqs import LocalQueue, LocalSqs
from engram.memories.models import Memory
from engram.settings import Settings

FUNCTIONS: dict[str, Any] = {
    "ingest": ingest_fn.handler,
    "session": session_fn.handler,
    "memories": memories_fn.handler,
}
#: route key -> function, from the route table (as ``engram serve`` and infra/ map them)
ROUTE_FUNCTION = {route.route_key: route.function for route in SPEC_ROUTES}


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any


def claims(user: str, team: str = "acme", groups: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"sub": user, "custom:team": team, "scope": "engram/user"}
    if groups:
        out["cognito:groups"] = list(groups)
    return out


def api_event(
    route_key: str,
    *,
    user: str | None = "alice",
    team: str = "acme",
    groups: tuple[str, ...] = (),
    body: Any = None,
    path: Mapping[str, str] | None = None,
    query: str = "",
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway v2 event for ``route_key`` ("POST /v1/memories/{id}")."""
    method, _, template = route_key.partition(" ")
    raw_path = template
    for name, value in (path or {}).items():
        raw_path = raw_path.replace("{" + name + "}", value)
    if isinstance(body, bytes):
        raw = body
    elif body is None:
        raw = b""
    else:
        raw = json.dumps(body).encode()
    return build_event(
        method=method,
        raw_path=raw_path,
        raw_query=query,
        headers=list((headers or {}).items()),
        body=raw,
        route_key=route_key,
        path_parameters=dict(path or {}),
        source_ip="127.0.0.1",
        claims=None if user is None else claims(user, team, groups),
    )


@dataclass
class Stack:
    settings: Settings
    container: Container
    sqs: LocalSqs
    ingest_queue: LocalQueue
    extraction_queue: LocalQueue
    closers: list[Any] = field(default_factory=list)
    redis_target: RedisTarget | None = None  # the deployment behind settings.redis_url

    def call(self, route_key: str, **kwargs: Any) -> Response:
        event = api_event(route_key, **kwargs)
        fn = FUNCTIONS[ROUTE_FUNCTION[route_key]]
        raw = fn(event, FakeLambdaContext())
        text = raw.get("body")
        return Response(
            status=int(raw["statusCode"]),
            headers=dict(raw.get("headers") or {}),
            body=json.loads(text) if text else None,
        )

    def deliver(self, rounds: int = 20) -> int:
        """Deliver queued ingest messages to the consumer handler until none is visible."""
        total = 0
        for _ in range(rounds):
            n = self.ingest_queue.process_once()
            if n == 0:
                break
            total += n
        return total

    def redis(self) -> Any:
        return self.container.redis

    def proposed(self, key: str, value: str, confidence: float = 0.8) -> Memory:
        """A memory proposed for alice of acme from a conversation: pending review."""
        memory = self.container.memories.jobs.propose(
            "acme", "alice", None, key, value, confidence, "conv-1"
        )
        assert memory is not None
        return memory

    def redis_key_names(self) -> list[str]:
        """Every key on the deployment (listed as the administrator)."""
        assert self.redis_target is not None
        return [k.decode() for k in self.redis_target.key_names()]


def peek_records(queue: LocalQueue) -> list[dict[str, Any]]:
    """The SQS records ``queue`` holds, as its consumer would get them; they stay queued
    (the peeking consumer reports every record failed, so each is redelivered)."""
    captured: dict[str, dict[str, Any]] = {}

    def peek(event: dict[str, Any], context: Any) -> dict[str, Any]:
        for record in event["Records"]:
            captured.setdefault(record["messageId"], record)
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

    original, queue.consumer = queue.consumer, peek
    batch_size, queue.batch_size = queue.batch_size, 10_000  # one batch sees every message
    try:
        queue.process_once()
    finally:
        queue.batch_size = batch_size
        queue.consumer = original
    return list(captured.values())


def make_stack(
    settings: Settings,
    *,
    redis_client: Any = None,
    database_url: str | None = None,
    clock: Clock | None = None,
    parts: dict[str, Any] | None = None,
) -> Stack:
    """``parts``: container parts given instead of built (say, a key store that is down)."""
    sqs = LocalSqs()
    ingest = LocalQueue(
        "ingest", consumer_fn.handler, visibility_timeout_s=0.0, max_receive_count=100
    )
    extraction = LocalQueue("extraction", visibility_timeout_s=0.0)
    sqs.add_queue(ingest)
    sqs.add_queue(extraction)
    parts = dict(parts or {})
    if redis_client is not None:
        parts["redis"] = redis_client
    container = Container(
        settings,
        clock=clock,
        database_url=database_url or settings.database_url,
        migrate=False,
        sqs=sqs,
        ingest_queue=SqsSender(sqs, ingest.url),
        extraction_queue=SqsSender(sqs, extraction.url),
        **parts,
    )
    return Stack(settings, container, sqs, ingest, extraction)


@pytest.fixture(autouse=True)
def _quiet_powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def settings_for(redis: RedisTarget, database_url: str, tmp: Any, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        **redis.settings(),
        "database_url": database_url,
        "data_dir": tmp,
        "database_connect_timeout_s": 1,
        "consolidation_budget_ms": 2000,
        **extra,
    }
    return Settings(**values)


@pytest.fixture
def migrated_url(database_url: str) -> str:
    apply_migrations(database_url, embedding_dimensions=1024)
    return database_url


@pytest.fixture
def clock() -> Clock | None:
    """The stack's clock: the system clock unless a test module overrides this fixture."""
    return None


@contextmanager
def installed(built: Stack) -> Iterator[Stack]:
    """The stack's container is the handlers' while in the block, and closed after it."""
    old = set_container(built.container)
    try:
        yield built
    finally:
        set_container(old)
        built.container.close()
        built.container.redis.close()


@pytest.fixture
def stack(
    redis_target: RedisTarget, migrated_url: str, tmp_path: Any, clock: Clock | None
) -> Iterator[Stack]:
    settings = settings_for(redis_target, migrated_url, tmp_path)
    built = make_stack(settings, clock=clock)
    built.redis_target = redis_target
    with installed(built):
        yield built


@pytest.fixture
def make(tmp_path: Any) -> Iterator[Any]:
    """Build and install a stack from explicit settings (fault tests)."""
    made: list[Stack] = []

    def factory(settings: Settings, **kwargs: Any) -> Stack:
        built = make_stack(settings, **kwargs)
        set_container(built.container)
        made.append(built)
        return built

    yield factory
    set_container(None)
    for built in made:
        built.container.close()
