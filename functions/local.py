"""The local service's composition: every Lambda function's handler, handed to ``engram``.

``engram`` imports no function (the functions are built on it), so the ``engram`` command
starts here (``[project.scripts]``): ``main`` is ``engram.cli.main`` given ``handlers``, which
``engram serve`` wires to its routes, its ingest queue and its maintenance timer
(``engram.local.app.build_app``). The handler modules are imported only when ``serve`` runs;
``engram token``, ``migrate`` and ``demo`` import none. ``python -m functions.local serve`` is
``engram serve``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram import cli

if TYPE_CHECKING:
    from engram.local.app import FunctionHandlers


def handlers() -> FunctionHandlers:
    """``functions/<name>/handler.py``'s ``handler`` of every function ``engram serve`` runs, by
    name. (The events function and the cache rotation do not run locally: the local app relays
    the outbox itself, and there is no cache secret to rotate.)"""
    from functions.ingest import handler as ingest
    from functions.ingest_consumer import handler as ingest_consumer
    from functions.maintenance import handler as maintenance
    from functions.mcp import handler as mcp
    from functions.memories import handler as memories
    from functions.session import handler as session

    return {
        "ingest": ingest.handler,
        "session": session.handler,
        "memories": memories.handler,
        "mcp": mcp.handler,
        "ingest_consumer": ingest_consumer.handler,
        "maintenance": maintenance.handler,
    }


def main(argv: list[str] | None = None) -> int:
    """The ``engram`` command, with the functions' handlers for ``engram serve``."""
    return cli.main(argv, handlers=handlers)


if __name__ == "__main__":
    raise SystemExit(main())
