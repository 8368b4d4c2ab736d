"""Small helpers for handlers that read API Gateway v2 events without a resolver.

``parse_body(event, Model)`` applies the same rules everywhere: body size limit (413), a body
whose ``Content-Type`` is not JSON (415; none, ``application/json`` with any parameters and
``application/*+json`` are accepted), base64 bodies, JSON that cannot be decoded, nests deeper
than ``MAX_JSON_DEPTH`` or is not an object (400), model validation (422 naming the field).
``decode_json(text)`` is the one JSON decoder for request input (also for a tool call's
``arguments`` string). ``json_response(status, body)`` builds the v2 response with a camelCase
JSON body. ``etag(version)`` and ``if_match_versions(header)`` are a memory's entity tag and
the versions an ``If-Match`` header accepts.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from engram import limits
from engram.api.errors import BodyTooLargeError, InvalidJsonError, UnsupportedMediaTypeError
from engram.errors import InvalidHeader

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_BODY_BYTES = limits.MAX_BODY_BYTES
#: Deepest nesting of arrays and objects accepted in request JSON. The API's own shapes need
#: a handful of levels; free-form values (metadata, tool results) get plenty of room, and
#: nothing downstream (validation, json.dumps, Redis, PostgreSQL) recurses anywhere near
#: Python's limit.
MAX_JSON_DEPTH = limits.MAX_JSON_DEPTH

_JSON_MEDIA_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: every byte but the brackets and the quote, for ``bytes.translate`` to delete
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')


def _brackets(data: bytes) -> bytes:
    """The brackets of JSON text ``data`` that are structure (outside its strings), in order."""
    if b"\\" in data:  # drop escaped backslashes, then escaped quotes: every '"' left delimits
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = data.translate(None, _NOT_STRUCTURE)  # brackets, and strings as '"' + brackets + '"'
    # the common case, no string holds a bracket: every string is '""' (a quote left over
    # means some string held one, and the quotes are then paired by splitting)
    outside = marks.replace(b'""', b"")
    if b'"' in outside:
        outside = b"".join(marks.split(b'"')[::2])
    return outside


def _deeper_than(data: bytes, limit: int) -> bool:
    """Whether arrays/objects in JSON text ``data`` (already decoded once, so well-formed) nest
    more than ``limit`` levels: each pass removes the innermost (empty) ones, so text nested n
    levels deep is empty after exactly n passes. C-speed string operations, no recursion."""
    brackets = _brackets(data)
    for _ in range(limit):
        if not brackets:
            return False
        # the innermost (empty) pairs of both kinds, each marked first so that removing one
        # cannot join the brackets around it into a pair within the same pass
        brackets = brackets.replace(b"[]", b"\0").replace(b"{}", b"\0").replace(b"\0", b"")
    return bool(brackets)


_UNDECODED = object()
#: every digit as "0", every other byte as a space: 19 "0" in a row are 19 digits in a row, perhaps
#: an integer beyond 64 bits, which orjson reads as a float (a C-speed search, not a regex's)
_DIGITS_ONLY = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _fast_loads(data: bytes | str) -> Any:
    """``data`` decoded by orjson (a few times faster than ``json``), or ``_UNDECODED`` for
    what it may read otherwise or not at all: text holding 19 digits in a row, and whatever
    orjson refuses (``NaN``, a byte-order mark, UTF-16, lone surrogates, bad syntax), which the
    standard decoder then reads or refuses as before. Both give the same value for the rest."""
    raw = data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else data
    if _LONG_DIGITS in raw.translate(_DIGITS_ONLY):
        return _UNDECODED
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _UNDECODED


def decode_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Request JSON decoded strictly; ``InvalidJsonError`` for anything the decoder cannot
    turn into a value (bad syntax or UTF-8, ``NaN``/``Infinity``, integers over Python's
    4,300-digit conversion limit, nesting deep enough for a ``RecursionError``) and for arrays
    and objects nested deeper than ``max_depth``."""
    value = _fast_loads(data)
    if value is _UNDECODED:
        try:
            value = json.loads(data, parse_constant=_reject_constant)
        except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, int digits
            raise InvalidJsonError() from None
    if not isinstance(value, dict | list):
        return value
    if _openers(data) > max_depth and _deeper_than(_utf8(data), max_depth):
        raise InvalidJsonError(f"request JSON nests deeper than {max_depth} levels")
    return value


def _openers(data: bytes | str) -> int:
    """How many ``[`` and ``{`` the text holds, strings included: a bound on its depth (in
    UTF-16 or UTF-32 bytes it may count more, never fewer)."""
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def _utf8(data: bytes | str) -> bytes:
    """JSON text as UTF-8 bytes (the decoder also reads UTF-16 and UTF-32 bytes)."""
    if isinstance(data, str):
        return data.encode("utf-8", errors="surrogatepass")
    encoding = json.detect_encoding(data)
    if encoding in ("utf-8", "utf-8-sig"):
        return data
    return data.decode(encoding).encode("utf-8", errors="surrogatepass")


def is_json_media_type(content_type: str | None) -> bool:
    """No content type, ``application/json`` (any parameters) or ``application/<x>+json``."""
    if content_type is None or not content_type.strip():
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return _JSON_MEDIA_TYPE.fullmatch(media) is not None


def _content_type(event: Mapping[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if str(name).lower() == "content-type":
            return str(value)
    return None


def raw_body(event: Mapping[str, Any], *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> bytes:
    body = event.get("body")
    if body is None:
        return b""
    if event.get("isBase64Encoded"):
        try:
            data = base64.b64decode(str(body), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidJsonError("request body is not valid base64") from None
    else:
        data = str(body).encode("utf-8", errors="surrogatepass")
    if len(data) > max_bytes:
        raise BodyTooLargeError(max_bytes)
    return data


def parse_body(
    event: Mapping[str, Any],
    model: type[M],
    *,
    max_bytes: int = DEFAULT_MAX_BODY_BYTES,
    empty_as_object: bool = False,
) -> M:
    """The event's JSON body validated as ``model``; raises the errors ``engram.api.errors``
    maps (``BodyTooLargeError`` 413, ``UnsupportedMediaTypeError`` 415, ``InvalidJsonError``
    400, ``ValidationError`` 422)."""
    data = raw_body(event, max_bytes=max_bytes)
    if not data.strip():
        if not empty_as_object:
            raise InvalidJsonError("request body is required")
        data = b"{}"
    else:
        content_type = _content_type(event)
        if not is_json_media_type(content_type):
            raise UnsupportedMediaTypeError(str(content_type))
    decoded = decode_json(data)
    if not isinstance(decoded, dict):
        raise InvalidJsonError("request body must be a JSON object")
    # JSON names are camelCase only: ``persona_id`` in a body is an unknown field
    return model.model_validate(decoded, by_alias=True, by_name=False)


def json_response(
    status: int,
    body: BaseModel | Mapping[str, Any] | list[Any] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway v2 response; a model is dumped by alias (camelCase) in JSON mode."""
    out_headers = {"Content-Type": "application/json", **(headers or {})}
    if body is None:
        return {"statusCode": status, "headers": out_headers, "isBase64Encoded": False}
    payload = body.model_dump(mode="json", by_alias=True) if isinstance(body, BaseModel) else body
    return {
        "statusCode": status,
        "headers": out_headers,
        "body": json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
        "isBase64Encoded": False,
    }


# --- entity tags ----------------------------------------------------------------------------
#: An ``If-Match`` value: ``*``, or a list of entity-tags, each optionally weak (``W/``) and a
#: quoted opaque tag (its JSON Schema ``pattern`` too).
IF_MATCH_PATTERN = (
    r'^\s*(?:\*|(?:W/)?"[!#-~\u0080-\u00ff]*"(?:\s*,\s*(?:W/)?"[!#-~\u0080-\u00ff]*")*)\s*$'
)
_IF_MATCH = re.compile(IF_MATCH_PATTERN)
_ENTITY_TAG = re.compile(r'(W/)?"([^"]*)"')


def etag(version: int) -> str:
    """The strong ``ETag`` of a memory at ``version``: the number in quotes."""
    return f'"{version}"'


def if_match_versions(value: str | None) -> frozenset[int] | None:
    """The versions an ``If-Match`` header accepts: ``None`` when there is none or it is
    ``*`` (any current version); otherwise the versions of its strong tags. ``If-Match``
    compares strongly, so a weak tag or a tag that is not one of ours matches nothing (an
    empty set: the write fails with 412). ``InvalidHeader`` for a value that is not a list of
    entity-tags."""
    if value is None:
        return None
    if _IF_MATCH.fullmatch(value) is None:
        raise InvalidHeader("If-Match", 'must be "*" or a list of entity-tags such as "3"')
    if value.strip() == "*":
        return None
    return frozenset(
        int(tag)
        for weak, tag in _ENTITY_TAG.findall(value)
        if not weak and tag.isdecimal() and tag.isascii() and len(tag) <= 18
    )
