"""The HTTP functions route with Powertools' ``APIGatewayHttpResolver``
(``engram.adapters.apigateway.http_app``): each function answers exactly its spec routes, each
endpoint gets the current event and the container of the moment, errors all get the one error
body, path parameters are decoded like API Gateway decodes them, and concurrent requests on
one resolver (``engram serve`` calls a handler from many threads) never see each other's event.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from functions.ingest import handler as ingest_fn
from functions.memories import handler as memories_fn
from functions.session import handler as session_fn
from tests.support.unreachable import CLAIMS, UNREACHABLE

from engram import limits
from engram.adapters import observability
from engram.adapters.apigateway import answer, http_app, resolver
from engram.api.routes import ROUTES
from engram.api.web import Reply
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext

HANDLERS: dict[str, Any] = {
    "ingest": ingest_fn.handler,
    "session": session_fn.handler,
    "memories": memories_fn.handler,
}


pytestmark = pytest.mark.usefixtures("unreachable_container")


def event(
    method: str,
    raw_path: str,
    *,
    route_key: str | None = None,
    params: Mapping[str, str] | None = None,
    claims: Mapping[str, Any] | None = CLAIMS,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return build_event(
        method=method,
        raw_path=raw_path,
        raw_query="",
        headers=list((headers or {}).items()),
        body=body,
        route_key=route_key or f"{method} {raw_path}",
        path_parameters=dict(params or {}),
        source_ip="127.0.0.1",
        claims=claims,
    )


def call(name: str, ev: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    raw = HANDLERS[name](ev, FakeLambdaContext())
    text = raw.get("body")
    return (
        int(raw["statusCode"]),
        dict(raw.get("headers") or {}),
        json.loads(text) if text else None,
    )


def function_of(route_key: str) -> str:
    return next(r.function for r in ROUTES if r.route_key == route_key)


def concrete(path: str, value: str = "x1") -> str:
    return re.sub(r"{\w+}", value, path)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.auth], ids=lambda r: r.route_key)
def test_each_function_answers_exactly_its_routes(route: Any) -> None:
    owner = function_of(route.route_key)
    ev = event(str(route.method), concrete(route.path), route_key=route.route_key, claims=None)
    for name in HANDLERS:
        status, headers, body = call(name, ev)
        if name == owner:  # routed: the caller is checked first
            assert (status, body["error"]["code"]) == (401, "unauthorized")
            assert headers["WWW-Authenticate"] == "Bearer"
        else:
            assert status == 404
            assert body == {"error": {"code": "not_found", "message": "not found"}}
            assert headers["Content-Type"] == "application/json"


def test_unknown_path_and_method_are_spec_404() -> None:
    for method, path in [("GET", "/v1/nope"), ("DELETE", "/v1/tools"), ("GET", "/v1/memories/")]:
        status, _, body = call("memories", event(method, path))
        assert (status, body) == (404, {"error": {"code": "not_found", "message": "not found"}})


def test_path_parameter_is_percent_decoded_before_validation() -> None:
    # raw "a%01b" is printable; decoded it holds a control character
    ev = event("GET", "/v1/memories/a%01b", route_key="GET /v1/memories/{id}")
    status, _, body = call("memories", ev)
    assert status == 422
    assert body["error"]["details"] == [
        {
            "field": "id",
            "message": "id: must not contain control characters",
            "type": "invalid_input",
        }
    ]
    too_long = "f" * (limits.MAX_FACT_ID_CHARS + 1)
    ev = event("DELETE", "/v1/facts/" + too_long, route_key="DELETE /v1/facts/{factId}")
    status, _, body = call("memories", ev)
    assert (status, body["error"]["details"][0]["field"]) == (422, "factId")


def test_body_errors_keep_their_shapes() -> None:
    key = "POST /v1/memories"
    cases = [
        (b"{nope", {"content-type": "application/json"}, 400, "invalid_json"),
        (b"{}", {"content-type": "text/plain"}, 415, "unsupported_media_type"),
        (b'{"key": "k"}', {}, 422, "invalid_input"),
        (b"", {}, 400, "invalid_json"),
    ]
    for body, headers, status, code in cases:
        got, _, payload = call(
            "memories", event("POST", "/v1/memories", route_key=key, body=body, headers=headers)
        )
        assert (got, payload["error"]["code"]) == (status, code)
    too_big = b'{"key": "k", "value": "' + b"v" * UNREACHABLE.max_body_bytes + b'"}'
    got, _, payload = call("memories", event("POST", "/v1/memories", body=too_big))
    assert (got, payload["error"]["code"]) == (413, "body_too_large")


def test_ingest_transcript_names_the_body_field_after_the_caller() -> None:
    key = "POST /v1/conversations/{conversationId}/transcript"
    ev = event("POST", "/v1/conversations/c%201/transcript", route_key=key, body=b"{}")
    status, _, body = call("ingest", ev)
    assert status == 422
    assert body["error"]["details"][0]["field"] == "messages"


# --- the resolver itself -------------------------------------------------------------------
def test_a_reply_is_json_with_headers_and_no_body_for_204() -> None:
    app = resolver()

    @app.get("/v1/a")
    def a() -> Response[str]:
        return answer(Reply(200, {"b": [1, "é"]}, headers={"Cache-Control": "no-store"}))

    @app.delete("/v1/a")
    def gone() -> Response[str]:
        return answer(Reply(204))

    out = app.resolve(event("GET", "/v1/a"), FakeLambdaContext())
    assert out["statusCode"] == 200
    assert out["body"] == '{"b":[1,"é"]}'
    assert out["headers"] == {"Content-Type": "application/json", "Cache-Control": "no-store"}
    out = app.resolve(event("DELETE", "/v1/a"), FakeLambdaContext())
    assert (out["statusCode"], out["body"]) == (204, "")
    assert out["headers"] == {"Content-Type": "application/json"}


def test_a_replys_metrics_are_recorded_on_the_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_objects", {})
    metrics = observability.metrics()
    metrics.clear_metrics()  # Powertools keeps one metric set per process
    try:
        answer(Reply(202, metrics={"ObservationsAccepted": 3, "TranscriptsQueued": 1}))
        recorded = {name: m["Value"] for name, m in metrics.metric_set.items()}
        assert recorded == {"ObservationsAccepted": [3.0], "TranscriptsQueued": [1.0]}
    finally:
        metrics.clear_metrics()


class Behaviour:
    """The behaviour part of one container: records whose facts it listed."""

    def __init__(self) -> None:
        self.callers: list[str] = []

    def list_facts(self, identity_id: str) -> list[Any]:
        self.callers.append(identity_id)
        return []


def test_an_endpoint_gets_the_current_event_and_the_container_of_the_moment() -> None:
    first, second = Behaviour(), Behaviour()
    containers = iter(
        SimpleNamespace(settings=UNREACHABLE, behaviour=behaviour) for behaviour in (first, second)
    )
    app = http_app("memories", lambda: next(containers))  # nothing asked for yet
    bob = {**CLAIMS, "sub": "bob"}
    for claims in (CLAIMS, bob):
        out = app.resolve(event("GET", "/v1/facts", claims=claims), FakeLambdaContext())
        assert (out["statusCode"], json.loads(out["body"])) == (200, {"facts": []})
    assert (first.callers, second.callers) == (["acme:alice"], ["acme:bob"])


def test_concurrent_requests_on_one_resolver_keep_their_own_event() -> None:
    app = resolver()
    inside = threading.Barrier(2, timeout=10)

    @app.get("/v1/things/<thing_id>")
    def get_thing(thing_id: str) -> Response[str]:
        inside.wait()  # both requests are in a route: both events have been set
        current = app.current_event
        body = {
            "arg": thing_id,
            "path": current.raw_path,
            "user": current.headers.get("x-user"),
            "routeArgs": app.context.get("_route_args"),
        }
        return answer(Reply(200, body))

    results: dict[str, Any] = {}

    def run(user: str) -> None:
        ev = event("GET", f"/v1/things/{user}", headers={"x-user": user})
        results[user] = json.loads(app.resolve(ev, FakeLambdaContext())["body"])

    threads = [threading.Thread(target=run, args=(u,)) for u in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    for user in ("alice", "bob"):
        assert results[user] == {
            "arg": user,
            "path": f"/v1/things/{user}",
            "user": user,
            "routeArgs": {"thing_id": user},
        }


def test_a_route_stack_is_built_once_under_concurrent_first_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = resolver()

    @app.get("/v1/once")
    def once() -> Response[str]:
        return answer(Reply(200, {"ok": True}))

    builds: list[str] = []
    original = Route._build_middleware_stack

    def slow_build(self: Route, *args: Any, **kwargs: Any) -> None:
        builds.append(self.path)
        time.sleep(0.05)  # every other thread reaches the route meanwhile
        original(self, *args, **kwargs)

    monkeypatch.setattr(Route, "_build_middleware_stack", slow_build)
    start = threading.Barrier(4, timeout=10)
    statuses: list[int] = []

    def run() -> None:
        start.wait()
        statuses.append(app.resolve(event("GET", "/v1/once"), FakeLambdaContext())["statusCode"])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert builds == ["/v1/once"]
    assert statuses == [200] * 4
