"""The ``engram`` command. Each subcommand lives in its own module, imported only when used."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, one-line help). Each module exposes ``main(argv: list[str]) -> int``.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("engram.local.serve", "run the whole service locally (HTTP on 127.0.0.1:8000)"),
    "token": ("engram.local.tokens", "print a dev token signed by the local service's key"),
    "migrate": ("engram.adapters.postgres.migrate", "apply PostgreSQL migrations"),
    "demo": ("engram.demo", "a short demo of behavioural memory on an embedded Redis"),
}


def _usage() -> str:
    lines = ["usage: engram <command> [options]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"engram: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
