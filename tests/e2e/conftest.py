"""Fixtures of the e2e tier: one `engram serve` subprocess for the whole session.

See ``tests/e2e/harness.py``: a free loopback port, a temporary ``ENGRAM_DATA_DIR``,
``REDIS_URL`` pointing at a redis-server of the tier's own (a key prefix of its own), the
maintenance timer every second; SIGTERM (drain) at the end. Tests isolate themselves with
fresh user and team ids (``service.tenant()``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests.e2e.harness import LocalEngram, Tenant, run_local_service
from tests.support.services import redis_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def service() -> Iterator[LocalEngram]:
    # a server of its own: the other tiers flush theirs between tests, this one lives all session
    with (
        redis_server() as server,
        run_local_service(server.url, redis_admin_url=server.admin_url) as svc,
    ):
        yield svc


@pytest.fixture
def tenant(service: LocalEngram) -> Tenant:
    return service.tenant()
