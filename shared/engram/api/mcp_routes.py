"""The MCP function's routes, beside the v1 API's: Streamable HTTP (``POST /mcp``, behind the
JWT authorizer) and its OAuth protected-resource metadata (public, RFC 9728's well-known path
for the resource ``/mcp``). The local service and the CDK stack both route these to
``functions/mcp/handler.py``."""

from __future__ import annotations

MCP_FUNCTION = "mcp"
MCP_PATH = "/mcp"
MCP_METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH

#: route key -> whether the route needs a token
MCP_ROUTES: dict[str, bool] = {
    f"POST {MCP_PATH}": True,
    f"GET {MCP_METADATA_PATH}": False,
}
MCP_PUBLIC_ROUTES: frozenset[str] = frozenset(k for k, auth in MCP_ROUTES.items() if not auth)
