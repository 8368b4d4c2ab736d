"""Engram as an MCP server (``pip install "engram-client[mcp]"``): ``build_server`` for any
transport, ``engram-mcp --url URL`` over stdio (see ``engram_client.mcp.cli``)."""

from __future__ import annotations

try:
    from engram_client.mcp.server import INSTRUCTIONS, SERVER_NAME, ClientFactory, build_server
except ModuleNotFoundError as missing:  # pragma: no cover - the extra is not installed
    if missing.name is None or not missing.name.startswith("mcp"):
        raise
    raise ModuleNotFoundError(
        'the MCP server needs the mcp SDK: pip install "engram-client[mcp]"', name=missing.name
    ) from missing

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "ClientFactory", "build_server"]
