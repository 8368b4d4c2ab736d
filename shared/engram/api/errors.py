"""The one place where errors become HTTP responses: a status and the body
``{"error": {"code", "message", "details"?}}``.

=====================================  ======  ===================  ===========================
raised                                 status  ``error.code``       notes
=====================================  ======  ===================  ===========================
malformed JSON / body not an object /  400     ``invalid_json``
JSON nested too deep or undecodable
``InvalidHeader``                      400     ``invalid_header``   ``details``: the header
pydantic ``ValidationError``,          422     ``invalid_input``    ``details``: one entry per
Powertools ``RequestValidationError``                               problem ``{field, message,
``InvalidInput``                                                    type}``; ``field`` is the
                                                                    pydantic ``loc`` joined
                                                                    with ``.``
``IdempotencyKeyReused``               422     ``idempotency_key_   ``field``: ``Idempotency-Key``
                                               reused``
``Unauthorized``                       401     ``unauthorized``
``Forbidden`` / ``MemoryDisabled``     403     ``forbidden`` / ``memory_disabled``
``NotFound`` (+ unknown route)         404     ``not_found``
``Conflict``                           409     ``conflict``
``PreconditionFailed``                 412     ``precondition_  an ``If-Match`` that no
                                               failed``             longer matches
``BodyTooLargeError``                  413     ``body_too_large``
``UnsupportedMediaTypeError``          415     ``unsupported_media_type``
``RateLimited`` / ``QuotaExceeded``    429     ``rate_limited`` /   ``Retry-After`` header;
                                               ``quota_exceeded``   a quota's ``details``:
                                                                    ``{quota, limit, setting}``
``Unavailable``                        503     ``unavailable``      ``Retry-After: 1``
anything else                          500     ``internal``         nothing of it is leaked
=====================================  ======  ===================  ===========================

``error_response(exc)`` is the pure mapping; ``to_lambda_response(exc)`` gives an API Gateway
v2 response dict; ``engram.adapters.apigateway.register_error_handlers(app)`` wires the same
mapping into a Powertools resolver with one call. This module imports no Powertools.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from engram import errors as domain

_log = logging.getLogger("engram.api")

JSON_CONTENT_TYPE = "application/json"

#: Every ``error.code`` the service answers with (the OpenAPI error schema's enum): the codes
#: of this module's mapping, of ``engram.errors``, and of the local server's protocol errors.
ErrorCode = Literal[
    "bad_request",
    "invalid_json",
    "invalid_header",
    "invalid_input",
    "idempotency_key_reused",
    "unauthorized",
    "forbidden",
    "memory_disabled",
    "not_found",
    "method_not_allowed",
    "request_timeout",
    "conflict",
    "length_required",
    "precondition_failed",
    "body_too_large",
    "uri_too_long",
    "unsupported_media_type",
    "expectation_failed",
    "headers_too_large",
    "rate_limited",
    "quota_exceeded",
    "internal",
    "unavailable",
    "http_version_not_supported",
]
_LOCATION_PREFIXES = frozenset({"body", "query", "path", "header", "cookie"})


class BodyTooLargeError(Exception):
    """The request body is over the configured limit (``Settings.max_body_bytes``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body is larger than {limit} bytes")
        self.limit = limit


class UnsupportedMediaTypeError(Exception):
    """The request has a body whose ``Content-Type`` is not JSON."""

    def __init__(self, content_type: str) -> None:
        super().__init__(f"Content-Type {content_type!r} is not accepted: send application/json")
        self.content_type = content_type


class InvalidJsonError(Exception):
    """The body is not JSON, or not the JSON object the route expects."""

    def __init__(self, message: str = "request body is not valid JSON") -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class HttpError:
    status: int
    code: str
    message: str
    details: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def body_json(self) -> str:
        return json.dumps(self.body(), ensure_ascii=False, separators=(",", ":"))


def field_name(loc: Sequence[Any]) -> str:
    """``("body", "observations", 0, "type")`` -> ``"observations.0.type"``; empty -> body."""
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in _LOCATION_PREFIXES:
        parts = parts[1:]
    name = ".".join(p for p in parts if p != "")
    return name or "body"


def validation_details(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Pydantic error dicts to ``[{field, message, type}]`` (inputs are never echoed)."""
    details: list[dict[str, str]] = []
    for err in errors:
        loc = err.get("loc", ())
        loc = tuple(loc) if isinstance(loc, Sequence) else (loc,)
        key = (err.get("ctx") or {}).get("key")
        if key is not None and loc and loc[-1] == "metadata":  # per-type metadata rules
            loc = (*loc, key)
        details.append(
            {
                "field": field_name(loc),
                "message": str(err.get("msg", "invalid value")),
                "type": str(err.get("type", "value_error")),
            }
        )
    return details


def _from_validation_errors(errors: Sequence[Mapping[str, Any]]) -> HttpError:
    if any(e.get("type") == "json_invalid" for e in errors):
        return HttpError(400, "invalid_json", "request body is not valid JSON")
    details = validation_details(errors)
    if not details:
        return HttpError(422, "invalid_input", "invalid request")
    first = details[0]
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return HttpError(
        422, "invalid_input", f"{first['field']}: {first['message']}{more}", details=details
    )


def error_response(exc: BaseException) -> HttpError:
    """Map any exception to the HTTP error the client sees."""
    if isinstance(exc, domain.InvalidInput | domain.InvalidHeader):
        return HttpError(
            400 if isinstance(exc, domain.InvalidHeader) else 422,
            exc.code,
            exc.message,
            details=[{"field": exc.field, "message": exc.message, "type": exc.code}],
        )
    if isinstance(exc, domain.Unauthorized):
        return HttpError(401, exc.code, exc.message, headers={"WWW-Authenticate": "Bearer"})
    if isinstance(exc, domain.Forbidden):  # includes MemoryDisabled
        return HttpError(403, exc.code, exc.message)
    if isinstance(exc, domain.NotFound):
        return HttpError(404, exc.code, exc.message)
    if isinstance(exc, domain.Conflict):
        return HttpError(409, exc.code, exc.message)
    if isinstance(exc, domain.PreconditionFailed):
        return HttpError(412, exc.code, exc.message)
    if isinstance(exc, domain.RateLimited):  # includes QuotaExceeded
        retry = max(1, int(exc.retry_after_s))
        return HttpError(
            429, exc.code, exc.message, exc.details, headers={"Retry-After": str(retry)}
        )
    if isinstance(exc, domain.Unavailable):
        return HttpError(503, exc.code, exc.message, headers={"Retry-After": "1"})
    if isinstance(exc, ValidationError):
        return _from_validation_errors(exc.errors(include_input=False, include_url=False))
    if isinstance(exc, InvalidJsonError):
        return HttpError(400, "invalid_json", exc.message)
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return HttpError(400, "invalid_json", "request body is not valid JSON")
    if isinstance(exc, BodyTooLargeError):
        return HttpError(413, "body_too_large", str(exc))
    if isinstance(exc, UnsupportedMediaTypeError):
        return HttpError(415, "unsupported_media_type", str(exc))
    powertools = _powertools_error(exc)
    if powertools is not None:
        return powertools
    if isinstance(exc, domain.EngramError):
        _log.error("unmapped domain error %s", type(exc).__name__, exc_info=exc)
    return HttpError(500, "internal", "internal error")


def _powertools_error(exc: BaseException) -> HttpError | None:
    """Powertools' own validation / routing errors, recognised without importing it eagerly."""
    module = type(exc).__module__
    if not module.startswith("aws_lambda_powertools"):
        return None
    name = type(exc).__name__
    if name in {"RequestValidationError", "RequestUnsupportedContentType"}:
        errors = getattr(exc, "errors", None)
        errs: Sequence[Mapping[str, Any]] = errors() if callable(errors) else []
        if name == "RequestUnsupportedContentType":
            return HttpError(415, "unsupported_media_type", "Content-Type must be application/json")
        return _from_validation_errors(errs)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500:
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(
            status, "bad_request"
        )
        message = "not found" if status == 404 else str(getattr(exc, "msg", "") or code)
        return HttpError(status, code, message)
    return None


def log_unexpected(exc: BaseException) -> None:
    _log.exception("unhandled error", exc_info=exc)


def to_lambda_response(exc: BaseException) -> dict[str, Any]:
    """An API Gateway HTTP API (payload v2) response for ``exc``."""
    err = error_response(exc)
    if err.status >= 500:
        log_unexpected(exc)
    return {
        "statusCode": err.status,
        "headers": {"Content-Type": JSON_CONTENT_TYPE, **err.headers},
        "body": err.body_json(),
        "isBase64Encoded": False,
    }
