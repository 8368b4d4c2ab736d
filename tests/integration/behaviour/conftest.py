"""Fixtures for behavioural memory on a real redis-server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.models import Observation, ObservationType
from engram.clock import FakeClock

IDENTITY = "team-a:user-1"
MakeObs = Callable[..., Observation]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture
def store(client: redis.Redis, clock: FakeClock) -> RedisBehaviourStore:
    return RedisBehaviourStore(client, prefix="engram", ttl_days=90, clock=clock)


@pytest.fixture
def make_obs(clock: FakeClock) -> MakeObs:
    def make(
        kind: str, what: Any, *, at: int | None = None, identity: str = IDENTITY, **extra: Any
    ) -> Observation:
        t = ObservationType(kind)
        if t is ObservationType.TOOL_SUCCESS:
            md: dict[str, Any] = {"toolName": what, "durationMs": 10}
        elif t is ObservationType.TOOL_FAILURE:
            md = {"toolName": what, "durationMs": 10, "error": "boom"}
        elif t is ObservationType.ENTITY_ACCESS:
            etype, eid, *name = what
            md = {"entityType": etype, "entityId": eid}
            if name:
                md["entityName"] = name[0]
        else:
            md = {"domain": what, "query": f"about {what}"}
        return Observation(
            identity_id=identity,
            type=t,
            content=f"{kind} {what}",
            metadata=md,
            created_at=clock.now_ms() if at is None else at,
            **extra,
        )

    return make
