"""The documented event schemas are the models' schemas: strict, versioned, no key or value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from engram.events.models import EVENT_TYPES, json_schemas, parse_detail, schemas_markdown

DOCS = Path(__file__).resolve().parents[3] / "docs" / "events.md"
START = "<!-- generated: uv run python -m engram.events.models -->\n"
END = "<!-- end generated -->"


def objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``node``."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += objects(value)
    elif isinstance(node, list):
        for value in node:
            found += objects(value)
    return found


def test_docs_show_the_schemas_of_the_models() -> None:
    text = DOCS.read_text()
    generated = text.split(START, 1)[1].split(END, 1)[0]
    assert generated == schemas_markdown(), "run: uv run python -m engram.events.models"


def test_every_schema_is_closed_versioned_and_free_of_keys_and_values() -> None:
    schemas = json_schemas()
    assert sorted(schemas) == sorted(
        [
            "memory.saved",
            "memory.updated",
            "memory.deleted",
            "memory.proposed",
            "memory.approved",
            "memory.rejected",
            "memory.restored",
            "memory.merged",
            "user.erased",
            "team.settings.changed",
        ]
    )
    for name, schema in schemas.items():
        assert schema["properties"]["type"] == {"const": name, "type": "string"}
        # memory.updated carries the memory's version since its version 2
        assert schema["properties"]["schemaVersion"]["const"] == (
            2 if name == "memory.updated" else 1
        )
        assert ("version" in schema["properties"]) is (name == "memory.updated")
        for obj in objects(schema):
            assert obj["additionalProperties"] is False, name
        assert not {"key", "value"} & set(schema["properties"]), name
        assert {"eventId", "sequence", "teamId"} <= set(schema["required"])


def detail(**extra: Any) -> dict[str, Any]:
    return {
        "eventId": "7b0b7d5e-0e8e-4a4e-9b1a-2f0d8f2f0c11",
        "schemaVersion": 1,
        "occurredAt": "2026-01-01T00:00:00Z",
        "teamId": "acme",
        "sequence": 1,
        "type": "memory.saved",
        "memoryId": "m1",
        "scope": "user",
        "ownerId": "alice",
        "userId": None,
        "status": "active",
        "actorId": "alice",
        "cause": "api",
        **extra,
    }


def test_parse_detail_refuses_unknown_fields_types_and_versions() -> None:
    assert parse_detail(detail()).type == "memory.saved"
    for bad in (
        detail(value="CSV, not PDF"),
        detail(schemaVersion=2),
        detail(sequence=0),
        detail(type="memory.exploded"),
    ):
        with pytest.raises((ValidationError, ValueError)):
            parse_detail(bad)
    assert EVENT_TYPES[0] == "memory.saved"
