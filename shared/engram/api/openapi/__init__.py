"""An OpenAPI 3.1 document for the v1 API, built from the route table (``engram.api.routes``)
and the models of ``engram.api.models``.

``openapi_document(ROUTES)`` returns it as a dict; ``python -m engram.api.openapi >
docs/openapi.json`` writes it (``__main__``). The table is given, not imported: it names the
endpoint that serves this document (``engram.api.routes.get_openapi``).

It says what the server enforces, from the same models and rules: request schemas are the
validation schemas (camelCase, ``additionalProperties: false``, lengths, character
rules as ``pattern``, per-type observation metadata, cross-field rules as ``if``/``then``),
path parameters carry their rule (``PATH_PARAMETERS``), ``POST /v1/tools/{name}`` is stated
once per tool with that tool's arguments, review cursors carry their format, and the error
body's ``code`` is an enum. Response schemas are the serialisation ones; every route
documents the error body.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from engram import __version__
from engram.api.http import IF_MATCH_PATTERN
from engram.api.models import IDEMPOTENCY_HEADER, PATH_PARAMETERS, ErrorBody
from engram.api.tool_calls import CALL_MODELS, RESULT_MODELS
from engram.api.tools import TOOL_ARGUMENTS
from engram.fields import JSON_VALUE_MARKER, Identifier, clean_json_schema

if TYPE_CHECKING:
    from engram.api.route_spec import RouteSpec

REF = "#/components/schemas/{model}"
JSON_VALUE = "JsonValue"
TOOL_ROUTE = "/v1/tools/{name}"
_ERRORS = {
    "400": "malformed JSON",
    "401": "missing or invalid token",
    "403": "known caller, not allowed",
    "404": "not found (also another user's object)",
    "413": "body too large",
    "422": "invalid input; details name the fields",
    "429": "rate limited (Retry-After)",
    "503": "a write could not be durably accepted",
}


_IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "name": IDEMPOTENCY_HEADER,
    "in": "header",
    "required": False,
    "description": (
        "A fresh key per request, the same on its retries: the same key within 24 hours is "
        "the same request (same ids, stored once); another body under it is 422 "
        "idempotency_key_reused. Without a key, the same body within the retry window is the "
        "same request."
    ),
    "schema": TypeAdapter(Identifier).json_schema(),  # an id the client sends
}


_IF_MATCH_PARAMETER: dict[str, Any] = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": (
        'The memory\'s ETag as read ("3"): change it only if it is still at that version, '
        "else 412 precondition_failed and nothing changes. `*`, or no header: whatever its "
        "version. Compared strongly: a weak tag never matches."
    ),
    "schema": {"type": "string", "pattern": IF_MATCH_PATTERN},
}
_ETAG_HEADER: dict[str, Any] = {
    "ETag": {
        "description": "The memory's version in quotes; send it back as If-Match.",
        "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
    }
}
_PRECONDITION_FAILED = "the If-Match no longer matches: the memory changed since it was read"


def _path_parameters(path: str) -> list[dict[str, Any]]:
    names = [seg[1:-1] for seg in path.split("/") if seg.startswith("{") and seg.endswith("}")]
    return [
        {
            "name": n,
            "in": "path",
            "required": True,
            "schema": TypeAdapter(PATH_PARAMETERS[n]).json_schema(),
        }
        for n in names
    ]


def _with_json_values(node: Any) -> Any:
    """``node`` with every ``JSON_VALUE_MARKER`` replaced by a reference to ``JsonValue``."""
    if isinstance(node, dict):
        if node == JSON_VALUE_MARKER:
            return {"$ref": REF.format(model=JSON_VALUE)}
        return {k: _with_json_values(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_json_values(v) for v in node]
    return node


#: where each provider's call names its tool (the path's name is the only one it may give)
_CALL_NAME_PATH: dict[str, tuple[str, ...]] = {
    "openai_chat": ("function", "name"),
    "bedrock": ("toolUse", "name"),
}


def _named(fmt: str, tool: str) -> dict[str, Any]:
    """A schema saying the call's name, when given, is ``tool``."""
    node: dict[str, Any] = {"const": tool}
    for part in reversed(_CALL_NAME_PATH.get(fmt, ("name",))):
        node = {"properties": {part: node}}
    return node


def _tool_operations(op: dict[str, Any], keys: dict[Any, Any]) -> dict[str, dict[str, Any]]:
    """``POST /v1/tools/{name}`` once per tool: its own path, its own ``arguments``, and the
    call and result of each provider format (the ``format`` query parameter says which)."""
    out: dict[str, dict[str, Any]] = {}
    for tool, model in TOOL_ARGUMENTS.items():
        tool_op = json.loads(json.dumps(op))
        tool_op["operationId"] = "postTools" + "".join(p.title() for p in tool.split("_"))
        tool_op["summary"] = f"execute a {tool} tool call"
        tool_op["parameters"] = [p for p in tool_op["parameters"] if p["in"] != "path"]
        body = tool_op["requestBody"]["content"]["application/json"]
        arguments: dict[str, Any] = {"properties": {"arguments": keys[(model, "validation")]}}
        if model.model_json_schema().get("required"):  # {} would not do: send them
            arguments["required"] = ["arguments"]
        calls = [{"allOf": [body["schema"], arguments]}]
        calls += [
            {"allOf": [keys[(call, "validation")], _named(fmt, tool)]}
            for fmt, call in CALL_MODELS.items()
        ]
        body["schema"] = {"anyOf": calls}
        tool_op["requestBody"]["description"] = _FORMATS_TEXT
        ok = tool_op["responses"]["200"]["content"]["application/json"]
        results = [keys[(m, "serialization")] for m in RESULT_MODELS.values()]
        ok["schema"] = {"anyOf": [ok["schema"], *results]}
        out[TOOL_ROUTE.replace("{name}", tool)] = tool_op
    return out


_FORMATS_TEXT = (
    "The call in the shape of the `format` query parameter: `json_schema` (the default) "
    "`{arguments, personaId?, sourceChannelId?}`; `openai_chat` a Chat Completions "
    "`tool_calls` item; `openai_responses` a Responses `function_call` item; `anthropic` a "
    "`tool_use` content block; `bedrock` a Converse `toolUse` content block; `mcp` the params "
    "of `tools/call`. The answer is `{name, result}` for `json_schema`, otherwise the tool "
    "result in that provider's shape, errors of the model's arguments included as results."
)


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(by_alias=True)
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _operation_id(route: RouteSpec) -> str:
    parts = [p.strip("{}") for p in route.path.split("/")[2:] if p]
    return route.method.lower() + "".join(p[:1].upper() + p[1:] for p in parts)


def _model_schemas(routes: Sequence[RouteSpec]) -> tuple[dict[Any, Any], dict[str, Any]]:
    """The JSON Schema of every model the API reads (``validation``) or writes
    (``serialization``): the ref of each model and the definitions."""
    models: list[tuple[type[BaseModel], Any]] = [(ErrorBody, "serialization")]
    models += [(m, "validation") for m in TOOL_ARGUMENTS.values()]
    models += [(m, "validation") for m in CALL_MODELS.values()]
    models += [(m, "serialization") for m in RESULT_MODELS.values()]
    for route in routes:
        if route.request is not None:
            models.append((route.request, "validation"))
        if route.response is not None:
            models.append((route.response, "serialization"))
    seen: set[tuple[type[BaseModel], str]] = set()
    unique = [m for m in models if not (m in seen or seen.add(m))]  # type: ignore[func-returns-value]
    keys, defs = models_json_schema(unique, by_alias=True, ref_template=REF)
    return dict(keys), defs


def _responses(route: RouteSpec, keys: dict[Any, Any]) -> dict[str, Any]:
    """Success (and ``200`` for an update of what a ``201`` creates), then every error."""
    ok: dict[str, Any] = {"description": "success"}
    if route.etag:
        ok["headers"] = _ETAG_HEADER
    if route.response is not None:
        ok["content"] = {"application/json": {"schema": keys[(route.response, "serialization")]}}
    responses: dict[str, Any] = {str(route.status): ok}
    if route.status == 201:
        responses["200"] = {**ok, "description": "updated"}
    error_ref = keys[(ErrorBody, "serialization")]
    errors = {**_ERRORS, "412": _PRECONDITION_FAILED} if route.if_match else _ERRORS
    for status, text in sorted(errors.items()):
        if status == "401" and not route.auth:
            continue
        responses[status] = {
            "description": text,
            "content": {"application/json": {"schema": error_ref}},
        }
    return responses


def _operation(route: RouteSpec, keys: dict[Any, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": _operation_id(route), "summary": route.summary}
    params = _path_parameters(route.path)
    if route.query is not None:
        params += _query_parameters(route.query)
    if route.idempotency_key:
        params.append(_IDEMPOTENCY_PARAMETER)
    if route.if_match:
        params.append(_IF_MATCH_PARAMETER)
    if params:
        op["parameters"] = params
    if route.request is not None:
        op["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": keys[(route.request, "validation")]}},
        }
    op["responses"] = _responses(route, keys)
    if route.auth:
        op["security"] = [{"bearer": []}]
    return op


def openapi_document(routes: Sequence[RouteSpec]) -> dict[str, Any]:
    """The document of ``routes`` (the route table, ``engram.api.routes.ROUTES``)."""
    keys, defs = _model_schemas(routes)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        op = _operation(route, keys)
        if route.path == TOOL_ROUTE:  # other names are 404: no such tool
            for path, tool_op in _tool_operations(op, keys).items():
                paths.setdefault(path, {})[route.method.lower()] = tool_op
            continue
        paths.setdefault(route.path, {})[route.method.lower()] = op

    schemas = {**defs.get("$defs", {}), JSON_VALUE: clean_json_schema(REF.format(model=JSON_VALUE))}

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Engram",
            "version": __version__,
            "description": "Long-term memory for chat assistants (v1).",
        },
        "paths": _with_json_values(paths),
        "components": {
            "schemas": _with_json_values(schemas),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
    }
