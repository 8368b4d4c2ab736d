"""The client's errors (``EngramAPIError`` for an error response, ``EngramTransportError``
when no response came)."""

from __future__ import annotations

from typing import Any

import httpx


class EngramError(Exception):
    """Base of the client's errors.

    ``attempts`` is how many times the request was sent; ``gave_up`` is True when the last
    failure was one the client retries (429, 503, a connection error) and it stopped because
    its ``RetryPolicy`` bounds (count or total time) were reached.
    """

    attempts: int = 1
    gave_up: bool = False


class EngramTransportError(EngramError):
    """The request did not get an HTTP response (connection refused, timeout...)."""


class EngramResponseError(EngramError):
    """A success status whose body is not what the operation answers (another service, or
    a proxy, answered)."""


class EngramAPIError(EngramError):
    """An error response: ``status`` and the body's ``error.code``/``message``/``details``."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def api_error(response: httpx.Response) -> EngramAPIError:
    code, message, details = "http_error", response.reason_phrase or "error", None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = str(err.get("code", code))
        message = str(err.get("message", message))
        details = err.get("details")
    elif isinstance(body, dict) and "message" in body:
        message = str(body["message"])
    return EngramAPIError(response.status_code, code, message, details)
