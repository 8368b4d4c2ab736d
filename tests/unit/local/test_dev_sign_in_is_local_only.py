"""The dev sign-in exists in the local service only: no route of the API's route table, the
MCP routes or the OpenAPI document is it, no Lambda handler module mentions it or imports the
local service, and each HTTP function answers a request for it (even with the route key a
gateway would give it) with its JSON 404."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from engram.api.mcp_routes import MCP_ROUTES
from engram.api.routes import CATCH_ALL, HTTP_FUNCTIONS, ROUTES
from engram.local.console import CONFIG_PATH, DEV_SIGN_IN_PATH
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext

REPO = Path(__file__).resolve().parents[3]


pytestmark = pytest.mark.usefixtures("unreachable_container")


def test_no_api_route_is_the_dev_sign_in_or_the_local_config():
    paths = [r.path for r in ROUTES] + [k.partition(" ")[2] for k in MCP_ROUTES] + [CATCH_ALL]
    for path in paths:
        assert not path.startswith("/dev"), path
        assert "sign-in" not in path, path
        assert path != CONFIG_PATH
    # the gateway's catch-all covers /v1 only, so /dev/sign-in reaches no function in AWS
    assert CATCH_ALL.startswith("/v1/")
    openapi = json.loads((REPO / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert not [p for p in openapi["paths"] if p.startswith("/dev") or "sign-in" in p]


def test_no_lambda_handler_mentions_the_sign_in_or_imports_the_local_service():
    # what a Lambda bundle holds (infra.bundling: functions/<name>/ and functions/__init__.py);
    # functions/local.py is the local service's composition, which no bundle holds
    functions = REPO / "functions"
    sources = sorted([*functions.glob("*/**/*.py"), functions / "__init__.py"])
    assert functions / "ingest" / "handler.py" in sources
    assert functions / "local.py" not in sources
    for source in sources:
        text = source.read_text(encoding="utf-8")
        assert "sign-in" not in text, source
        assert "sign_in" not in text, source
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n.startswith("engram.local")], source


@pytest.mark.parametrize("function", HTTP_FUNCTIONS)
@pytest.mark.parametrize("route_key", ["POST /dev/sign-in", "$default"])
def test_every_http_function_answers_the_sign_in_with_404(function: str, route_key: str):
    handler = importlib.import_module(f"functions.{function}.handler").handler
    body = json.dumps({"user": "mallory", "team": "acme", "admin": True}).encode()
    event = build_event(
        method="POST",
        raw_path=DEV_SIGN_IN_PATH,
        raw_query="",
        headers=[("content-type", "application/json"), ("host", "localhost")],
        body=body,
        route_key=route_key,
        path_parameters={},
        source_ip="127.0.0.1",
        claims=None,
    )
    response: dict[str, Any] = handler(event, FakeLambdaContext())
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["error"]["code"] == "not_found"
    assert "idToken" not in response["body"]
