"""The deploy-time migration trigger runs ``engram migrate`` with the secret's credentials."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from infra.bundling import build_bundle, migrate_function
from infra.functions.migrate import handler as migrate_handler
from tests.infrastructure.bundles import HOST, import_in_bundle

pytestmark = pytest.mark.infrastructure

ENV = {
    "ENGRAM_DATABASE_URL": "postgresql://proxy.example:5432/engram?sslmode=require",
    "ENGRAM_DATABASE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:engram/prod/db",
}


class FakeSecrets:
    def __init__(self, secret: dict[str, str]) -> None:
        self.secret = secret
        self.asked: list[str] = []

    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]:  # noqa: N803
        self.asked.append(SecretId)
        return {"SecretString": json.dumps(self.secret)}


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


class FakeMigrate:
    """Stands in for ``engram.adapters.postgres.migrate``: records argv, returns ``code``."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.code = 0

    def main(self, argv: list[str]) -> int:
        self.calls.append(argv)
        return self.code


@pytest.fixture
def fake_migrate(monkeypatch: pytest.MonkeyPatch) -> FakeMigrate:
    fake = FakeMigrate()
    module = types.ModuleType("engram.adapters.postgres.migrate")
    module.main = fake.main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "engram.adapters.postgres.migrate", module)
    monkeypatch.setattr(
        migrate_handler, "_secrets_client", lambda: FakeSecrets({"username": "u", "password": "p"})
    )
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    return fake


def test_handler_runs_migrate_against_the_proxy(fake_migrate: FakeMigrate) -> None:
    assert migrate_handler.handler({}, None) == {"status": "migrated"}
    assert fake_migrate.calls == [
        ["--database-url", "postgresql://u:p@proxy.example:5432/engram?sslmode=require"]
    ]


def test_a_failed_migration_fails_the_deployment(fake_migrate: FakeMigrate) -> None:
    fake_migrate.code = 1
    with pytest.raises(migrate_handler.MigrationFailed, match="exited with 1"):
        migrate_handler.handler({}, None)


def test_the_migration_bundle_imports_its_handler(tmp_path: Path) -> None:
    spec = migrate_function()
    bundle = build_bundle(spec, tmp_path / "bundle", platform=HOST)
    assert import_in_bundle(bundle, spec.handler.rsplit(".", 1)[0], call=False) == "imported"
