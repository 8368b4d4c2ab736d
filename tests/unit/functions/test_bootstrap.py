"""The composition root builds nothing until used, and uses the parts it is given."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fakeredis

from engram.adapters.secrets import database_url_from_secret
from engram.bootstrap import Container, get_container, set_container
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

    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]:  # noqa: N803
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
    assert db.conninfo == "postgresql://svc:p%40ss%2Fw%3Ard@proxy.example:5432/engram"
    assert not container.built("sqs")


def test_the_secret_is_read_once() -> None:
    secrets = FakeSecrets()
    container = Container(UNREACHABLE, secrets=secrets)
    _ = container.database_url, container.database_url
    assert secrets.asked == [UNREACHABLE.database_secret_arn]


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
