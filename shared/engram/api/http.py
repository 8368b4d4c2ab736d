"""Small helpers for handlers that read API Gateway v2 events without a resolver.

``parse_body(event, Model)`` applies the same rules everywhere: body size limit (413), base64
bodies, invalid JSON or a non-object body (400), model validation (422 naming the field).
``json_response(status, body)`` builds the v2 response with a camelCase JSON body.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from engram.api.errors import BodyTooLargeError, InvalidJsonError

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_BODY_BYTES = 256 * 1024


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
    maps (``BodyTooLargeError`` 413, ``InvalidJsonError`` 400, ``ValidationError`` 422)."""
    data = raw_body(event, max_bytes=max_bytes)
    if not data.strip():
        if not empty_as_object:
            raise InvalidJsonError("request body is required")
        data = b"{}"
    try:
        decoded = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidJsonError() from None
    if not isinstance(decoded, dict):
        raise InvalidJsonError("request body must be a JSON object")
    return model.model_validate(decoded)


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
