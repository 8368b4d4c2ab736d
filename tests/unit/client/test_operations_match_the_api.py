"""Every operation of the client is a route of the service's OpenAPI document, and the model it
reads the answer into asks for no field the service does not send: a declared field is a
property of the route's response schema (nested models too), and a field the client requires
is one the service always sends."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from engram.api.openapi import openapi_document
from engram.api.routes import ROUTES
from engram_client import _calls
from engram_client._calls import Call

DOCUMENT = openapi_document(ROUTES)

CALLS: list[Call[Any]] = [
    _calls.health(),
    _calls.post_observations([]),
    _calls.post_events([]),
    _calls.start_session(),
    _calls.send_transcript("c1", []),
    _calls.facts(),
    _calls.forget_fact("f1"),
    _calls.save("k", "v"),
    _calls.recall("q"),
    _calls.get_memory("m1"),
    _calls.update_memory("m1"),
    _calls.delete_memory("m1"),
    _calls.archive_memory("m1"),
    _calls.memory_history("m1"),
    _calls.memory_versions("m1"),
    _calls.restore_memory("m1", 1),
    _calls.merge_memory("m1", "m2"),
    _calls.tools(),
    _calls.execute_tool("memory_save", {}),
    _calls.provider_tools("anthropic"),
    _calls.call_tool("memory_save", {}, format="anthropic"),
    _calls.rank_tools({"get_account": 1.0}),
    _calls.review_queue(),
    _calls.review_page(),
    _calls.approve("m1"),
    _calls.reject("m1"),
    _calls.put_persona("p1"),
    _calls.get_persona("p1"),
    _calls.set_team_memory(True),
    _calls.export(),
    _calls.erase(),
]


def test_every_operation_is_listed_here() -> None:
    operations = {
        name
        for name, fn in inspect.getmembers(_calls, inspect.isfunction)
        if fn.__module__ == _calls.__name__ and not name.startswith("_")
    }
    listed = {c.path.split("/")[2] for c in CALLS}
    assert len(CALLS) == len(operations), sorted(operations)
    assert listed <= {p.split("/")[2] for p in DOCUMENT["paths"]}


def _operation(call: Call[Any]) -> dict[str, Any]:
    for template, methods in DOCUMENT["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, call.path) and call.method.lower() in methods:
            operation: dict[str, Any] = methods[call.method.lower()]
            return operation
    raise AssertionError(f"{call.method} {call.path} is not a route of the API")


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _resolve(DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _resolve(option)
    return schema


def _nested(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model inside ``annotation`` (``M``, ``M | None``, ``list[M]``), and whether a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is list and args:
        inner = _nested(args[0])
        return (inner[0], True) if inner else None
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _nested(args[0])
    return None


def _conforms(model: type[BaseModel], schema: dict[str, Any], where: str) -> None:
    schema = _resolve(schema)
    properties, required = schema["properties"], set(schema.get("required", []))
    for name, info in model.model_fields.items():
        alias = info.alias or name
        assert alias in properties, f"{where}.{alias}: the service sends no such field"
        if info.is_required():
            assert alias in required, f"{where}.{alias}: required here, optional in the API"
        nested = _nested(info.annotation)
        if nested is not None:
            inner, many = nested
            prop = _resolve(properties[alias])
            _conforms(inner, prop["items"] if many else prop, f"{where}.{alias}")


@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c.method} {c.path}")
def test_the_answer_model_asks_only_for_what_the_route_sends(call: Call[Any]) -> None:
    responses = _operation(call)["responses"]
    success = sorted(status for status in responses if status.startswith("2"))
    assert success, call.path
    reader = call.read
    if reader.as_json:  # a provider's own shape, handed on as it came
        assert success == ["200"]
        return
    if reader.model is None:
        assert success == ["204"]
        return
    schema = responses[success[0]]["content"]["application/json"]["schema"]
    if reader.field is not None:
        schema = _resolve(schema)["properties"][reader.field]
        assert (_resolve(schema).get("type") == "array") == reader.many
        if reader.many:
            schema = _resolve(schema)["items"]
    _conforms(reader.model, schema, f"{call.method} {call.path}")
