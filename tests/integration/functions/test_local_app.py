"""``engram serve``'s app in-process: every route reaches the Lambda handlers over HTTP, the
ingest queue's consumer is the consumer handler, the maintenance hook runs on its timer, and
stopping drains the queue."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
from functions.local import handlers
from tests.integration.functions.conftest import settings_for
from tests.support.services import RedisTarget
from tests.support.serving import serve

from engram.api.mcp_routes import MCP_ROUTES
from engram.api.routes import ROUTES
from engram.bootstrap import set_container
from engram.local.app import build_app
from engram.local.tokens import TokenSigner


def test_serve_app_end_to_end(redis_target: RedisTarget, migrated_url: str, tmp_path: Path) -> None:
    settings = settings_for(redis_target, migrated_url, tmp_path, maintenance_interval_s=1, port=0)
    runs = threading.Event()
    app = build_app(
        settings,
        handlers=handlers(),
        parts={"database_url": migrated_url, "migrate": False},
        maintenance=runs.set,
    )
    assert set(app.routes) == {r.route_key for r in ROUTES} | set(MCP_ROUTES)
    assert app.drain_hooks == []  # nothing runs before start()
    service = serve(app, settings)
    token = TokenSigner(tmp_path, audience=settings.local_audience, settings=settings).issue(
        "alice", "acme"
    )
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=service.url, headers=headers, timeout=10) as http:
            health = http.get("/v1/health").json()
            assert (health["redis"], health["postgres"]) == ("ok", "ok")
            events = {"events": [{"kind": "query", "text": "revenue by product"}]}
            accepted = http.post("/v1/events", json=events)
            assert accepted.status_code == 202
            assert app.ingest_queue is not None
            assert app.ingest_queue.drain(10)
            session: dict[str, Any] = http.post("/v1/sessions", json={}).json()
            assert {f["subject"] for f in session["facts"]} == {
                "domain_preference:revenue",
                "domain_preference:product",
            }
            saved = http.post("/v1/memories", json={"key": "editor", "value": "helix"})
            assert saved.status_code == 201
            assert http.get("/v1/memories/" + saved.json()["id"]).status_code == 200
            assert (
                http.get("/v1/memories/x", headers={"Authorization": "Bearer nope"}).status_code
                == 401
            )
        assert runs.wait(5), "the maintenance hook never ran"
    finally:
        assert service.stop()
        set_container(None)
    assert app.ingest_queue.pending() == 0
    assert app.scheduler is not None
    assert not app.scheduler.running
