"""``engram-mcp --url URL``: Engram's MCP server over stdio, for desktop assistants and IDEs.

The token is read from ``ENGRAM_TOKEN`` (never from the command line, where other users of
the machine could read it in the process list); every tool call acts as that token's user.
Logs go to stderr: stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from importlib.metadata import PackageNotFoundError, version

TOKEN_VARIABLE = "ENGRAM_TOKEN"  # noqa: S105 - the name of the variable, not a token


def _version() -> str:
    try:
        return version("engram-client")
    except PackageNotFoundError:
        return "0+unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="engram-mcp",
        description="Engram's MCP server over stdio; the token is read from $ENGRAM_TOKEN.",
    )
    parser.add_argument("--url", required=True, help="Engram's API, e.g. https://api.example.com")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        parser.error(f"set {TOKEN_VARIABLE} to an Engram access token")

    from mcp.server.mcpserver import Context

    from engram_client._async import AsyncEngramClient
    from engram_client.mcp import build_server

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    engram: AsyncEngramClient | None = None

    @contextlib.asynccontextmanager
    async def clients(ctx: Context) -> AsyncIterator[AsyncEngramClient]:
        # one client for the process, made on the server's event loop at the first call
        nonlocal engram
        if engram is None:
            engram = AsyncEngramClient(args.url, token, timeout=args.timeout, surface="mcp")
        yield engram

    build_server(clients, version=_version()).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
