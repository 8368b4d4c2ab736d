"""Body parsing and responses for resolver-less handlers map to the right HTTP errors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError

from engram.api.errors import error_response
from engram.api.http import json_response, parse_body
from engram.api.models import MemoryOut, MemorySaveRequest, SessionRequest


def ev(body: str | None, *, b64: bool = False) -> dict[str, Any]:
    return {"body": body, "isBase64Encoded": b64}


def status_of(event: dict[str, Any], **kw: Any) -> int:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any mapped error
        parse_body(event, MemorySaveRequest, **kw)
    return error_response(info.value).status


def test_parses_plain_and_base64_bodies() -> None:
    raw = json.dumps({"key": "k", "value": "v"})
    assert parse_body(ev(raw), MemorySaveRequest).key == "k"
    b64 = base64.b64encode(raw.encode()).decode()
    assert parse_body(ev(b64, b64=True), MemorySaveRequest).value == "v"


@pytest.mark.parametrize(
    ("event", "status"),
    [
        (ev(None), 400),
        (ev("   "), 400),
        (ev("{"), 400),
        (ev("[1, 2]"), 400),
        (ev('"text"'), 400),
        (ev("!!!", b64=True), 400),
        (ev('{"key": "k"}'), 422),
        (ev('{"key": "k", "value": "v", "x": 1}'), 422),
    ],
)
def test_bad_bodies(event: dict[str, Any], status: int) -> None:
    assert status_of(event) == status


def test_oversized_body_is_413() -> None:
    assert status_of(ev(json.dumps({"key": "k", "value": "v" * 5000})), max_bytes=1024) == 413


def test_empty_body_may_mean_empty_object() -> None:
    assert parse_body(ev(None), SessionRequest, empty_as_object=True) == SessionRequest()


def test_validation_error_names_field() -> None:
    with pytest.raises(ValidationError) as info:
        parse_body(ev('{"key": "k", "value": ""}'), MemorySaveRequest)
    assert error_response(info.value).details[0]["field"] == "value"


def test_json_response_uses_aliases(memory_out: MemoryOut) -> None:
    response = json_response(201, memory_out, headers={"Location": "/v1/memories/m1"})
    assert response["statusCode"] == 201
    assert json.loads(response["body"])["ownerId"] == "p"
    assert response["headers"]["Location"] == "/v1/memories/m1"
    assert "body" not in json_response(204)
