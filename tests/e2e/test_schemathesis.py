"""A bounded schemathesis run of docs/openapi.json against the running local service.

One parametrised test per operation of the committed document; each sends a few generated
requests (valid and invalid ones, as schemathesis generates them) with a valid admin token
and fails on any 5xx (``not_a_server_error``) and on any schema-valid request the server
refuses (``positive_data_acceptance``, ST202): the document says what the server enforces.
Three rules depend on state no JSON Schema can state, and the case is adjusted for them
before it is sent (see ``server_state_rules``). The run is bounded twice: a small ``max_examples``
per operation, no shrinking, and a wall-clock budget for the whole module: past the budget
an operation's first example is still sent, later ones are not. The last test fails unless
every operation of the document got at least one request the server answered.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from pydantic import ValidationError
from schemathesis.checks import not_a_server_error, positive_data_acceptance
from tests.e2e.harness import LocalEngram, Tenant

from engram.api.models import IDEMPOTENCY_HEADER, ToolCallRequest
from engram.api.tool_calls import CALL_MODELS
from engram.api.tools import TOOL_ARGUMENTS

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
_sent: dict[str, int] = {}  # operation label -> requests sent and checked


@pytest.fixture(scope="module")
def fuzz_caller(service: LocalEngram) -> dict[str, Any]:
    tenant: Tenant = service.tenant()
    token = service.token(tenant.user, tenant.team, admin=True, team_admin=True)
    _clock.setdefault("start", time.monotonic())
    return {"tenant": tenant, "headers": {"Authorization": f"Bearer {token}"}}


def server_state_rules(case: Any) -> None:
    """What the server checks against its own state, applied to a generated case:

    * an observation's ``createdAt`` must lie within the retention window before the
      server's clock (and at most 5 minutes ahead of it): a numeric ``createdAt`` is set to
      the current time;
    * a page ``cursor`` (the review queue, the memory listing) must be one the service
      issued (it is signed): a generated one is left out (signed cursors are tested in
      test_input_rules.py and test_console_routes.py);
    * an ``If-Match`` names the version the memory is at (else 412): a generated one is left
      out (test_console_routes.py sends real ones);
    * an ``Idempotency-Key`` used in the last 24 hours names that request only (another body
      under it is 422): a generated key is made unique to the case;
    * the ``format`` query parameter of ``POST /v1/tools/{name}`` says which shape the body
      is in (``call_format``), and an id given in both the body and the query must agree:
      the query is made to match the generated body;
    * an ``asOf`` (what was true then) must not be in the future: one later than the
      server's clock is set to the current time;
    * the candidates of ``POST /v1/tools/rank`` name each tool once (JSON Schema's
      ``uniqueItems`` compares whole items, not one field): a repeated name is left out.
    """
    for name in list(case.headers or {}):
        if name.lower() == IDEMPOTENCY_HEADER.lower():
            case.headers[name] = uuid.uuid4().hex
        elif name.lower() == "if-match":
            del case.headers[name]
    if case.operation.path == "/v1/observations" and isinstance(case.body, dict):
        items = case.body.get("observations")
        for item in items if isinstance(items, list) else []:
            created = item.get("createdAt") if isinstance(item, dict) else None
            if isinstance(created, int | float) and not isinstance(created, bool):
                item["createdAt"] = int(time.time() * 1000)
    if case.operation.path in {"/v1/review", "/v1/memories/list"} and isinstance(case.query, dict):
        case.query.pop("cursor", None)
    if isinstance(case.query, dict) and isinstance(case.query.get("asOf"), int | float):
        case.query["asOf"] = min(int(case.query["asOf"]), int(time.time() * 1000))
    if case.operation.path == "/v1/tools/rank" and isinstance(case.body, dict):
        candidates = case.body.get("candidates")
        if isinstance(candidates, list):
            case.body["candidates"] = _each_name_once(candidates)
    elif case.operation.path.startswith("/v1/tools/") and isinstance(case.body, dict):
        query = case.query if isinstance(case.query, dict) else {}
        tool = case.operation.path.rsplit("/", 1)[1]
        query["format"] = call_format(tool, case.body)
        for name in ("personaId", "sourceChannelId"):
            if name in case.body:
                query[name] = case.body[name]
        case.query = query


def _each_name_once(candidates: list[Any]) -> list[Any]:
    """The candidates without a repeated (string) name."""
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        name = candidate.get("name") if isinstance(candidate, dict) else None
        if isinstance(name, str):
            if name in seen:
                continue
            seen.add(name)
        kept.append(candidate)
    return kept


def call_format(tool: str, body: dict[str, Any]) -> str:
    """The format whose call shape ``body`` is: a provider's, else ``json_schema`` when its
    ``arguments`` are the tool's, else ``mcp`` (both take ``{arguments}``)."""
    for fmt, model in CALL_MODELS.items():
        if fmt != "mcp" and _validates(model, body):
            return fmt
    request = _validates(ToolCallRequest, body)
    if request is not None and _validates(TOOL_ARGUMENTS[tool], dict(request.arguments)):
        return "json_schema"
    return "mcp"


def _validates(model: Any, value: Any) -> Any:
    try:
        return model.model_validate(value, by_alias=True, by_name=False)
    except ValidationError:
        return None


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_error(case: Any, service: LocalEngram, fuzz_caller: dict[str, Any]) -> None:
    label = case.operation.label
    if label in _sent and time.monotonic() - _clock["start"] > BUDGET_S:
        return  # past the budget: only an operation's first example is sent
    server_state_rules(case)
    case.call_and_validate(
        base_url=service.url,
        headers=fuzz_caller["headers"],
        checks=[not_a_server_error, positive_data_acceptance],
        timeout=10,
    )
    _sent[label] = _sent.get(label, 0) + 1


def operations() -> set[str]:
    return {result.ok().label for result in schema.get_all_operations()}


def test_every_operation_was_exercised_and_the_service_is_still_healthy(
    service: LocalEngram,
) -> None:
    """Runs after the fuzzing (file order): every operation of the document was sent and
    checked at least once (none left out by the budget or a failed generation), and the
    service still answers."""
    assert operations() - set(_sent) == set(), "operations never exercised"
    with service.http() as http:
        assert http.get("/v1/health").json()["status"] == "ok"
