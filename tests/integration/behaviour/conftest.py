"""Fixtures for behavioural memory on a real redis-server and a real Redis Cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from tests.support.observations import MakeObs, observation_factory
from tests.support.services import RedisTarget

from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(redis_target: RedisTarget) -> Iterator[redis.Redis]:
    """A client as Engram's user (standalone or cluster, as ``redis_target``)."""
    c = redis_target.client()
    yield c
    c.close()


@pytest.fixture
def store(client: redis.Redis, clock: FakeClock) -> RedisBehaviourStore:
    return RedisBehaviourStore(client, prefix="engram", ttl_days=90, clock=clock)


@pytest.fixture
def make_obs(clock: FakeClock) -> MakeObs:
    return observation_factory(clock)
