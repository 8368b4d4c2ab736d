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
import json
import os
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit


class MigrationFailed(RuntimeError):
    """``engram migrate`` returned a non-zero exit code."""


class SecretsClient(Protocol):
    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]: ...  # noqa: N803


def database_url(env: Mapping[str, str], secrets: SecretsClient | None) -> str:
    """The proxy URL with the secret's username and password filled in."""
    base = env["ENGRAM_DATABASE_URL"]
    arn = env.get("ENGRAM_DATABASE_SECRET_ARN")
    if not arn or secrets is None:
        return base
    secret = json.loads(secrets.get_secret_value(SecretId=arn)["SecretString"])
    parts = urlsplit(base)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = quote(str(secret["username"]), safe="")
    password = quote(str(secret["password"]), safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}{port}"))


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
