"""The MCP function's handler with API Gateway events: warm invocations of one instance each
get a fresh stateless app around the one server (the SDK's session manager runs once per
instance), answers are JSON, and the protected-resource metadata names the endpoint and the
issuer remote MCP clients sign in with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from functions.mcp import handler as mcp_fn

from engram.api.mcp_routes import MCP_METADATA_PATH
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext

ACCEPT = "application/json, text/event-stream"
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example"


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ENGRAM_API_URL", raising=False)
    monkeypatch.delenv("ENGRAM_OAUTH_ISSUER", raising=False)
    mcp_fn._settings.cache_clear()
    yield
    mcp_fn._settings.cache_clear()


def event(method: str, path: str, body: Any = None, **headers: str) -> dict[str, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    all_headers = {
        "host": "abc123.execute-api.eu-west-1.amazonaws.com",
        "x-forwarded-proto": "https",
        "authorization": "Bearer t0ken",
        "accept": ACCEPT,
        "content-type": "application/json",
        **headers,
    }
    return build_event(
        method=method,
        raw_path=path,
        raw_query="",
        headers=list(all_headers.items()),
        body=raw,
        route_key=f"{method} {path}",
        path_parameters={},
        source_ip="203.0.113.9",
        claims={"sub": "alice", "custom:team": "acme"},
    )


def rpc(method: str, params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


INITIALIZE = rpc(
    "initialize",
    {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
)


def test_warm_invocations_each_answer_json_without_a_session() -> None:
    for rid in range(3):  # one instance, several invocations: no "run() only once" failure
        answer = mcp_fn.handler(
            event("POST", "/mcp", {**INITIALIZE, "id": rid}), FakeLambdaContext()
        )
        assert answer["statusCode"] == 200, answer
        headers = {k.lower(): v for k, v in answer["headers"].items()}
        assert headers["content-type"].startswith("application/json")
        assert "mcp-session-id" not in headers
        body = json.loads(answer["body"])
        assert body["id"] == rid
        assert body["result"]["serverInfo"]["name"] == "engram"
    listed = mcp_fn.handler(
        event(
            "POST",
            "/mcp",
            rpc("tools/list", {}, 7),
            **{"mcp-protocol-version": "2025-06-18"},
        ),
        FakeLambdaContext(),
    )
    assert listed["statusCode"] == 200, listed
    names = {t["name"] for t in json.loads(listed["body"])["result"]["tools"]}
    assert {"memory_save", "memory_recall", "rank_tools"} <= names


def test_the_protected_resource_metadata_names_the_endpoint_and_the_issuer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = MCP_METADATA_PATH
    missing = mcp_fn.handler(event("GET", path), FakeLambdaContext())
    assert missing["statusCode"] == 404  # no issuer configured: nothing to point at

    monkeypatch.setenv("ENGRAM_OAUTH_ISSUER", ISSUER)
    mcp_fn._settings.cache_clear()
    answer = mcp_fn.handler(event("GET", path), FakeLambdaContext())
    assert answer["statusCode"] == 200
    metadata = json.loads(answer["body"])
    assert metadata["resource"] == "https://abc123.execute-api.eu-west-1.amazonaws.com/mcp"
    assert metadata["authorization_servers"] == [ISSUER]
    assert metadata["bearer_methods_supported"] == ["header"]

    monkeypatch.setenv("ENGRAM_API_URL", "https://memory.example.com/")
    mcp_fn._settings.cache_clear()
    configured = json.loads(mcp_fn.handler(event("GET", path), FakeLambdaContext())["body"])
    assert configured["resource"] == "https://memory.example.com/mcp"
