"""The Python client declares every body it sends as JSON (the service answers 415
otherwise) and sends no Content-Type without a body."""

from __future__ import annotations

import json

import httpx
from tests.unit.client.bodies import respond

from engram_client import EngramClient


def test_every_body_is_sent_as_application_json() -> None:
    seen: list[tuple[str, str, str | None, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(
            (request.method, request.url.path, request.headers.get("content-type"), request.content)
        )
        return respond(request)

    client = EngramClient("http://engram.test", "tok", transport=httpx.MockTransport(handler))
    client.start_session(query="q")
    client.save("k", "v")
    client.update_memory("m1", value="v2")
    client.execute_tool("memory_recall", {"query": "q"})
    client.put_persona("p1", memory_enabled=True)
    client.set_team_memory(True)
    client.post_events([{"kind": "query", "text": "q"}])
    client.recall(query="q")
    client.delete_memory("m1")

    with_body = [s for s in seen if s[3]]
    assert len(with_body) == 7
    for method, path, content_type, body in with_body:
        assert content_type == "application/json", (method, path)
        assert isinstance(json.loads(body), dict)
    for method, path, content_type, _ in (s for s in seen if not s[3]):
        assert content_type is None, (method, path)
