"""The deploy-time migration trigger runs ``engram migrate`` with the secret's credentials, and
waits (within its own timeout) for a database that is not reachable yet."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from infra.bundling import build_bundle, migrate_function
from infra.functions.migrate import handler as migrate_handler
from tests.infrastructure.bundles import HOST, import_in_bundle
from tests.support.faultproxy import FaultProxy
from tests.support.services import EmbeddedPostgres

from engram import settings as settings_module
from engram.adapters.postgres import migrate
from engram.local.lambda_context import FakeLambdaContext
from engram.settings import Settings

pytestmark = pytest.mark.infrastructure

ENV = {
    "ENGRAM_DATABASE_URL": "postgresql://proxy.example:5432/engram?sslmode=require",
    "ENGRAM_DATABASE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:engram/prod/db",
}
APP_SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:1:secret:engram/prod/app"


class FakeSecrets:
    """One secret for every id, or one per id (``by_id``)."""

    def __init__(
        self, secret: dict[str, str], by_id: dict[str, dict[str, str]] | None = None
    ) -> None:
        self.secret = secret
        self.by_id = by_id or {}
        self.asked: list[str] = []

    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]:  # noqa: N803
        self.asked.append(SecretId)
        return {"SecretString": json.dumps(self.by_id.get(SecretId, self.secret))}


def context(remaining_s: float) -> FakeLambdaContext:
    return FakeLambdaContext(_deadline=time.monotonic() + remaining_s)


def test_credentials_come_from_the_secret_and_are_url_quoted() -> None:
    secrets = FakeSecrets({"username": "engram_admin", "password": "p@ss:w/rd%"})
    url = migrate_handler.database_url(ENV, secrets)
    assert url == (
        "postgresql://engram_admin:p%40ss%3Aw%2Frd%25@proxy.example:5432/engram?sslmode=require"
    )
    assert secrets.asked == [ENV["ENGRAM_DATABASE_SECRET_ARN"]]


def test_without_a_secret_the_url_is_used_as_is() -> None:
    env = {"ENGRAM_DATABASE_URL": "postgresql://u:p@localhost/engram"}
    assert migrate_handler.database_url(env, None) == env["ENGRAM_DATABASE_URL"]


def test_the_wait_is_the_invocations_remaining_time_less_a_margin() -> None:
    budget = migrate_handler.wait_budget_s(context(600))
    assert 600 - migrate_handler.MARGIN_S - 1 < budget <= 600 - migrate_handler.MARGIN_S
    assert migrate_handler.wait_budget_s(context(5)) == 0
    assert migrate_handler.wait_budget_s(None) == 0  # no context: one attempt


# --- the retry loop, with a fake clock ------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def apply_retrying(
        self, conninfo: Any = "postgresql://db/engram", *, wait_s: float
    ) -> migrate.Migrated:
        """``apply_migrations_retrying`` sleeping and reading the time on this clock."""
        return migrate.apply_migrations_retrying(
            conninfo,
            embedding_dimensions=8,
            wait_s=wait_s,
            sleep=self.sleep,
            monotonic=self.monotonic,
        )


def test_connection_failures_are_retried_with_backoff_until_the_server_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    outcomes: list[Exception | None] = [psycopg.OperationalError("refused")] * 4 + [None]
    urls: list[str] = []

    def apply(url: str, **_: Any) -> list[str]:
        urls.append(url)
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return ["0001_memories"]

    monkeypatch.setattr(migrate, "apply_migrations", apply)
    calls = iter(range(100))
    result = clock.apply_retrying(lambda: f"postgresql://u:p{next(calls)}@db/engram", wait_s=60)
    assert result == migrate.Migrated(["0001_memories"], attempts=5)
    assert clock.slept == [1, 2, 4, 8]
    # the credentials are read again for every attempt
    assert urls == [f"postgresql://u:p{i}@db/engram" for i in range(5)]


def test_it_gives_up_when_the_wait_is_spent_and_raises_the_last_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()

    def apply(url: str, **_: Any) -> list[str]:
        raise psycopg.OperationalError(f"refused at {clock.now}")

    monkeypatch.setattr(migrate, "apply_migrations", apply)
    with pytest.raises(psycopg.OperationalError, match="refused at 31"):
        clock.apply_retrying(wait_s=40)
    assert clock.slept == [1, 2, 4, 8, 16]  # the next wait (20 s) would overrun 40 s
    assert sum(clock.slept) <= 40


def test_sql_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    calls: list[str] = []

    def apply(url: str, **_: Any) -> list[str]:
        calls.append(url)
        raise psycopg.errors.SyntaxError("bad migration")

    monkeypatch.setattr(migrate, "apply_migrations", apply)
    with pytest.raises(psycopg.errors.SyntaxError):
        clock.apply_retrying(wait_s=600)
    assert len(calls) == 1
    assert clock.slept == []


# --- the handler ------------------------------------------------------------------------------


class FakeApply:
    """Stands in for ``apply_migrations_retrying``: records its arguments (url resolved)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error: Exception | None = None

    def __call__(self, conninfo: Any, **kwargs: Any) -> migrate.Migrated:
        self.calls.append({"url": conninfo(), **kwargs})
        if self.error is not None:
            raise self.error
        return migrate.Migrated(["0001_memories"], attempts=3)


@pytest.fixture
def fake_apply(monkeypatch: pytest.MonkeyPatch) -> FakeApply:
    fake = FakeApply()
    module = types.ModuleType("engram.adapters.postgres.migrate")
    module.apply_migrations_retrying = fake  # type: ignore[attr-defined]
    module.app_login = migrate.app_login  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "engram.adapters.postgres.migrate", module)
    secrets = FakeSecrets(
        {"username": "u", "password": "p"},
        {APP_SECRET_ARN: {"username": "engram_service", "password": "app-pass"}},
    )
    monkeypatch.setattr(migrate_handler, "_secrets_client", lambda: secrets)
    # the handler reads its settings when invoked (not the cached ones of another test)
    monkeypatch.setattr(settings_module, "get_settings", Settings)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    return fake


def test_handler_migrates_through_the_proxy_within_its_time(fake_apply: FakeApply) -> None:
    assert migrate_handler.handler({}, context(300)) == {
        "status": "migrated",
        "applied": ["0001_memories"],
        "attempts": 3,
    }
    (call,) = fake_apply.calls
    assert call["url"] == "postgresql://u:p@proxy.example:5432/engram?sslmode=require"
    assert 0 < call["wait_s"] <= 300 - migrate_handler.MARGIN_S
    assert call["login_role"] is None  # no app secret: no login role


def test_handler_creates_the_login_role_from_the_app_secret(
    fake_apply: FakeApply, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The master's credentials migrate; the app secret's become the service's login role."""
    monkeypatch.setenv("ENGRAM_DATABASE_APP_SECRET_ARN", APP_SECRET_ARN)
    migrate_handler.handler({}, context(300))
    (call,) = fake_apply.calls
    assert call["url"] == "postgresql://u:p@proxy.example:5432/engram?sslmode=require"
    assert call["login_role"] == ("engram_service", "app-pass")


def test_a_failed_migration_fails_the_deployment(fake_apply: FakeApply) -> None:
    fake_apply.error = psycopg.OperationalError("proxy.example unreachable")
    with pytest.raises(migrate_handler.MigrationFailed, match="unreachable"):
        migrate_handler.handler({}, context(60))
    fake_apply.error = psycopg.errors.SyntaxError("bad migration")
    with pytest.raises(migrate_handler.MigrationFailed, match="bad migration"):
        migrate_handler.handler({}, context(60))


def test_the_handler_waits_for_a_proxy_that_refuses_connections_then_accepts(
    postgres: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the fault proxy: down (connections refused) for a while, then up."""
    database = f"migrate_retry_{time.monotonic_ns()}"
    url = postgres.create_database(database)
    with FaultProxy.for_postgres_url(url) as proxy:
        proxy.down()
        monkeypatch.setenv("ENGRAM_DATABASE_URL", proxy.url_for_postgres(database))
        monkeypatch.delenv("ENGRAM_DATABASE_SECRET_ARN", raising=False)
        recovered = threading.Timer(2.5, proxy.pass_through)
        recovered.start()
        try:
            with caplog.at_level(logging.WARNING, logger="engram.migrate"):
                result = migrate_handler.handler({}, context(60))
        finally:
            recovered.cancel()
        stats = proxy.stats()
        assert stats.transitions == 2  # down, then up again
        assert stats.connections == 1  # every attempt while down was refused outright
    assert result["status"] == "migrated"
    assert result["attempts"] >= 2
    assert result["applied"] == [f"{m.version:04d}_{m.name}" for m in migrate.load_migrations()]
    waits = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert waits
    assert f"127.0.0.1:{proxy.port}/{database}" in waits[0]
    with psycopg.connect(url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM engram_migrations")]
    assert versions == [m.version for m in migrate.load_migrations()]


def test_the_migration_bundle_imports_its_handler(tmp_path: Path) -> None:
    spec = migrate_function()
    bundle = build_bundle(spec, tmp_path / "bundle", platform=HOST)
    assert import_in_bundle(bundle, spec.handler.rsplit(".", 1)[0], call=False) == "imported"
