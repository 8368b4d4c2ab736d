"""The OpenAPI document covers every route with resolvable schemas and the error body."""

from __future__ import annotations

import json
from typing import Any

from engram.api.models import ROUTES
from engram.api.openapi import openapi_document


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def test_every_route_is_documented() -> None:
    doc = openapi_document()
    for route in ROUTES:
        op = doc["paths"][route.path][route.method.lower()]
        assert str(route.status) in op["responses"]
        assert "422" in op["responses"]
        assert ("security" in op) == route.auth
    ops = [op["operationId"] for p in doc["paths"].values() for op in p.values()]
    assert len(ops) == len(set(ops)) == len(ROUTES)


def test_refs_resolve_and_requests_are_closed() -> None:
    doc = openapi_document()
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
