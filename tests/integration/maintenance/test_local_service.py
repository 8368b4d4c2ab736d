"""The local service end to end: a transcript posted to the route lands on the in-process
extraction queue; the scheduled hook (``functions.maintenance.handler``) pulls it into the
review queue."""

from __future__ import annotations

import json
from pathlib import Path

from functions.local import handlers
from tests.support.services import RedisTarget

from engram.adapters.postgres.migrate import apply_migrations
from engram.bootstrap import set_container
from engram.identity import Caller
from engram.local.app import build_app, maintenance_job
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext
from engram.settings import Settings


def test_transcript_route_then_scheduled_hook(
    redis_target: RedisTarget, database_url: str, tmp_path: Path
) -> None:
    apply_migrations(database_url, embedding_dimensions=1024)
    settings = Settings(**redis_target.settings(), database_url=database_url, data_dir=tmp_path)
    app = build_app(
        settings, handlers=handlers(), parts={"database_url": database_url, "migrate": False}
    )
    try:
        route = "POST /v1/conversations/{conversationId}/transcript"
        body = {"messages": [{"role": "user", "content": "My favourite editor is helix."}]}
        event = build_event(
            method="POST",
            raw_path="/v1/conversations/conv-7/transcript",
            raw_query="",
            headers=[],
            body=json.dumps(body).encode(),
            route_key=route,
            path_parameters={"conversationId": "conv-7"},
            source_ip="127.0.0.1",
            claims={"sub": "alice", "custom:team": "acme", "scope": "engram/user"},
        )
        response = app.routes[route](event, FakeLambdaContext())
        assert response["statusCode"] == 202
        assert app.extraction_queue is not None
        assert app.extraction_queue.pending() == 1

        report = maintenance_job(handlers()["maintenance"])()
        assert isinstance(report, dict)
        assert report["tasks"]["extraction"]["counts"]["proposalsCreated"] == 1
        assert report["tasks"]["retention"]["ran"] is True  # the local timer runs every task
        assert app.extraction_queue.pending() == 0

        assert app.container is not None
        boss = Caller(user_id="boss", team_id="acme", is_team_admin=True)
        pending = app.container.memories.review.list_pending(boss).memories
        assert [(m.key, m.value, m.source_channel_id) for m in pending] == [
            ("preferred editor", "helix", "conv-7")
        ]
    finally:
        set_container(None)
        if app.container is not None:
            app.container.close()
            if app.container.built("redis"):
                app.container.redis.close()
