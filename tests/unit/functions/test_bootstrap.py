"""The composition root builds nothing until used, and uses the parts it is given."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fakeredis

from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.adapters.secrets import DatabaseLogin, Secret, database_url_from_secret
from engram.behaviour.models import Observation, ObservationType
from engram.behaviour.service import BehaviourService
from engram.bootstrap import Container, get_container, set_container
from engram.clock import MS_PER_DAY, FakeClock
from engram.settings import Settings

UNREACHABLE = Settings(
    redis_url="redis://10.255.255.1:6379/0",
    database_url="postgresql://proxy.example:5432/engram",
    database_secret_arn="arn:aws:secretsmanager:eu-west-1:1:secret:db",
    ingest_queue_url="https://sqs.eu-west-1.amazonaws.com/1/ingest",
)


class FakeSecrets:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_secret_value(self, *, SecretId: str, **options: Any) -> Mapping[str, Any]:  # noqa: N803
        assert options in ({}, {"VersionStage": "AWSCURRENT"})
        self.asked.append(SecretId)
        return {"SecretString": json.dumps({"username": "svc", "password": "p@ss/w:rd"})}


def test_construction_builds_and_connects_nothing() -> None:
    container = Container(UNREACHABLE)
    for part in ("redis", "behaviour", "database", "memories", "sqs", "ingest_queue"):
        assert not container.built(part)


def test_redis_client_and_database_are_built_lazily_without_connecting() -> None:
    container = Container(UNREACHABLE, secrets=FakeSecrets())
    assert container.behaviour is container.behaviour  # built once, no command sent yet
    assert container.built("redis")
    db = container.database
    assert callable(db.conninfo)  # every new connection asks the (cached) secret
    assert db.conninfo() == "postgresql://svc:p%40ss%2Fw%3Ard@proxy.example:5432/engram"
    assert not container.built("sqs")


def test_the_secret_is_read_once_until_it_expires_or_is_refused() -> None:
    secrets = FakeSecrets()
    container = Container(UNREACHABLE, secrets=secrets)
    _ = container.database_url, container.database_url
    assert secrets.asked == [UNREACHABLE.database_secret_arn]
    db = container.database
    assert callable(db.conninfo)
    db.conninfo(), db.conninfo()
    assert len(secrets.asked) == 2  # the pool's own read, then from the cache
    secrets_read_again = DatabaseLogin(UNREACHABLE.database_url or "", Secret("s", secrets))
    secrets_read_again.conninfo()
    secrets_read_again.refreshed()
    assert len(secrets.asked) == 4  # a refused login reads the secret again at once


def test_without_a_secret_the_url_is_used_as_is() -> None:
    assert database_url_from_secret("postgresql://a@h/db", None, FakeSecrets()) == (
        "postgresql://a@h/db"
    )


def test_given_parts_are_used() -> None:
    client = fakeredis.FakeRedis()
    sent: list[list[str]] = []

    class Queue:
        def send(self, bodies: list[str]) -> int:
            sent.append(list(bodies))
            return len(bodies)

    container = Container(Settings(), redis=client, ingest_queue=Queue(), extraction_queue=None)
    assert container.redis is client
    assert container.ingest.queue is container.ingest_queue
    assert container.extraction_queue is None


def test_get_container_is_per_process_and_replaceable() -> None:
    mine = Container(Settings())
    old = set_container(mine)
    try:
        assert get_container() is mine
    finally:
        set_container(old)


def _behaviour_on(clock: FakeClock, retention_days: int) -> BehaviourService:
    settings = Settings(observation_retention_days=retention_days)
    return Container(settings, redis=fakeredis.FakeRedis(), clock=clock).behaviour


def test_behaviour_store_runs_on_the_containers_clock() -> None:
    clock = FakeClock(start_ms=1_000_000_000_000)  # 2001: far from the system clock
    behaviour = _behaviour_on(clock, 30)
    obs = Observation(
        identity_id="alice",
        type=ObservationType.TOOL_SUCCESS,
        metadata={"toolName": "search", "durationMs": 5},
        created_at=clock.now_ms(),
    )
    behaviour.store.append("alice", [obs])
    store = behaviour.store
    assert isinstance(store, RedisBehaviourStore)
    # the activity index is stamped with the container's clock, not the system's
    assert store.list_identities(active_before_ms=clock.now_ms() + 1)[0] == ["alice"]
    assert store.list_identities(active_before_ms=clock.now_ms())[0] == []


def test_behaviour_keeps_observations_for_the_configured_retention() -> None:
    def pending_after_consolidation(retention_days: int) -> int:
        clock = FakeClock()
        behaviour = _behaviour_on(clock, retention_days)
        old = Observation(
            identity_id="alice",
            type=ObservationType.TOOL_SUCCESS,
            metadata={"toolName": "search", "durationMs": 5},
            created_at=clock.now_ms() - 2 * MS_PER_DAY,
        )
        behaviour.store.append("alice", [old])
        behaviour.consolidate("alice")
        return len(behaviour.store.since("alice", None))

    assert pending_after_consolidation(30) == 1  # within 30 days: kept
    assert pending_after_consolidation(1) == 0  # Settings.observation_retention_days=1 applies
