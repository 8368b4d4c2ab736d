"""The local HTTP server and the Python client over real loopback sockets.

The route handlers here are small stand-ins written for the test (the real ones come with the
functions); they use the real models, identity and error mapping, so what the client sees is
what a real handler would produce.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from functions.local import handlers
from pydantic import ValidationError

from engram.api.errors import to_lambda_response
from engram.api.identity import caller_from_event
from engram.api.models import EventsRequest, MemoryRecallQuery, MemorySaveRequest
from engram.client import EngramAPIError, EngramClient, EngramTransportError, RetryPolicy
from engram.errors import NotFound
from engram.local.app import build_routes
from engram.local.server import LocalService
from engram.local.tokens import TokenSigner
from engram.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
#: the installed `engram` command (`[project.scripts]`), as the README runs it
ENGRAM = str(Path(sys.executable).with_name("engram"))


def respond(status: int, body: Any) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
    }


class Backend:
    """Stand-in handlers recording what reached them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.events: list[dict[str, Any]] = []
        self.requests = 0
        self.lock = threading.Lock()
        self.slow_s = 0.0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()  # a POST /v1/events reached its handler

    def routes(self) -> dict[str, Any]:
        def guarded(fn: Any) -> Any:
            def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
                try:
                    return fn(event)
                except Exception as exc:
                    return to_lambda_response(exc)

            return handler

        return {
            **build_routes(self.settings, handlers()),
            "POST /v1/events": guarded(self.post_events),
            "POST /v1/sessions": guarded(self.session),
            "POST /v1/memories": guarded(self.save),
            "GET /v1/memories": guarded(self.recall),
            "GET /v1/memories/{id}": guarded(self.get_memory),
            "POST /v1/tools/{name}": guarded(self.tool),
        }

    def post_events(self, event: dict[str, Any]) -> dict[str, Any]:
        caller_from_event(event, self.settings)
        body = EventsRequest.model_validate_json(event.get("body") or "")
        self.entered.set()
        self.gate.wait(10)
        time.sleep(self.slow_s)
        with self.lock:
            self.requests += 1
            self.events.extend(e.model_dump(by_alias=True) for e in body.events)
        ids = [f"o{i}" for i in range(len(body.events))]
        return respond(202, {"accepted": len(ids), "ids": ids})

    def session(self, event: dict[str, Any]) -> dict[str, Any]:
        caller = caller_from_event(event, self.settings)
        body = json.loads(event.get("body") or "{}")
        return respond(
            200, {"identityId": caller.identity_id, "service": caller.is_service, "request": body}
        )

    def save(self, event: dict[str, Any]) -> dict[str, Any]:
        caller_from_event(event, self.settings)
        body = MemorySaveRequest.model_validate_json(event.get("body") or "")
        return respond(201, {"key": body.key, "value": body.value})

    def recall(self, event: dict[str, Any]) -> dict[str, Any]:
        caller_from_event(event, self.settings)
        q = MemoryRecallQuery.model_validate(event.get("queryStringParameters") or {})
        return respond(200, {"memories": [q.model_dump(by_alias=True, exclude_none=True)]})

    def get_memory(self, event: dict[str, Any]) -> dict[str, Any]:
        caller_from_event(event, self.settings)
        raise NotFound("no such memory")

    def tool(self, event: dict[str, Any]) -> dict[str, Any]:
        caller_from_event(event, self.settings)
        return respond(
            200, {"name": event["pathParameters"]["name"], "result": json.loads(event["body"])}
        )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def signer(settings: Settings) -> TokenSigner:
    return TokenSigner(settings.data_dir, audience=settings.local_audience, settings=settings)


@pytest.fixture
def backend(settings: Settings) -> Backend:
    return Backend(settings)


@pytest.fixture
def service(settings: Settings, signer: TokenSigner, backend: Backend) -> Iterator[LocalService]:
    svc = LocalService(backend.routes(), settings=settings, signer=signer, port=0).start()
    yield svc
    svc.stop(timeout=5)


@pytest.fixture
def client(service: LocalService, signer: TokenSigner) -> Iterator[EngramClient]:
    c = EngramClient(service.url, signer.issue("alice", "acme"), timeout=5)
    yield c
    c.close()


def test_health_without_token(service: LocalService) -> None:
    response = httpx.get(f"{service.url}/v1/health", timeout=60)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_client_session_carries_identity(client: EngramClient) -> None:
    # the backend echoes what it was given: read the raw answer, not a typed one
    result = client.request(
        "POST", "/v1/sessions", json={"personaId": "helpdesk", "query": "royalties"}
    )
    assert result["identityId"] == "acme:alice"
    assert result["request"] == {"personaId": "helpdesk", "query": "royalties"}


def test_service_token_acts_for_a_user(service: LocalService, signer: TokenSigner) -> None:
    with EngramClient(service.url, signer.issue("backend", "acme", service=True)) as svc:
        result = svc.for_user("bob").request("POST", "/v1/sessions", json={})
        assert (result["identityId"], result["service"]) == ("acme:bob", True)


def test_user_token_acting_for_another_user_is_403(
    service: LocalService, signer: TokenSigner
) -> None:
    with (
        EngramClient(service.url, signer.issue("alice", "acme"), act_as="bob") as c,
        pytest.raises(EngramAPIError) as info,
    ):
        c.start_session()
    assert (info.value.status, info.value.code) == (403, "forbidden")


@pytest.mark.parametrize("kind", ["expired", "foreign", "audience", "garbage"])
def test_bad_tokens_are_401(
    service: LocalService, signer: TokenSigner, tmp_path: Path, kind: str
) -> None:
    token = {
        "expired": lambda: signer.issue("alice", "acme", ttl_s=-60),
        "foreign": lambda: TokenSigner(tmp_path / "x", audience="engram-local").issue("a", "t"),
        "audience": lambda: signer.issue("alice", "acme", audience="prod"),
        "garbage": lambda: "abc.def.ghi",
    }[kind]()
    with EngramClient(service.url, token) as c, pytest.raises(EngramAPIError) as info:
        c.start_session()
    assert (info.value.status, info.value.code) == (401, "unauthorized")


def test_typed_errors_name_the_field(client: EngramClient) -> None:
    with pytest.raises(EngramAPIError) as info:
        client.save("k", "v", confidence=3)
    assert info.value.status == 422
    assert info.value.details[0]["field"] == "confidence"
    with pytest.raises(EngramAPIError) as missing:
        client.get_memory("someone-elses")
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_save_recall_and_tool(client: EngramClient) -> None:
    # the backend echoes what it was given: read raw answers, not typed ones
    saved = client.request("POST", "/v1/memories", json={"key": "editor", "value": "vim"})
    assert saved == {"key": "editor", "value": "vim"}
    params = {"query": "edit", "maxResults": 5, "personaId": "p1"}
    recalled = client.request("GET", "/v1/memories", params=params)["memories"]
    assert recalled == [params]
    result = client.execute_tool("memory_save", '{"key": "k", "value": "v"}', persona_id="p1")
    assert result.to_json() == {
        "name": "memory_save",
        "result": {"arguments": '{"key": "k", "value": "v"}', "personaId": "p1"},
    }


def test_oversized_body_is_413(service: LocalService, signer: TokenSigner) -> None:
    token = signer.issue("alice", "acme")
    big = b'{"events": [' + b" " * (256 * 1024) + b"]}"
    response = httpx.post(
        f"{service.url}/v1/events",
        content=big,
        timeout=5,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


def test_invalid_json_is_400(service: LocalService, signer: TokenSigner) -> None:
    response = httpx.post(
        f"{service.url}/v1/memories",
        content=b'{"key": ',
        timeout=5,
        headers={"Authorization": f"Bearer {signer.issue('a', 't')}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_emit_delivers_everything_in_batches(client: EngramClient, backend: Backend) -> None:
    backend.gate.clear()  # hold the first request so the rest pile up
    for i in range(250):
        assert client.emit({"kind": "query", "text": f"q{i}"}) == 1
    backend.gate.set()
    assert client.drain(10)
    assert client.sent_events == 250
    assert client.dropped == client.failed_events == 0
    assert sorted(e["text"] for e in backend.events) == sorted(f"q{i}" for i in range(250))
    assert backend.requests < 250  # batched (≤100 per request)


def test_emit_drops_and_counts_when_full(
    service: LocalService, signer: TokenSigner, backend: Backend
) -> None:
    backend.gate.clear()
    c = EngramClient(service.url, signer.issue("alice", "acme"), queue_size=5)
    try:
        assert c.emit({"kind": "query", "text": "first"}) == 1
        deadline = time.monotonic() + 5
        while service.httpd._inflight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the worker is now blocked inside its first request
        queued = sum(c.emit({"kind": "query", "text": str(i)}) for i in range(50))
        assert queued == 5
        assert c.dropped == 45
    finally:
        backend.gate.set()
        assert c.drain(10)
        c.close()
    assert c.sent_events == 6


def test_emit_counts_refused_events(client: EngramClient) -> None:
    client.emit({"kind": "nope"})
    assert client.drain(10)
    assert (client.failed_events, client.sent_events) == (1, 0)


def test_transport_error_when_server_is_gone(signer: TokenSigner) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    retry = RetryPolicy(max_retries=2, backoff_s=0.01)
    with EngramClient(f"http://127.0.0.1:{port}", "t", timeout=1, retry=retry) as c:
        with pytest.raises(EngramTransportError) as err:
            c.health()
        assert (err.value.attempts, err.value.gave_up) == (3, True)  # refused: retried
        assert c.emit({"kind": "query", "text": "x"}) == 1  # never raises
        report = c.drain(5)
        assert report
        assert (report.failed, report.gave_up) == (1, 1)
        assert c.failed_events == 1


def test_stop_drains_in_flight_requests_then_runs_hooks(
    settings: Settings, signer: TokenSigner, backend: Backend
) -> None:
    svc = LocalService(backend.routes(), settings=settings, signer=signer, port=0).start()
    order: list[str] = []
    svc.add_drain_hook(lambda: order.append(f"hook after {backend.requests} request(s)"))
    backend.gate.clear()  # the request is held inside its handler until stop() has begun
    result: dict[str, Any] = {}

    def slow_request() -> None:
        with EngramClient(svc.url, signer.issue("a", "t"), timeout=20) as c:
            result["r"] = c.post_events([{"kind": "query", "text": "x"}])
            order.append("request")

    idle = EngramClient(svc.url, signer.issue("a", "t"), timeout=2)
    assert idle.health()["status"] == "ok"  # leaves a keep-alive connection open
    t = threading.Thread(target=slow_request)
    t.start()
    assert backend.entered.wait(10)
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(svc.stop(timeout=15)))
    stopper.start()
    deadline = time.monotonic() + 10
    while not svc._stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    backend.gate.set()
    stopper.join(20)
    t.join(20)
    assert stopped == [True]
    assert result["r"]["accepted"] == 1
    assert "hook after 1 request(s)" in order  # the hook ran after the request had finished
    assert backend.requests == 1
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{svc.url}/v1/health", timeout=1)
    with pytest.raises(EngramTransportError):
        idle.health()  # the idle keep-alive connection was closed too
    idle.close()


def test_validation_error_from_model_is_422_not_500() -> None:
    with pytest.raises(ValidationError) as info:
        EventsRequest.model_validate({"events": [{"kind": "tool"}]})
    assert to_lambda_response(info.value)["statusCode"] == 422


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_engram_serve_and_token_commands(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "ENGRAM_PORT": str(port),
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONSOLE_DIR": str(tmp_path / "no-console-here"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]),
    }
    token = subprocess.run(
        [ENGRAM, "token", "--user", "u", "--team", "t"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert token.count(".") == 2
    proc = subprocess.Popen(
        [ENGRAM, "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        health = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=60)
        assert health.status_code == 200
        unknown = httpx.get(f"http://127.0.0.1:{port}/v1/nothing", timeout=60)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "not_found"
        # without a built console the API still runs, and the banner and `/` say how to build it
        banner = [proc.stdout.readline() for _ in range(3)]
        assert any("console: not built" in b and "make setup" in b for b in banner), banner
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=60)
        assert page.status_code == 404
        assert "make setup" in page.text
        assert "npm ci" in page.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
