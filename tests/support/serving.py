"""``engram serve`` inside the test process."""

from __future__ import annotations

from engram.local.app import LocalApp
from engram.local.server import LocalService
from engram.settings import Settings


def serve(app: LocalApp, settings: Settings) -> LocalService:
    """The app's HTTP service on a free port, started as ``engram serve`` starts it: the app's
    workers first, and their drain hooks run when the service stops."""
    service = LocalService(app.routes, settings=settings, port=0)
    app.start()
    for hook in app.drain_hooks:
        service.add_drain_hook(hook)
    service.start()
    return service
