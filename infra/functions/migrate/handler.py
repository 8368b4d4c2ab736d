"""Deploy-time migration: a CDK trigger invokes this once per deployment of a changed bundle.

It runs the same code as ``engram migrate`` (``engram.adapters.postgres.migrate``) against the
database behind the RDS Proxy: ``ENGRAM_DATABASE_URL`` names the proxy (no credentials) and
``ENGRAM_DATABASE_SECRET_ARN`` the Secrets Manager secret holding them (the master user's), read
at run time (the secret rotates, so credentials are never baked into the environment). With
``ENGRAM_DATABASE_APP_SECRET_ARN`` it then creates, or updates, the service's login role from
that secret (its ``username`` and current ``password``), so the role the functions log in as
always matches its secret.

On a first deploy the proxy's targets can take minutes to become available after the data
stack is complete, so connecting is retried with backoff for as long as the invocation has
time left (less ``MARGIN_S`` to report), re-reading the secret for every attempt and logging
what it waits for. Migrations are forward-only and serialised by an advisory lock, so a re-run
is harmless. Raising fails the trigger, which fails (and rolls back) the deployment.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, Protocol

MARGIN_S = 15.0
"""Seconds kept back from the invocation's remaining time to report the outcome."""


class MigrationFailed(RuntimeError):
    """The migrations could not be applied (the database stayed unreachable, or SQL failed)."""


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


def wait_budget_s(context: Any) -> float:
    """How long to keep retrying: the invocation's remaining time less ``MARGIN_S``."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    remaining_s = getter() / 1000 if callable(getter) else MARGIN_S
    return max(0.0, remaining_s - MARGIN_S)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    env = dict(os.environ)
    named = ("ENGRAM_DATABASE_SECRET_ARN", "ENGRAM_DATABASE_APP_SECRET_ARN")
    secrets = _secrets_client() if any(env.get(name) for name in named) else None
    migrate = importlib.import_module("engram.adapters.postgres.migrate")
    settings = importlib.import_module("engram.settings").get_settings()
    psycopg = importlib.import_module("psycopg")
    try:
        result = migrate.apply_migrations_retrying(
            lambda: database_url(env, secrets),
            embedding_dimensions=settings.embedding_dimensions,
            wait_s=wait_budget_s(context),
            connect_timeout_s=settings.database_connect_timeout_s,
            login_role=migrate.app_login(settings, secrets),
        )
    except psycopg.Error as exc:
        raise MigrationFailed(f"engram migrate failed: {exc}") from exc
    return {"status": "migrated", "applied": result.applied, "attempts": result.attempts}
