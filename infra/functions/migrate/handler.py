"""Deploy-time migration: a CDK trigger invokes this once per deployment of a changed bundle.

It runs the same code as ``engram migrate`` (``engram.adapters.postgres.migrate.main``) against
the database behind the RDS Proxy: ``ENGRAM_DATABASE_URL`` names the proxy (no credentials) and
``ENGRAM_DATABASE_SECRET_ARN`` the Secrets Manager secret holding them, read at run time (the
secret rotates, so credentials are never baked into the environment).
Migrations are forward-only and serialised by an advisory lock, so a re-run is harmless.
Raising fails the trigger, which fails (and rolls back) the deployment.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, Protocol


class MigrationFailed(RuntimeError):
    """``engram migrate`` returned a non-zero exit code."""


class SecretsClient(Protocol):
    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]: ...  # noqa: N803


def database_url(env: Mapping[str, str], secrets: SecretsClient | None) -> str:
    """The proxy URL with the secret's username and password filled in (the service's own
    implementation: ``engram.adapters.secrets.database_url_from_secret``)."""
    adapter = importlib.import_module("engram.adapters.secrets")
    url: str = adapter.database_url_from_secret(
        env["ENGRAM_DATABASE_URL"], env.get("ENGRAM_DATABASE_SECRET_ARN"), secrets
    )
    return url


def _secrets_client() -> SecretsClient:
    boto3 = importlib.import_module("boto3")
    client: SecretsClient = boto3.client("secretsmanager")
    return client


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    env = dict(os.environ)
    secrets = _secrets_client() if env.get("ENGRAM_DATABASE_SECRET_ARN") else None
    migrate = importlib.import_module("engram.adapters.postgres.migrate")
    code: int = migrate.main(["--database-url", database_url(env, secrets)])
    if code != 0:
        raise MigrationFailed(f"engram migrate exited with {code}")
    return {"status": "migrated"}
