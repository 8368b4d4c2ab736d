"""Every error becomes the one error body, directly and through a Powertools resolver."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import ValidationError

from engram import errors as domain
from engram.adapters.apigateway import register_error_handlers
from engram.api.errors import (
    BodyTooLargeError,
    error_response,
    to_lambda_response,
)
from engram.api.models import MemorySaveRequest, ObservationsRequest


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (domain.InvalidInput("personaId", "unknown persona"), 422, "invalid_input"),
        (domain.Unauthorized("no token"), 401, "unauthorized"),
        (domain.Forbidden("nope"), 403, "forbidden"),
        (domain.MemoryDisabled("off for team"), 403, "memory_disabled"),
        (domain.NotFound("no such memory"), 404, "not_found"),
        (domain.Conflict("busy"), 409, "conflict"),
        (domain.RateLimited("slow down", retry_after_s=7), 429, "rate_limited"),
        (domain.QuotaExceeded("full", retry_after_s=60), 429, "quota_exceeded"),
        (domain.Unavailable("sqs refused"), 503, "unavailable"),
        (BodyTooLargeError(256 * 1024), 413, "body_too_large"),
        (json.JSONDecodeError("bad", "{", 0), 400, "invalid_json"),
    ],
)
def test_domain_errors_map_to_status(exc: Exception, status: int, code: str) -> None:
    err = error_response(exc)
    assert (err.status, err.code) == (status, code)
    body = err.body()
    assert body["error"]["code"] == code
    assert body["error"]["message"]


def test_invalid_input_names_the_field() -> None:
    err = error_response(domain.InvalidInput("observations.0.type", "unknown type"))
    assert err.details == [
        {
            "field": "observations.0.type",
            "message": "observations.0.type: unknown type",
            "type": "invalid_input",
        }
    ]


def test_rate_limited_sets_retry_after() -> None:
    response = to_lambda_response(domain.RateLimited("slow down", retry_after_s=7))
    assert response["statusCode"] == 429
    assert response["headers"]["Retry-After"] == "7"


def test_unexpected_error_leaks_nothing() -> None:
    response = to_lambda_response(RuntimeError("password=hunter2 at /srv/app.py line 3"))
    assert response["statusCode"] == 500
    assert json.loads(response["body"]) == {
        "error": {"code": "internal", "message": "internal error"}
    }


def test_validation_error_details_do_not_echo_input() -> None:
    secret = "s3cr3t-value-" + "x" * 2000
    with pytest.raises(ValidationError) as info:
        MemorySaveRequest.model_validate({"key": "k", "value": secret})
    response = to_lambda_response(info.value)
    assert response["statusCode"] == 422
    assert "s3cr3t" not in response["body"]
    body = json.loads(response["body"])
    assert body["error"]["details"][0]["field"] == "value"
    assert body["error"]["message"].startswith("value: ")


# --- through a Powertools resolver --------------------------------------------------------
def make_app() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(enable_validation=True)
    register_error_handlers(app)

    @app.post("/v1/observations")
    def post(body: Annotated[ObservationsRequest, Body()]) -> dict[str, Any]:
        return {"accepted": len(body.observations)}

    @app.get("/v1/boom")
    def boom() -> dict[str, Any]:
        raise RuntimeError("internal detail /secret/path")

    @app.get("/v1/missing")
    def missing() -> dict[str, Any]:
        raise domain.NotFound("no such memory")

    return app


def event(method: str, path: str, body: str | None = None) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "127.0.0.1"},
            "requestId": "r1",
            "stage": "$default",
        },
        "body": body,
        "isBase64Encoded": False,
    }


class Ctx:
    function_name = "t"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:us-east-1:0:function:t"
    aws_request_id = "req"


def call(method: str, path: str, body: str | None = None) -> tuple[int, dict[str, Any]]:
    response = make_app().resolve(event(method, path, body), Ctx())
    return response["statusCode"], json.loads(response["body"])


def test_resolver_validation_error_names_the_field() -> None:
    body = json.dumps({"observations": [{"type": "bad", "content": "x"}]})
    status, payload = call("POST", "/v1/observations", body)
    assert status == 422
    assert payload["error"]["code"] == "invalid_input"
    assert payload["error"]["details"][0]["field"] == "observations.0.type"


def test_resolver_unknown_field_is_named() -> None:
    body = json.dumps({"observations": [{"type": "tool_success", "content": "x"}], "zzz": 1})
    status, payload = call("POST", "/v1/observations", body)
    assert status == 422
    assert "zzz" in [d["field"] for d in payload["error"]["details"]]


def test_resolver_invalid_json_is_400() -> None:
    status, payload = call("POST", "/v1/observations", '{"observations": [')
    assert status == 400
    assert payload["error"]["code"] == "invalid_json"


def test_resolver_accepts_good_input() -> None:
    body = json.dumps(
        {
            "observations": [
                {
                    "type": "tool_success",
                    "content": "x",
                    "metadata": {"toolName": "t", "durationMs": 1},
                }
            ]
        }
    )
    status, payload = call("POST", "/v1/observations", body)
    assert (status, payload) == (200, {"accepted": 1})


def test_resolver_domain_error_and_500() -> None:
    assert call("GET", "/v1/missing") == (
        404,
        {"error": {"code": "not_found", "message": "no such memory"}},
    )
    status, payload = call("GET", "/v1/boom")
    assert status == 500
    assert "secret" not in json.dumps(payload)


def test_resolver_unknown_route_is_404_error_body() -> None:
    status, payload = call("GET", "/v1/nowhere")
    assert status == 404
    assert payload["error"]["code"] == "not_found"
