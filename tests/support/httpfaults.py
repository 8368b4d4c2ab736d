"""An httpx transport that forwards to a real server and injects HTTP faults on chosen requests.

``FaultyTransport(plan, path=...)`` sends every request over a real ``httpx.HTTPTransport``,
except that the n-th request to ``path`` follows ``plan[n]`` (requests past the plan, and to
other paths, pass):

- ``"pass"``: forward and return the server's answer;
- ``"lose-503"``: forward (the server acts on it), then answer 503 instead of its answer, as a
  gateway that lost the response would;
- ``"429"``: do not forward; answer 429 with ``Retry-After: <retry_after>``.

``seen`` records, for every request to ``path``: when it was sent (``time.monotonic()``), its
``Idempotency-Key``, and the status and JSON body the server gave (``None`` when not forwarded).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

# the content is re-sent as read (decoded, whole), so these no longer describe it
_DECODED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True)
class Seen:
    at: float
    key: str | None
    server_status: int | None
    server_body: Any


class FaultyTransport(httpx.BaseTransport):
    def __init__(self, plan: list[str], *, path: str, retry_after: int = 1) -> None:
        self.plan = list(plan)
        self.path = path
        self.retry_after = retry_after
        self.inner = httpx.HTTPTransport()
        self.seen: list[Seen] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != self.path:
            return self.inner.handle_request(request)
        at = time.monotonic()
        with self._lock:
            action = self.plan[len(self.seen)] if len(self.seen) < len(self.plan) else "pass"
        key = request.headers.get("idempotency-key")
        if action == "429":
            self._record(Seen(at, key, None, None))
            return _error(429, "rate_limited", {"Retry-After": str(self.retry_after)})
        response = self.inner.handle_request(request)
        content = response.read()
        self._record(Seen(at, key, response.status_code, json.loads(content or b"null")))
        if action == "lose-503":
            response.close()
            return _error(503, "unavailable", {})
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DECODED]
        return httpx.Response(response.status_code, headers=headers, content=content)

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def close(self) -> None:
        self.inner.close()


def _error(status: int, code: str, headers: dict[str, str]) -> httpx.Response:
    body = {"error": {"code": code, "message": "injected by the test"}}
    return httpx.Response(status, headers=headers, json=body)
