"""A bounded schemathesis run of docs/openapi.json against the running local service.

One parametrised test per operation of the committed document; each sends a few generated
requests (valid and invalid ones, as schemathesis generates them) with a valid admin token
and fails on any 5xx (the ``not_a_server_error`` check). The run is bounded twice: a small
``max_examples`` per operation, no shrinking, and a wall-clock budget for the whole module
(examples drawn after the budget are not sent).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from tests.e2e.harness import LocalEngram, Tenant

pytestmark = pytest.mark.e2e

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
MAX_EXAMPLES = 12
BUDGET_S = 50.0

# Unexpected-method probes use the methods the local server routes; TRACE and QUERY get the
# standard library's 501 "unsupported method" page there (API Gateway answers 404 instead).
CONFIG = schemathesis.Config.from_dict(
    {
        "phases": {
            "coverage": {"unexpected-methods": ["get", "put", "post", "delete", "patch", "options"]}
        }
    }
)
schema = schemathesis.openapi.from_path(DOCUMENT, config=CONFIG)
_clock: dict[str, float] = {}
_sent: dict[str, int] = {}


@pytest.fixture(scope="module")
def fuzz_caller(service: LocalEngram) -> dict[str, Any]:
    tenant: Tenant = service.tenant()
    token = service.token(tenant.user, tenant.team, admin=True, team_admin=True)
    _clock.setdefault("start", time.monotonic())
    return {"tenant": tenant, "headers": {"Authorization": f"Bearer {token}"}}


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_error(case: Any, service: LocalEngram, fuzz_caller: dict[str, Any]) -> None:
    if time.monotonic() - _clock["start"] > BUDGET_S:
        return
    case.call_and_validate(
        base_url=service.url,
        headers=fuzz_caller["headers"],
        checks=[not_a_server_error],
        timeout=10,
    )
    _sent["requests"] = _sent.get("requests", 0) + 1


def test_the_fuzzed_service_is_still_healthy(service: LocalEngram) -> None:
    """Runs after the fuzzing (file order): it did send requests, and the service answers."""
    with service.http() as http:
        assert http.get("/v1/health").json()["status"] == "ok"
    assert _sent.get("requests", 0) >= len(list(schema.get_all_operations()))
