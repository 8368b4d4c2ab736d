"""The OpenAPI document covers every route with resolvable schemas and the error body."""

from __future__ import annotations

import json
from typing import Any

from engram import errors, limits
from engram.api.openapi import openapi_document
from engram.api.routes import ROUTES
from engram.api.tools import TOOL_ARGUMENTS, TOOL_FORMATS
from engram.fields import NAME_PATTERN
from engram.local.server import _PROTOCOL_ERROR_CODES


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def test_every_route_is_documented() -> None:
    doc = openapi_document(ROUTES)
    for route in ROUTES:
        paths = (
            [f"/v1/tools/{tool}" for tool in TOOL_ARGUMENTS]
            if route.path == "/v1/tools/{name}"
            else [route.path]
        )
        for path in paths:
            op = doc["paths"][path][route.method.lower()]
            assert str(route.status) in op["responses"]
            assert "422" in op["responses"]
            assert ("security" in op) == route.auth
    ops = [op["operationId"] for p in doc["paths"].values() for op in p.values()]
    assert len(ops) == len(set(ops)) == len(ROUTES) - 1 + len(TOOL_ARGUMENTS)


def test_each_tool_is_documented_with_its_own_arguments() -> None:
    doc = openapi_document(ROUTES)
    assert "/v1/tools/{name}" not in doc["paths"]  # any other name is 404: no such tool
    for tool, model in TOOL_ARGUMENTS.items():
        op = doc["paths"][f"/v1/tools/{tool}"]["post"]
        calls = op["requestBody"]["content"]["application/json"]["schema"]["anyOf"]
        arguments = calls[0]["allOf"][1]["properties"]["arguments"]
        assert arguments == {"$ref": f"#/components/schemas/{model.__name__}"}
        # one call shape per format, each naming only this tool
        assert len(calls) == len(TOOL_FORMATS)
        assert f'"const": "{tool}"' in json.dumps(calls[1:])
        assert [p["name"] for p in op["parameters"]] == ["format", "personaId", "sourceChannelId"]


def test_path_parameters_carry_their_rule() -> None:
    doc = openapi_document(ROUTES)
    param = doc["paths"]["/v1/memories/{id}"]["get"]["parameters"][0]
    assert param["schema"]["maxLength"] == limits.MAX_ID_CHARS
    assert param["schema"]["pattern"] == NAME_PATTERN
    fact = doc["paths"]["/v1/facts/{factId}"]["delete"]["parameters"][0]
    assert fact["schema"]["maxLength"] == limits.MAX_FACT_ID_CHARS


def test_the_error_code_is_an_enum_of_every_code_the_service_sends() -> None:
    doc = openapi_document(ROUTES)
    codes = set(doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"])
    domain = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.EngramError)
    }
    protocol = set(_PROTOCOL_ERROR_CODES.values())
    assert domain | protocol | {"invalid_json", "body_too_large", "unsupported_media_type"} <= codes


def test_refs_resolve_and_requests_are_closed() -> None:
    doc = openapi_document(ROUTES)
    schemas = doc["components"]["schemas"]
    for ref in refs(doc):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in schemas
    assert schemas["MemorySaveRequest"]["additionalProperties"] is False
    assert set(schemas["ObservationIn"]["properties"]) == {
        "type",
        "content",
        "metadata",
        "id",
        "createdAt",
    }
    json.dumps(doc)  # serialisable as is
