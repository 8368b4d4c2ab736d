"""Database credentials from AWS Secrets Manager.

In AWS ``ENGRAM_DATABASE_URL`` names the RDS Proxy without credentials and
``ENGRAM_DATABASE_SECRET_ARN`` the secret holding them (it rotates, so it is read at run time,
never baked into the environment). One implementation serves the service (``bootstrap``) and
the deploy-time migration trigger.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit


class SecretsClient(Protocol):
    """The slice of a boto3 ``secretsmanager`` client used here."""

    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]: ...  # noqa: N803


def url_with_credentials(base_url: str, username: str, password: str) -> str:
    """``base_url`` with ``username:password@`` (URL-quoted) in place of any credentials."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    user = quote(username, safe="")
    secret = quote(password, safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{secret}@{host}{port}"))


def database_url_from_secret(
    base_url: str, secret_arn: str | None, secrets: SecretsClient | None
) -> str:
    """The URL with the secret's ``username`` and ``password``; ``base_url`` as is when there
    is no secret (or no client)."""
    if not secret_arn or secrets is None:
        return base_url
    secret = json.loads(str(secrets.get_secret_value(SecretId=secret_arn)["SecretString"]))
    return url_with_credentials(base_url, str(secret["username"]), str(secret["password"]))


def secrets_client(region: str | None = None) -> SecretsClient:
    """A boto3 Secrets Manager client (boto3 imported here, not at module import)."""
    import boto3

    client: SecretsClient = boto3.client("secretsmanager", region_name=region)
    return client
