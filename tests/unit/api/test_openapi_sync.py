"""docs/openapi.json is the document the models generate, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.api.openapi import openapi_document
from engram.api.routes import ROUTES

COMMITTED = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"
REGENERATE = "uv run python -m engram.api.openapi > docs/openapi.json"


def render() -> str:
    """What ``python -m engram.api.openapi`` writes."""
    return json.dumps(openapi_document(ROUTES), indent=2, sort_keys=True) + "\n"


def test_committed_openapi_document_matches_the_models() -> None:
    assert COMMITTED.is_file(), f"docs/openapi.json is missing; create it with: {REGENERATE}"
    committed = COMMITTED.read_text(encoding="utf-8")
    generated = render()
    if committed != generated:
        old, new = json.loads(committed), json.loads(generated)
        changed = sorted(
            set(old.get("paths", {})) ^ set(new.get("paths", {}))
            | {p for p in old.get("paths", {}) if old["paths"][p] != new["paths"].get(p)}
        )
        schemas = sorted(
            name
            for name in set(old.get("components", {}).get("schemas", {}))
            | set(new["components"]["schemas"])
            if old.get("components", {}).get("schemas", {}).get(name)
            != new["components"]["schemas"].get(name)
        )
        raise AssertionError(
            "docs/openapi.json is out of date with engram.api.models "
            f"(paths changed: {changed or 'none'}; schemas changed: {schemas or 'none'}). "
            f"Regenerate it from the repository root with: {REGENERATE}"
        )


def test_the_document_names_every_route_of_the_api() -> None:
    paths = json.loads(COMMITTED.read_text(encoding="utf-8"))["paths"]
    assert {
        "/v1/health",
        "/v1/observations",
        "/v1/events",
        "/v1/sessions",
        "/v1/memories/{id}",
        "/v1/review/{id}/approve",
        "/v1/me",
    } <= set(paths)


def test_the_memories_function_serves_the_same_document_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``GET /v1/openapi.json`` (what API Gateway routes to the memories function, with no
    authorizer) answers docs/openapi.json, whatever the caller; its version is
    ``engram.__version__``, which the package metadata reads too (a Lambda bundle has none)."""
    from importlib.metadata import version

    from functions.memories import handler as memories_fn

    import engram
    from engram.local.gateway import build_event
    from engram.local.lambda_context import FakeLambdaContext

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    ev = build_event(
        method="GET",
        raw_path="/v1/openapi.json",
        raw_query="",
        headers=[],
        body=b"",
        route_key="GET /v1/openapi.json",
        path_parameters={},
        source_ip="127.0.0.1",
        claims=None,
    )
    out = memories_fn.handler(ev, FakeLambdaContext())
    assert out["statusCode"] == 200
    assert json.loads(out["body"]) == json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert json.loads(out["body"])["info"]["version"] == engram.__version__ == version("engram")
