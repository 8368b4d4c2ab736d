"""Every limit at its boundary, over HTTP, on every route that takes the field.

For each (route, field) the value at the limit is accepted — the route answers what it
answers for good input (2xx, or 404 where the path names nothing that exists) — and the value
one past it is 422 naming the field. The numbers come from ``engram.limits``, the module the
server reads them from, so a limit that drifts on one route shows up here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from tests.e2e.harness import LocalEngram

from engram import limits

pytestmark = pytest.mark.e2e

NO_ID = "00000000-0000-4000-8000-000000000000"
Request = tuple[str, str, Any]  # method, path, JSON body (None: no body)


@dataclass(frozen=True)
class Limit:
    name: str
    field: str  # what the 422 names
    request: Callable[[Any], Request]
    at: Any  # the value at the limit
    over: Any  # one past it
    ok: int  # the status for the value at the limit


def obs(content: str = "c", **fields: Any) -> dict[str, Any]:
    item = {
        "type": "tool_success",
        "content": content,
        "metadata": {"toolName": "t", "durationMs": 1},
    }
    return {**item, **fields}


def meta(obs_type: str, **metadata: Any) -> Request:
    return ("POST", "/v1/observations", {"observations": [obs(type=obs_type, metadata=metadata)]})


def tool_event(**fields: Any) -> dict[str, Any]:
    return {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 1, **fields}


def ids(n: int) -> str:
    return "i" * n


def chars(n: int, char: str = "é") -> str:
    return char * n  # two UTF-8 bytes each: lengths are characters, not bytes


ID, NAME, KEY, VALUE = (
    limits.MAX_ID_CHARS,
    limits.MAX_NAME_CHARS,
    limits.MAX_KEY_CHARS,
    limits.MAX_VALUE_CHARS,
)
CONTENT, ERROR, MESSAGE = limits.MAX_CONTENT_CHARS, limits.MAX_ERROR_CHARS, limits.MAX_MESSAGE_CHARS
BATCH, DAYS = limits.MAX_BATCH_ITEMS, limits.MAX_RETENTION_DAYS
FACT_ID = limits.MAX_FACT_ID_CHARS
MEMORY = "{memory}"  # replaced by a real memory id of the caller


def transcript(**body: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hello"}], **body}


def metadata_of(size: int) -> dict[str, Any]:
    """tool_success metadata of exactly ``size`` bytes as compact JSON."""
    base = {"toolName": "t", "durationMs": 1, "pad": ""}
    empty = len(json.dumps(base, separators=(",", ":")).encode())
    return {**base, "pad": "x" * (size - empty)}


def result_of(size: int) -> str:
    return "x" * (size - 2)  # a JSON string: its quotes count


LIMITS: list[Limit] = [
    # --- ids (128) ----------------------------------------------------------------------
    Limit(
        "observation id",
        "observations.0.id",
        lambda v: ("POST", "/v1/observations", {"observations": [obs(id=v)]}),
        ids(ID),
        ids(ID + 1),
        202,
    ),
    Limit(
        "session personaId",
        "personaId",
        lambda v: ("POST", "/v1/sessions", {"personaId": v}),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "save personaId",
        "personaId",
        lambda v: ("POST", "/v1/memories", {"key": "k", "value": "v", "personaId": v}),
        ids(ID),
        ids(ID + 1),
        201,
    ),
    Limit(
        "save sourceChannelId",
        "sourceChannelId",
        lambda v: ("POST", "/v1/memories", {"key": "k2", "value": "v", "sourceChannelId": v}),
        ids(ID),
        ids(ID + 1),
        201,
    ),
    Limit(
        "recall personaId",
        "personaId",
        lambda v: ("GET", f"/v1/memories?personaId={v}", None),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "tool personaId",
        "personaId",
        lambda v: ("POST", "/v1/tools/memory_recall", {"arguments": {}, "personaId": v}),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "tool sourceChannelId",
        "sourceChannelId",
        lambda v: ("POST", "/v1/tools/memory_recall", {"arguments": {}, "sourceChannelId": v}),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "transcript personaId",
        "personaId",
        lambda v: ("POST", "/v1/conversations/c1/transcript", transcript(personaId=v)),
        ids(ID),
        ids(ID + 1),
        202,
    ),
    Limit(
        "review personaId",
        "personaId",
        lambda v: ("GET", f"/v1/review?personaId={v}", None),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "path conversationId",
        "conversationId",
        lambda v: ("POST", f"/v1/conversations/{v}/transcript", transcript()),
        ids(ID),
        ids(ID + 1),
        202,
    ),
    Limit(
        "path memory id GET",
        "id",
        lambda v: ("GET", f"/v1/memories/{v}", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path memory id PATCH",
        "id",
        lambda v: ("PATCH", f"/v1/memories/{v}", {"value": "v"}),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path memory id DELETE",
        "id",
        lambda v: ("DELETE", f"/v1/memories/{v}", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path memory id archive",
        "id",
        lambda v: ("POST", f"/v1/memories/{v}/archive", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path review id approve",
        "id",
        lambda v: ("POST", f"/v1/review/{v}/approve", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path review id reject",
        "id",
        lambda v: ("POST", f"/v1/review/{v}/reject", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path personaId GET",
        "personaId",
        lambda v: ("GET", f"/v1/personas/{v}", None),
        ids(ID),
        ids(ID + 1),
        404,
    ),
    Limit(
        "path personaId PUT",
        "personaId",
        lambda v: ("PUT", f"/v1/personas/{v}", {"memoryEnabled": True}),
        ids(ID),
        ids(ID + 1),
        200,
    ),
    Limit(
        "path factId",
        "factId",
        lambda v: ("DELETE", f"/v1/facts/{v}", None),
        ids(FACT_ID),
        ids(FACT_ID + 1),
        404,
    ),
    Limit(
        "metadata.entityId",
        "observations.0.metadata.entityId",
        lambda v: meta("entity_access", entityType="account", entityId=v),
        ids(ID),
        ids(ID + 1),
        202,
    ),
    # --- names (100) --------------------------------------------------------------------
    Limit(
        "path tool name",
        "name",
        lambda v: ("POST", f"/v1/tools/{v}", {"arguments": {}}),
        ids(NAME),
        ids(NAME + 1),
        404,
    ),
    Limit(
        "event toolName",
        "events.0.tool.toolName",
        lambda v: ("POST", "/v1/events", {"events": [tool_event(toolName=v)]}),
        chars(NAME),
        chars(NAME + 1),
        202,
    ),
    Limit(
        "metadata.toolName",
        "observations.0.metadata.toolName",
        lambda v: meta("tool_success", toolName=v, durationMs=1),
        chars(NAME),
        chars(NAME + 1),
        202,
    ),
    Limit(
        "metadata.entityType",
        "observations.0.metadata.entityType",
        lambda v: meta("entity_access", entityType=v, entityId="e1"),
        chars(NAME),
        chars(NAME + 1),
        202,
    ),
    Limit(
        "metadata.entityName",
        "observations.0.metadata.entityName",
        lambda v: meta("entity_access", entityType="a", entityId="e1", entityName=v),
        chars(NAME),
        chars(NAME + 1),
        202,
    ),
    Limit(
        "metadata.domain",
        "observations.0.metadata.domain",
        lambda v: meta("query_pattern", domain=v, query="q"),
        chars(NAME),
        chars(NAME + 1),
        202,
    ),
    Limit(
        "allowedGroups item",
        "allowedGroups.0",
        lambda v: ("PUT", "/v1/personas/p-groups", {"allowedGroups": [v]}),
        chars(NAME),
        chars(NAME + 1),
        200,
    ),
    # --- keys (100) and values (2000) ---------------------------------------------------
    Limit(
        "save key",
        "key",
        lambda v: ("POST", "/v1/memories", {"key": v, "value": "v"}),
        chars(KEY),
        chars(KEY + 1),
        201,
    ),
    Limit(
        "patch key",
        "key",
        lambda v: ("PATCH", f"/v1/memories/{MEMORY}", {"key": v}),
        chars(KEY, "ü"),
        chars(KEY + 1, "ü"),
        200,
    ),
    Limit(
        "approve key",
        "key",
        lambda v: ("POST", f"/v1/review/{NO_ID}/approve", {"key": v}),
        chars(KEY),
        chars(KEY + 1),
        404,
    ),
    Limit(
        "tool key",
        "key",
        lambda v: ("POST", "/v1/tools/memory_save", {"arguments": {"key": v, "value": "v"}}),
        chars(KEY, "ß"),
        chars(KEY + 1, "ß"),
        200,
    ),
    Limit(
        "save value",
        "value",
        lambda v: ("POST", "/v1/memories", {"key": "kv", "value": v}),
        chars(VALUE),
        chars(VALUE + 1),
        201,
    ),
    Limit(
        "patch value",
        "value",
        lambda v: ("PATCH", f"/v1/memories/{MEMORY}", {"value": v}),
        chars(VALUE),
        chars(VALUE + 1),
        200,
    ),
    Limit(
        "approve value",
        "value",
        lambda v: ("POST", f"/v1/review/{NO_ID}/approve", {"value": v}),
        chars(VALUE),
        chars(VALUE + 1),
        404,
    ),
    Limit(
        "tool value",
        "value",
        lambda v: ("POST", "/v1/tools/memory_save", {"arguments": {"key": "kt", "value": v}}),
        chars(VALUE),
        chars(VALUE + 1),
        200,
    ),
    # --- content, queries, errors (1000) -------------------------------------------------
    Limit(
        "observation content",
        "observations.0.content",
        lambda v: ("POST", "/v1/observations", {"observations": [obs(content=v)]}),
        chars(CONTENT),
        chars(CONTENT + 1),
        202,
    ),
    Limit(
        "query event text",
        "events.0.query.text",
        lambda v: ("POST", "/v1/events", {"events": [{"kind": "query", "text": v}]}),
        chars(CONTENT),
        chars(CONTENT + 1),
        202,
    ),
    Limit(
        "session query",
        "query",
        lambda v: ("POST", "/v1/sessions", {"query": v}),
        chars(CONTENT),
        chars(CONTENT + 1),
        200,
    ),
    Limit(
        "recall query",
        "query",
        lambda v: ("GET", f"/v1/memories?query={quote(v)}", None),
        chars(CONTENT),
        chars(CONTENT + 1),
        200,
    ),
    Limit(
        "tool recall query",
        "query",
        lambda v: ("POST", "/v1/tools/memory_recall", {"arguments": {"query": v}}),
        chars(CONTENT),
        chars(CONTENT + 1),
        200,
    ),
    Limit(
        "tool event error",
        "events.0.tool.error",
        lambda v: ("POST", "/v1/events", {"events": [tool_event(ok=False, error=v)]}),
        chars(ERROR),
        chars(ERROR + 1),
        202,
    ),
    # --- sizes, counts, numbers -----------------------------------------------------------
    Limit(
        "metadata bytes",
        "observations.0.metadata",
        lambda v: ("POST", "/v1/observations", {"observations": [obs(metadata=v)]}),
        metadata_of(limits.MAX_METADATA_BYTES),
        metadata_of(limits.MAX_METADATA_BYTES + 1),
        202,
    ),
    Limit(
        "tool result bytes",
        "events.0.tool.result",
        lambda v: ("POST", "/v1/events", {"events": [tool_event(result=v)]}),
        result_of(limits.MAX_TOOL_RESULT_BYTES),
        result_of(limits.MAX_TOOL_RESULT_BYTES + 1),
        202,
    ),
    Limit(
        "durationMs",
        "events.0.tool.durationMs",
        lambda v: ("POST", "/v1/events", {"events": [tool_event(durationMs=v)]}),
        limits.MAX_DURATION_MS,
        limits.MAX_DURATION_MS + 1,
        202,
    ),
    Limit(
        "observations per request",
        "observations",
        lambda v: ("POST", "/v1/observations", {"observations": [obs()] * v}),
        BATCH,
        BATCH + 1,
        202,
    ),
    Limit(
        "events per request",
        "events",
        lambda v: ("POST", "/v1/events", {"events": [tool_event(toolName="search_catalog")] * v}),
        BATCH,
        BATCH + 1,
        202,
    ),
    Limit(
        "transcript messages",
        "messages",
        lambda v: (
            "POST",
            "/v1/conversations/c2/transcript",
            {"messages": [{"role": "user", "content": "hi"}] * v},
        ),
        limits.MAX_TRANSCRIPT_MESSAGES,
        limits.MAX_TRANSCRIPT_MESSAGES + 1,
        202,
    ),
    Limit(
        "transcript message content",
        "messages.0.content",
        lambda v: (
            "POST",
            "/v1/conversations/c3/transcript",
            {"messages": [{"role": "tool", "content": v}]},
        ),
        chars(MESSAGE),
        chars(MESSAGE + 1),
        202,
    ),
    Limit(
        "extraction prompt",
        "extraction.prompt",
        lambda v: ("PUT", "/v1/personas/p-prompt", {"extraction": {"enabled": False, "prompt": v}}),
        chars(limits.MAX_PROMPT_CHARS),
        chars(limits.MAX_PROMPT_CHARS + 1),
        200,
    ),
    Limit(
        "allowedGroups count",
        "allowedGroups",
        lambda v: ("PUT", "/v1/personas/p-count", {"allowedGroups": [f"g{i}" for i in range(v)]}),
        limits.MAX_GROUPS,
        limits.MAX_GROUPS + 1,
        200,
    ),
    Limit(
        "recall maxResults",
        "maxResults",
        lambda v: ("GET", f"/v1/memories?maxResults={v}", None),
        limits.MAX_RECALL_RESULTS,
        limits.MAX_RECALL_RESULTS + 1,
        200,
    ),
    Limit(
        "tool max_results",
        "max_results",
        lambda v: ("POST", "/v1/tools/memory_recall", {"arguments": {"max_results": v}}),
        limits.MAX_RECALL_RESULTS,
        limits.MAX_RECALL_RESULTS + 1,
        200,
    ),
    Limit(
        "review limit",
        "limit",
        lambda v: ("GET", f"/v1/review?limit={v}", None),
        limits.MAX_PAGE,
        limits.MAX_PAGE + 1,
        200,
    ),
    Limit(
        "persona retention days",
        "retention.archiveAfterDays",
        lambda v: ("PUT", "/v1/personas/p-days", {"retention": {"archiveAfterDays": v}}),
        DAYS,
        DAYS + 1,
        200,
    ),
    Limit(
        "team retention days",
        "retention.deleteArchivedAfterDays",
        lambda v: (
            "PUT",
            "/v1/settings/team",
            {"memoryEnabled": True, "retention": {"deleteArchivedAfterDays": v}},
        ),
        DAYS,
        DAYS + 1,
        200,
    ),
]


@pytest.fixture(scope="module")
def admin(service: LocalEngram) -> dict[str, Any]:
    """A team admin of a fresh team (every route is open to it) with one memory to edit."""
    tenant = service.tenant()
    token = service.token(tenant.admin, tenant.team, admin=True, team_admin=True)
    memory = service.client(token).save("anchor", "v")
    return {"headers": {"Authorization": f"Bearer {token}"}, "memory": memory["id"]}


def send(http: httpx.Client, admin: dict[str, Any], request: Request) -> httpx.Response:
    method, path, body = request
    path = path.replace(MEMORY, admin["memory"])
    return http.request(method, path, json=body, headers=admin["headers"])


@pytest.mark.parametrize("limit", LIMITS, ids=lambda lim: lim.name)
def test_the_limit_passes_and_one_past_it_is_422_naming_the_field(
    service: LocalEngram, admin: dict[str, Any], limit: Limit
) -> None:
    with service.http() as http:
        at = send(http, admin, limit.request(limit.at))
        assert at.status_code == limit.ok, (limit.name, at.status_code, at.text[:300])
        over = send(http, admin, limit.request(limit.over))
    assert over.status_code == 422, (limit.name, over.status_code, over.text[:300])
    fields = [d["field"] for d in over.json()["error"]["details"]]
    assert limit.field in fields, (limit.name, fields)
