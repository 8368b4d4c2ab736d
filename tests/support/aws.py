"""AWS services for tests: moto's Secrets Manager, with a count of the reads that reach it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
REGION = "us-east-1"


class CountingSecrets:
    """A moto ``secretsmanager`` client that counts ``get_secret_value`` calls (how often a
    service really read a secret, cache or not); every other call passes through."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads = 0

    def get_secret_value(self, **kwargs: Any) -> Any:
        self.reads += 1
        return self._client.get_secret_value(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def create_login(self, name: str, username: str, password: str, **extra: Any) -> str:
        """A secret ``{"username", "password", **extra}``; returns its ARN."""
        value = json.dumps({"username": username, "password": password, **extra})
        return str(self._client.create_secret(Name=name, SecretString=value)["ARN"])

    def current(self, secret_id: str) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(
            self._client.get_secret_value(SecretId=secret_id, VersionStage="AWSCURRENT")[
                "SecretString"
            ]
        )
        return value


@contextlib.contextmanager
def fake_secrets() -> Iterator[CountingSecrets]:
    """moto's Secrets Manager for the duration (no network, no real account)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        session = boto3.session.Session(region_name=REGION, **CREDENTIALS)
        yield CountingSecrets(session.client("secretsmanager"))
