"""The MCP function: Engram's MCP server over Streamable HTTP (``POST /mcp``), behind the same
JWT authorizer as the API, and the OAuth protected-resource metadata remote MCP clients read to
find where to sign in (``GET /.well-known/oauth-protected-resource/mcp``, public).

The server is stateless and answers JSON, never a stream (API Gateway HTTP APIs do not stream):
every ``POST /mcp`` stands alone, so any instance can answer it. One ``MCPServer`` serves every
invocation of the instance; the SDK's session manager can be run only once per instance of it,
so each invocation gets a fresh stateless app around the one server, and Mangum runs that app's
lifespan within the invocation.

The tools act for the caller: they call the HTTP API (``Settings.api_url``, else the URL the
request came to) with the bearer token of the request, so identity comes from the token the
authorizer accepted, never from a tool argument, and the function needs no store of its own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mangum import Mangum
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engram.api.mcp_routes import MCP_METADATA_PATH, MCP_PATH
from engram.settings import Settings
from engram_client import AsyncEngramClient
from engram_client.mcp import build_server

TOOL_CALL_TIMEOUT_S = 25.0  # within API Gateway's 30 s integration timeout


def _version() -> str:
    try:
        return version("engram")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def _settings() -> Settings:
    return Settings()


def _event(request: Request) -> dict[str, Any]:
    event: dict[str, Any] = request.scope.get("aws.event") or {}
    return event


def _base_url(request: Request) -> str:
    """Where this request reached the API: ``Settings.api_url``, else the request's own host
    (API Gateway says ``https`` in ``X-Forwarded-Proto``; the local service speaks http)."""
    configured = _settings().api_url
    if configured:
        return configured.rstrip("/")
    event = _event(request)
    domain = event.get("requestContext", {}).get("domainName") or request.url.netloc
    scheme = (event.get("headers") or {}).get("x-forwarded-proto", "http")
    return f"{scheme}://{domain}"


def _bearer(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ToolError("this request carries no bearer token")
    return token.strip()


@contextlib.asynccontextmanager
async def _clients(ctx: Context) -> AsyncIterator[AsyncEngramClient]:
    """The caller's client: the request's bearer token, against the API it came through."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolError("the MCP function answers HTTP requests only")
    async with AsyncEngramClient(
        _base_url(request), _bearer(request), timeout=TOOL_CALL_TIMEOUT_S, surface="mcp"
    ) as engram:
        yield engram


def _server() -> MCPServer:
    server = build_server(_clients, version=_version())

    @server.custom_route(MCP_METADATA_PATH, methods=["GET"])  # type: ignore[untyped-decorator]
    async def protected_resource(request: Request) -> Response:
        """RFC 9728 metadata: this endpoint, and the issuer whose tokens it accepts."""
        issuer = _settings().oauth_issuer
        if not issuer:
            return JSONResponse({"error": {"code": "not_found", "message": "no issuer"}}, 404)
        metadata = ProtectedResourceMetadata(
            resource=f"{_base_url(request)}{MCP_PATH}",
            authorization_servers=[issuer],
            bearer_methods_supported=["header"],
            resource_name="Engram",
        )
        return JSONResponse(metadata.model_dump(mode="json", exclude_none=True))

    return server


SERVER = _server()


def _app() -> Any:
    # The bearer token and API Gateway guard this endpoint; DNS-rebinding protection is for a
    # server on a developer's machine that a browser page could reach, so it stays off.
    return SERVER.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One API Gateway (payload 2.0) request to the MCP server."""
    response: dict[str, Any] = Mangum(_app(), lifespan="auto", api_gateway_base_path="/")(
        event, context
    )
    return response
