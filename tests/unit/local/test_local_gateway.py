"""The API Gateway emulation: route matching, JWT authorizer, v2.0 events, responses."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from functions.local import handlers

from engram.api.identity import caller_from_event
from engram.local.app import build_app, build_routes, make_health_handler
from engram.local.gateway import ApiGatewayEmulator, compile_routes
from engram.local.lambda_context import LambdaHandler
from engram.local.scheduler import Periodic
from engram.local.tokens import TokenSigner
from engram.settings import Settings

SETTINGS = Settings()


class Recorder:
    def __init__(self, response: Any = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.response = response or {"statusCode": 200, "body": "{}"}

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        assert context.aws_request_id
        self.events.append(event)
        return self.response


@pytest.fixture
def signer(tmp_path: Path) -> TokenSigner:
    return TokenSigner(tmp_path, audience="engram-local", settings=SETTINGS)


def gateway(signer: TokenSigner, routes: dict[str, LambdaHandler]) -> ApiGatewayEmulator:
    return ApiGatewayEmulator(routes, signer=signer, settings=SETTINGS)


def auth(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json")]


def test_event_is_api_gateway_v2(signer: TokenSigner) -> None:
    rec = Recorder()
    gw = gateway(signer, {"PATCH /v1/memories/{id}": rec})
    token = signer.issue("alice", "acme", groups=("g1", "g2"))
    headers = [*auth(token), ("X-Trace", "a"), ("X-Trace", "b"), ("Cookie", "c1=1; c2=2")]
    result = gw.handle(
        "PATCH", "/v1/memories/m%2F1?x=1&x=2&y=", headers, b'{"value":"v"}', "10.0.0.1"
    )
    assert result.status == 200
    event = rec.events[0]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "PATCH /v1/memories/{id}"
    assert event["rawPath"] == "/v1/memories/m%2F1"
    assert event["rawQueryString"] == "x=1&x=2&y="
    assert event["queryStringParameters"] == {"x": "1,2", "y": ""}
    assert event["pathParameters"] == {"id": "m/1"}
    assert event["headers"]["x-trace"] == "a,b"
    assert event["headers"]["content-type"] == "application/json"
    assert event["cookies"] == ["c1=1", "c2=2"]
    assert event["body"] == '{"value":"v"}'
    assert event["isBase64Encoded"] is False
    ctx = event["requestContext"]
    assert ctx["http"] == {
        "method": "PATCH",
        "path": "/v1/memories/m%2F1",
        "protocol": "HTTP/1.1",
        "sourceIp": "10.0.0.1",
        "userAgent": "",
    }
    assert ctx["requestId"]
    assert isinstance(ctx["timeEpoch"], int)
    assert ctx["time"]
    jwt = ctx["authorizer"]["jwt"]
    assert jwt["claims"]["sub"] == "alice"
    assert jwt["claims"]["cognito:groups"] == "[g1 g2]"  # flattened like API Gateway
    assert jwt["scopes"] == ["engram/user"]
    caller = caller_from_event(event, SETTINGS)
    assert (caller.user_id, caller.team_id, caller.groups) == ("alice", "acme", {"g1", "g2"})


def test_binary_body_is_base64(signer: TokenSigner) -> None:
    rec = Recorder()
    gw = gateway(signer, {"POST /v1/x": rec})
    gw.handle("POST", "/v1/x", auth(signer.issue("a", "t")), b"\xff\xfe")
    event = rec.events[0]
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\xfe"


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [("Authorization", "Basic abc")],
        [("Authorization", "Bearer")],
        [("Authorization", "Bearer garbage")],
    ],
)
def test_bad_or_missing_token_is_401_json(
    signer: TokenSigner, headers: list[tuple[str, str]]
) -> None:
    rec = Recorder()
    result = gateway(signer, {"GET /v1/facts": rec}).handle("GET", "/v1/facts", headers, b"")
    assert result.status == 401
    assert json.loads(result.body)["error"]["code"] == "unauthorized"
    assert rec.events == []


def test_expired_and_foreign_tokens_are_401(signer: TokenSigner, tmp_path: Path) -> None:
    gw = gateway(signer, {"GET /v1/facts": Recorder()})
    expired = signer.issue("a", "t", ttl_s=-100)
    foreign = TokenSigner(tmp_path / "other", audience="engram-local", settings=SETTINGS)
    wrong_aud = signer.issue("a", "t", audience="prod")
    for token in (expired, foreign.issue("a", "t"), wrong_aud):
        assert gw.handle("GET", "/v1/facts", auth(token), b"").status == 401


def test_health_is_public(signer: TokenSigner) -> None:
    gw = gateway(signer, build_routes(SETTINGS, handlers()))
    result = gw.handle("GET", "/v1/health", [], b"")
    assert result.status == 200
    body = json.loads(result.body)
    assert body["status"] == "ok"
    assert {"version", "redis", "postgres"} <= body.keys()


def test_health_reports_failed_probes() -> None:
    def down() -> None:
        raise ConnectionError("refused")

    handler = make_health_handler(redis=lambda: True, postgres=down)
    body = json.loads(handler({}, None)["body"])
    assert (body["status"], body["redis"], body["postgres"]) == ("degraded", "ok", "down")
    assert build_app(SETTINGS, handlers=handlers()).drain_hooks == []


def test_unknown_route_is_404_and_wrong_method_is_405_with_allow(signer: TokenSigner) -> None:
    rec = Recorder()
    gw = gateway(signer, {"GET /v1/facts": rec, "DELETE /v1/facts/{factId}": rec})
    token = signer.issue("a", "t")
    unknown = gw.handle("GET", "/v1/nothing", auth(token), b"")
    assert unknown.status == 404
    assert json.loads(unknown.body)["error"]["code"] == "not_found"
    for method in ("POST", "TRACE", "QUERY", "PROPFIND"):
        wrong = gw.handle(method, "/v1/facts", auth(token), b"")
        assert wrong.status == 405
        assert ("Allow", "GET") in wrong.headers
        assert json.loads(wrong.body)["error"]["code"] == "method_not_allowed"
    assert ("Allow", "DELETE") in gw.handle("GET", "/v1/facts/f1", [], b"").headers  # no token
    assert gw.handle("TRACE", "/v1/nothing", [], b"").status == 404
    assert rec.events == []


def test_literal_routes_win_over_parameters(signer: TokenSigner) -> None:
    literal, param = Recorder(), Recorder()
    gw = gateway(signer, {"GET /v1/memories/{id}": param, "GET /v1/memories/special": literal})
    gw.handle("GET", "/v1/memories/special", auth(signer.issue("a", "t")), b"")
    assert len(literal.events) == 1
    assert param.events == []
    order = [r.key for r, _ in compile_routes({"GET /a/{x}": param, "GET /a/b": literal})]
    assert order == ["GET /a/b", "GET /a/{x}"]


def test_greedy_parameter(signer: TokenSigner) -> None:
    rec = Recorder()
    gw = gateway(signer, {"GET /files/{path+}": rec})
    gw.handle("GET", "/files/a/b/c", auth(signer.issue("a", "t")), b"")
    assert rec.events[0]["pathParameters"] == {"path": "a/b/c"}


def test_handler_response_is_written_back(signer: TokenSigner) -> None:
    rec = Recorder(
        {
            "statusCode": 201,
            "headers": {"X-A": "1"},
            "cookies": ["s=1"],
            "body": base64.b64encode(b"\x00bin").decode(),
            "isBase64Encoded": True,
        }
    )
    result = gateway(signer, {"GET /v1/x": rec}).handle(
        "GET", "/v1/x", auth(signer.issue("a", "t")), b""
    )
    assert result.status == 201
    assert ("X-A", "1") in result.headers
    assert ("Set-Cookie", "s=1") in result.headers
    assert result.body == b"\x00bin"


def test_plain_json_return_means_200(signer: TokenSigner) -> None:
    rec = Recorder({"hello": "world"})
    result = gateway(signer, {"GET /v1/x": rec}).handle(
        "GET", "/v1/x", auth(signer.issue("a", "t")), b""
    )
    assert (result.status, json.loads(result.body)) == (200, {"hello": "world"})


def test_raising_handler_is_500_without_details(signer: TokenSigner) -> None:
    def boom(event: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("secret stack detail")

    result = gateway(signer, {"GET /v1/x": boom}).handle(
        "GET", "/v1/x", auth(signer.issue("a", "t")), b""
    )
    assert result.status == 500
    assert b"secret" not in result.body


def test_bad_route_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="bad route key"):
        compile_routes({"FETCH /x": Recorder()})
    with pytest.raises(ValueError, match="bad route key"):
        compile_routes({"GET x": Recorder()})


def test_periodic_runs_until_stopped_and_survives_errors() -> None:
    ran = threading.Event()
    calls: list[int] = []

    def job() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first run fails")
        if len(calls) >= 3:
            ran.set()

    p = Periodic(job, 0.01, name="test").start()
    assert ran.wait(5)
    assert p.stop(5)
    assert not p.running
    count = len(calls)
    assert p.failures == 1
    assert p.runs == count
    ran.clear()
    assert not ran.wait(0.05)
    assert len(calls) == count
    with pytest.raises(ValueError, match="positive"):
        Periodic(job, 0)
