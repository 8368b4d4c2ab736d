"""The ``engram`` command. Each subcommand lives in its own module, imported only when used.

``engram serve`` runs the Lambda functions' handlers, which ``engram`` does not import (the
functions are built on it): the installed ``engram`` command is ``functions.local.main``, which
calls ``main`` here with them (``handlers``, loaded only for ``serve``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.local.app import FunctionHandlers

# subcommand -> (module, one-line help). Each module exposes ``main(argv: list[str]) -> int``;
# those of ``WITH_HANDLERS`` take the loader of the functions' handlers too
# (``main(argv, handlers=...)``), and call it when they need them.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("engram.local.serve", "run the whole service locally (HTTP on 127.0.0.1:8000)"),
    "token": ("engram.local.tokens", "print a dev token signed by the local service's key"),
    "migrate": ("engram.adapters.postgres.migrate", "apply PostgreSQL migrations"),
    "demo": ("engram.demo", "a short demo of behavioural memory on an embedded Redis"),
}
WITH_HANDLERS = frozenset({"serve"})


def _usage() -> str:
    lines = ["usage: engram <command> [options]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(
    argv: list[str] | None = None,
    *,
    handlers: Callable[[], FunctionHandlers] | None = None,
) -> int:
    """Run one subcommand; ``handlers`` loads the functions' handlers ``engram serve`` runs."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"engram: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    if name in WITH_HANDLERS and handlers is None:
        print(
            f"engram: {name} runs the Lambda functions' handlers: start it with the installed "
            f"`engram {name}` or `python -m functions.local {name}`",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if name in WITH_HANDLERS:
        result: int = module.main(rest, handlers=handlers)
    else:
        result = module.main(rest)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
