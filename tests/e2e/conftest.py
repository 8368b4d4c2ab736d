"""Fixtures of the e2e tier: one `engram serve` subprocess for the whole session.

See ``tests/e2e/harness.py``: a free loopback port, a temporary ``ENGRAM_DATA_DIR``,
``REDIS_URL`` pointing at the test redis-server (database 9, a key prefix of its own), the
maintenance timer every second; SIGTERM (drain) at the end. Tests isolate themselves with
fresh user and team ids (``service.tenant()``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests.e2e.harness import LocalEngram, Tenant, run_local_service
from tests.support.services import RedisServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def service(redis_session_server: RedisServer | None) -> Iterator[LocalEngram]:
    base = os.environ.get("REDIS_URL") or (redis_session_server.url if redis_session_server else "")
    assert base, "no Redis for the e2e tier (REDIS_URL or redis-server on PATH)"
    with run_local_service(base) as svc:
        yield svc


@pytest.fixture
def tenant(service: LocalEngram) -> Tenant:
    return service.tenant()
