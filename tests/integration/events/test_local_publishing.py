"""Locally the same outbox is published to a JSONL file and, optionally, a webhook: `engram
serve`'s timer publishes what a request committed; a webhook that fails is retried with the
same event id."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from functions.local import handlers
from tests.integration.events.conftest import DIMS, World
from tests.support.services import RedisTarget

from engram.adapters.eventbridge import JsonlBus
from engram.adapters.postgres.pool import Database
from engram.bootstrap import set_container
from engram.events.relay import backoff_ms
from engram.local.app import build_app
from engram.memories.commands import SaveMemory
from engram.settings import Settings


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


class Webhook:
    """A loopback HTTP server answering ``statuses`` in turn (then 204), recording bodies."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                hook.bodies.append({**body, "header": self.headers["x-engram-event-id"]})
                self.send_response(hook.statuses.pop(0) if hook.statuses else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_a_webhook_that_fails_is_retried_with_the_same_event_id(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    world.container.memories.save(world.caller("alice"), SaveMemory(key="k", value="v"))
    with Webhook([500]) as hook:
        relay = world.relay(bus=JsonlBus(path, webhook_url=hook.url))
        assert relay.drain().refused == 1
        world.clock.advance(ms=backoff_ms(1))
        assert relay.drain().sent == 1
    written = lines(path)
    assert len(written) == 2  # the file got it on each try
    assert written[0] == written[1]
    assert written[0]["detail-type"] == "memory.saved"
    assert [b["detail"]["eventId"] for b in hook.bodies] == [written[0]["detail"]["eventId"]] * 2
    assert {b["header"] for b in hook.bodies} == {written[0]["detail"]["eventId"]}


@pytest.fixture
def served(
    standalone_redis: RedisTarget, db: Database, tmp_path: Path
) -> Iterator[tuple[Any, Path]]:
    settings = Settings(
        **standalone_redis.settings(),
        database_url=db.conninfo,
        data_dir=tmp_path,
        embedding_dimensions=DIMS,
        events_poll_ms=100,
    )
    app = build_app(
        settings,
        handlers=handlers(),
        parts={"database_url": db.conninfo, "migrate": False},
        maintenance=lambda: None,
        run_events=True,
        durable_queues=False,
    )
    app.start()
    try:
        yield app, tmp_path / "events.jsonl"
    finally:
        for hook in app.drain_hooks:
            hook()
        set_container(None)


def test_engram_serve_publishes_committed_changes_to_the_jsonl_file(
    served: tuple[Any, Path],
) -> None:
    app, path = served
    from engram.identity import Caller

    alice = Caller(user_id="alice", team_id="acme")
    memory, _ = app.container.memories.save(alice, SaveMemory(key="k", value="v"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not lines(path):
        time.sleep(0.05)
    (line,) = lines(path)
    assert line["source"] == "engram"
    assert line["detail"]["memoryId"] == memory.id
    assert line["detail"]["type"] == "memory.saved"
