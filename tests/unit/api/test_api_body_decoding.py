"""Request bodies the JSON decoder cannot turn into a value, and bodies that are not JSON at
all, are client errors (400 / 415 / 422 naming the field), never a 500."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import ValidationError

from engram.api.errors import InvalidJsonError, UnsupportedMediaTypeError, error_response
from engram.api.http import MAX_JSON_DEPTH, decode_json, is_json_media_type, parse_body
from engram.api.models import MemorySaveRequest, ObservationsRequest, ToolCallRequest

GOOD = json.dumps({"key": "k", "value": "v"})


def ev(body: str | None, content_type: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"body": body, "isBase64Encoded": False}
    if content_type is not None:
        event["headers"] = {"content-type": content_type}
    return event


def mapped(event: dict[str, Any], model: type[Any] = MemorySaveRequest) -> tuple[int, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any mapped error
        parse_body(event, model)
    err = error_response(info.value)
    return err.status, err.code


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BOMBS = {
    "array nested 1500 deep (RecursionError)": nested(1500),
    "object nested 1500 deep": '{"a":' * 1500 + "1" + "}" * 1500,
    "metadata nested 1500 deep": '{"observations":[{"type":"query_pattern","content":"x",'
    '"metadata":{"a":' + nested(1500) + "}}]}",
    "integer of 5000 digits (ValueError)": '{"key":"k","value":"v","confidence":1'
    + "0" * 5000
    + "}",
    "NaN": '{"key":"k","value":"v","confidence":NaN}',
    "Infinity": '{"key":"k","value":"v","confidence":-Infinity}',
    f"nested {MAX_JSON_DEPTH + 1} deep (over the cap)": '{"a":' + nested(MAX_JSON_DEPTH) + "}",
}


@pytest.mark.parametrize("body", BOMBS.values(), ids=list(BOMBS))
def test_json_the_decoder_cannot_take_is_400_invalid_json(body: str) -> None:
    assert mapped(ev(body)) == (400, "invalid_json")
    assert mapped(ev(body), ObservationsRequest) == (400, "invalid_json")


def test_nesting_up_to_the_cap_is_decoded() -> None:
    value = decode_json('{"a":' + nested(MAX_JSON_DEPTH - 1) + "}")
    assert isinstance(value, dict)
    many_shallow = "[" + ",".join(["[1]"] * 1000) + "]"  # many brackets, depth 2
    assert len(decode_json(many_shallow)) == 1000
    assert decode_json('"[[[[ not structure ]"') == "[[[[ not structure ]"


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


TRICKY = ["[", "]}", '"', "\\", '\\"', '"]', "\\[", "\n{", "Zoë [😀", "", "\\\\"]


def random_json(rng: random.Random, level: int = 0) -> Any:
    roll = rng.random()
    if level > 9 or roll < 0.3:
        return rng.choice([*TRICKY, 1, -2.5, None, True])
    if roll < 0.65:
        return [random_json(rng, level + 1) for _ in range(rng.randint(0, 3))]
    keys = [rng.choice(TRICKY) + str(i) for i in range(rng.randint(0, 3))]
    return {key: random_json(rng, level + 1) for key in keys}


def test_nesting_is_measured_on_structure_not_on_brackets_inside_strings() -> None:
    rng = random.Random(64)
    for _ in range(2000):
        value = random_json(rng)
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        data: str | bytes = rng.choice(
            [text, text.encode(), text.encode("utf-16"), text.encode("utf-8-sig")]
        )
        for limit in range(12):
            if depth(value) > limit:
                with pytest.raises(InvalidJsonError):
                    decode_json(data, max_depth=limit)
            else:
                assert decode_json(data, max_depth=limit) == value


def test_decode_json_raises_only_invalid_json_error() -> None:
    for body in BOMBS.values():
        with pytest.raises(InvalidJsonError):
            decode_json(body)
        with pytest.raises(InvalidJsonError):
            decode_json(body.encode())
    with pytest.raises(InvalidJsonError):
        decode_json(b'{"a": "\xff"}')  # not UTF-8


@pytest.mark.parametrize(
    "arguments",
    [
        '{"key": ' + nested(1500) + "}",
        '{"key": "k", "value": "v", "confidence": 1' + "0" * 5000 + "}",
        '{"key": NaN}',
        '{"key": ' + nested(MAX_JSON_DEPTH + 1) + "}",
    ],
    ids=["nested 1500", "5000 digits", "NaN", "over the cap"],
)
def test_tool_arguments_string_the_decoder_cannot_take_is_422_naming_arguments(
    arguments: str,
) -> None:
    with pytest.raises(ValidationError) as info:
        ToolCallRequest.model_validate({"arguments": arguments})
    err = error_response(info.value)
    assert (err.status, err.code) == (422, "invalid_input")
    assert err.details[0]["field"] == "arguments"
    status, _ = mapped(ev(json.dumps({"arguments": arguments})), ToolCallRequest)
    assert status == 422


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "text/json-ish",
        "application/xml",
    ],
)
def test_a_body_that_is_not_json_by_content_type_is_415(content_type: str) -> None:
    assert mapped(ev(GOOD, content_type)) == (415, "unsupported_media_type")
    with pytest.raises(UnsupportedMediaTypeError):
        parse_body(ev(GOOD, content_type), MemorySaveRequest)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
        "application/merge-patch+json",
        "application/vnd.engram.v1+json",
    ],
)
def test_json_content_types_and_none_are_accepted(content_type: str | None) -> None:
    assert parse_body(ev(GOOD, content_type), MemorySaveRequest).key == "k"
    assert is_json_media_type(content_type)


def test_content_type_header_name_is_case_insensitive() -> None:
    event = {"body": GOOD, "headers": {"Content-Type": "text/plain"}}
    assert mapped(event) == (415, "unsupported_media_type")


def test_an_empty_body_is_not_checked_for_its_content_type() -> None:
    from engram.api.models import SessionRequest

    event = ev(None, "text/plain")
    assert parse_body(event, SessionRequest, empty_as_object=True) == SessionRequest()


def test_too_large_wins_over_the_content_type() -> None:
    event = ev(json.dumps({"key": "k", "value": "v" * 5000}), "text/plain")
    with pytest.raises(Exception) as info:  # noqa: PT011 - any mapped error
        parse_body(event, MemorySaveRequest, max_bytes=1024)
    assert error_response(info.value).status == 413


@pytest.mark.parametrize(
    "text",
    [
        "[123456789012345678901234567890, -9223372036854775809, 18446744073709551615]",
        '{"a": 1, "a": 2, "b": [0.1, 1e16, -0.0, 5e-324, 1.7976931348623157e308]}',
        '["\\ud800", "\\u00e9", "\u00e9", "\\n"]',
        "\ufeff[1]",
        "[1e400]",
        '  {"n": 1234567890123456789.5}  ',
    ],
)
def test_the_decoder_reads_what_the_standard_library_reads(text: str) -> None:
    # the fast decoder reads a body only where it gives the standard decoder's value (integers
    # beyond 64 bits, lone surrogates, a byte-order mark, an overflowing number fall back)
    def outcome(decode: Any, data: str | bytes) -> str:
        try:
            return repr(decode(data))
        except (ValueError, InvalidJsonError):
            return "refused"

    for data in (text, text.encode("utf-8", errors="surrogatepass")):
        assert outcome(decode_json, data) == outcome(json.loads, data)
