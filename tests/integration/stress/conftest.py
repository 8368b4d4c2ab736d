"""The stress tier: the local service (``engram serve``'s app) driven over real HTTP, with its
Redis and PostgreSQL optionally behind a ``FaultProxy``.

``Live`` is the app of ``engram.local.app.build_app`` served by ``LocalService`` on a free
loopback port, in this process (so a test can reach its SQS stand-in), over a real
redis-server and the embedded PostgreSQL. ``ledger()`` reads, straight from Redis, what the
behavioural store holds for an identity, so tests can reconcile every 202 against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from functions.local import handlers
from tests.support.faultproxy import FaultProxy
from tests.support.ledger import Ledger, assert_exactly_once, ledger
from tests.support.polling import eventually as poll
from tests.support.services import RedisTarget
from tests.support.serving import serve

from engram.adapters.postgres.migrate import apply_migrations
from engram.bootstrap import set_container
from engram.local.app import LocalApp, build_app
from engram.local.server import LocalService
from engram.local.sqs import LocalQueue
from engram.local.tokens import TokenSigner
from engram.settings import Settings

T = TypeVar("T")
__all__ = ["Ledger", "assert_exactly_once", "eventually", "ledger"]


@pytest.fixture(autouse=True)
def _quiet_powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def eventually(probe: Callable[[], T], *, timeout_s: float = 20.0, every_s: float = 0.1) -> T:
    return poll(probe, timeout_s=timeout_s, every_s=every_s)


@dataclass
class Live:
    settings: Settings
    app: LocalApp
    service: LocalService
    signer: TokenSigner
    redis_target: RedisTarget
    _clients: list[httpx.Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.service.url

    @property
    def queue(self) -> LocalQueue:
        assert self.app.ingest_queue is not None
        return self.app.ingest_queue

    def token(self, user: str = "alice", team: str | None = "acme", **kwargs: Any) -> str:
        return self.signer.issue(user, team, **kwargs)

    def http(self, token: str | None = None, **headers: str) -> httpx.Client:
        hdrs = dict(headers)
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        client = httpx.Client(base_url=self.url, headers=hdrs, timeout=30.0)
        self._clients.append(client)
        return client

    def user(self, user: str = "alice", team: str = "acme", **kwargs: Any) -> httpx.Client:
        return self.http(self.token(user, team, **kwargs))

    def redis(self) -> redis.Redis:
        """A client as Engram's user."""
        client: redis.Redis = self.redis_target.client()
        return client

    def redis_admin(self) -> redis.Redis:
        """A client as the administrator (it may list keys)."""
        client: redis.Redis = self.redis_target.admin()
        return client

    def ledger(self, identity_id: str) -> Ledger:
        client = self.redis()
        try:
            return ledger(client, identity_id, self.settings.redis_key_prefix)
        finally:
            client.close()

    def stop(self) -> bool:
        for c in self._clients:
            c.close()
        ok = self.service.stop()
        set_container(None)
        return ok


def start_live(
    redis_target: RedisTarget, database_url: str, data_dir: Path, **overrides: Any
) -> Live:
    values: dict[str, Any] = {
        **redis_target.settings(),
        "database_url": database_url,
        "data_dir": data_dir,
        "port": 0,
        "database_connect_timeout_s": 1,
        "maintenance_interval_s": 3600,
        **overrides,
    }
    settings = Settings(**values)
    app = build_app(
        settings,
        handlers=handlers(),
        parts={"database_url": database_url, "migrate": False},
        run_maintenance=False,
    )
    service = serve(app, settings)
    signer = TokenSigner(data_dir, audience=settings.local_audience, settings=settings)
    return Live(settings, app, service, signer, redis_target)


@pytest.fixture
def migrated_url(database_url: str) -> str:
    apply_migrations(database_url, embedding_dimensions=1024)
    return database_url


@pytest.fixture
def live_factory(tmp_path: Path) -> Iterator[Callable[..., Live]]:
    made: list[Live] = []

    def factory(redis_target: RedisTarget, database_url: str, **overrides: Any) -> Live:
        built = start_live(redis_target, database_url, tmp_path, **overrides)
        made.append(built)
        return built

    yield factory
    for built in made:
        built.stop()


@pytest.fixture
def live(redis_target: RedisTarget, migrated_url: str, live_factory: Callable[..., Live]) -> Live:
    """The live service on each Redis deployment in turn (standalone, then cluster)."""
    return live_factory(redis_target, migrated_url)


@pytest.fixture
def standalone_live(
    standalone_redis: RedisTarget, migrated_url: str, live_factory: Callable[..., Live]
) -> Live:
    """The live service on the standalone server only: for what Redis takes no part in (the
    token and role checks refuse before any store is touched)."""
    return live_factory(standalone_redis, migrated_url)


def postgres_proxy(database_url: str) -> tuple[FaultProxy, str]:
    """A started proxy in front of ``database_url`` and the TCP URL that goes through it."""
    proxy = FaultProxy.for_postgres_url(database_url).start()
    dbname = urlsplit(database_url).path.lstrip("/") or "postgres"
    return proxy, proxy.url_for_postgres(dbname=dbname)
