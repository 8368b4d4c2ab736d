"""What the sync and the async client share: configuration, headers, the request plan and the
reading of an answer, and the operations of ``engram_client._calls`` bound as methods."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypedDict, TypeVar, Unpack

from pydantic import ValidationError

from engram_client._calls import Call
from engram_client._emitter import AsyncEmitter, Emitter
from engram_client._errors import EngramResponseError, api_error
from engram_client._retry import Attempts, RetryPolicy, Sent

DEFAULT_ACT_AS_HEADER = "x-engram-user"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Requests whose repetition is harmless, so a lost answer is retried: the ingest routes store
# a retried request once by its Idempotency-Key; a session start consolidates each
# observation once. Other POSTs, PATCH and DELETE are retried only when the service surely
# did not act on them (429, 503, no connection).
_REPEATABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})
#: POSTs harmless twice: ingest (stored once by key), sessions, ranking (it only reads)
_REPEATABLE_POSTS = frozenset({"/v1/events", "/v1/observations", "/v1/sessions", "/v1/tools/rank"})
_NO_KEY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

P = ParamSpec("P")
T = TypeVar("T")
#: the header naming the surface a client is (the server's ``engram.api.identity``)
SURFACE_HEADER = "X-Engram-Surface"


@dataclass(frozen=True)
class Planned:
    """A request as it is sent, the same on every retry (``Idempotency-Key`` included)."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    params: dict[str, Any] | None
    repeatable: bool

    @property
    def what(self) -> str:
        return f"{self.method} {self.path}"


class ClientOptions(TypedDict, total=False):
    """Options of both clients (see ``ClientBase``)."""

    token_provider: Callable[[], str] | None
    act_as: str | None
    act_as_header: str
    retry: RetryPolicy | None
    queue_size: int
    surface: str | None


class RequestOptions(TypedDict, total=False):
    """Options of one request (see ``ClientBase._plan``)."""

    json: Any
    params: Mapping[str, Any] | None
    act_as: str | None
    idempotency_key: str | None
    repeatable: bool | None


class ClientBase:
    """Configuration and bookkeeping of a client.

    ``token`` (or ``token_provider``, called for every request) is the bearer token;
    ``act_as`` the user a service token acts for (sent in ``act_as_header``); ``retry`` the
    bounds of retries; ``queue_size`` the bound of the emit queue; ``surface`` what the
    versions of the memories it writes say it came through (``mcp``, ``console``; default
    ``api``), sent in ``X-Engram-Surface``.
    """

    def __init__(self, base_url: str, token: str | None, **options: Unpack[ClientOptions]) -> None:
        token_provider = options.get("token_provider")
        if token is None and token_provider is None:
            raise ValueError("give a token or a token_provider")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._token_provider = token_provider
        self.act_as = options.get("act_as")
        self.act_as_header = options.get("act_as_header", DEFAULT_ACT_AS_HEADER)
        self.retry = options.get("retry") or RetryPolicy()
        self.queue_size = options.get("queue_size", 1000)
        self.surface = options.get("surface")
        self._rng = random.Random()  # noqa: S311 - backoff jitter, not a secret
        self._reset_counters()

    def _reset_counters(self) -> None:
        #: retries made (by every call of this client, emits included)
        self.retries = 0
        self._retries_lock = threading.Lock()

    def _count_retry(self) -> None:
        with self._retries_lock:
            self.retries += 1

    def _headers(self, act_as: str | None = None) -> dict[str, str]:
        token = self._token_provider() if self._token_provider is not None else self._token
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        user = act_as or self.act_as
        if user:
            headers[self.act_as_header] = user
        if self.surface:
            headers[SURFACE_HEADER] = self.surface
        return headers

    def _plan(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Planned:
        """Every request but a read carries an ``Idempotency-Key`` (``idempotency_key``, else
        a fresh one), the same on its retries. ``repeatable`` says whether sending it twice is
        harmless (by default: reads, PUT, and the ingest and session POSTs)."""
        json, idempotency_key = options.get("json"), options.get("idempotency_key")
        params, repeatable = options.get("params"), options.get("repeatable")
        act_as = options.get("act_as")
        method = method.upper()
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        headers = self._headers(act_as)
        if json is not None:  # the service answers 415 to a body that is not declared JSON
            headers["Content-Type"] = "application/json"
        if method not in _NO_KEY_METHODS:
            headers[IDEMPOTENCY_HEADER] = idempotency_key or uuid.uuid4().hex
        if repeatable is None:
            repeatable = method in _REPEATABLE_METHODS or (
                method == "POST" and path in _REPEATABLE_POSTS
            )
        return Planned(method, path, headers, json, clean_params or None, repeatable)

    # --- fire-and-forget (the emitter is the sync or the async one) ----------------------
    _emitter: Emitter | AsyncEmitter  # each client narrows it to its own

    @property
    def dropped(self) -> int:
        """Events dropped because the emit queue was full."""
        return self._emitter.tally.dropped

    @property
    def failed_events(self) -> int:
        """Events the service refused, or that could not be delivered within the retries."""
        return self._emitter.tally.failed

    @property
    def gave_up_events(self) -> int:
        """Of ``failed_events``: given up on after retrying 429, 503 or connection errors."""
        return self._emitter.tally.gave_up

    @property
    def sent_events(self) -> int:
        """Emitted events the service accepted (202)."""
        return self._emitter.tally.sent

    def emit(self, *events: Mapping[str, Any]) -> int:
        """Queue events for ``POST /v1/events``; never blocks or raises. Returns how many
        were queued (the rest were dropped and counted in ``dropped``). The async client's
        ``emit`` is called on its event loop."""
        return self._emitter.emit(events)

    def emit_query(self, text: str) -> int:
        return self.emit({"kind": "query", "text": text})

    def emit_tool(
        self,
        tool_name: str,
        *,
        ok: bool,
        duration_ms: int,
        error: str | None = None,
        result: Any = None,
    ) -> int:
        """Queue the ``tool`` event of one tool call."""
        event: dict[str, Any] = {
            "kind": "tool",
            "toolName": tool_name,
            "ok": ok,
            "durationMs": int(duration_ms),
        }
        if error is not None:
            event["error"] = error
        if result is not None:
            event["result"] = result
        return self.emit(event)

    @staticmethod
    def _call_options(call: Call[Any], act_as: str | None) -> RequestOptions:
        return {
            "json": call.json,
            "params": call.params,
            "act_as": act_as,
            "idempotency_key": call.idempotency_key,
        }

    def _attempts(self, planned: Planned) -> Attempts:
        return Attempts(
            planned.what,
            self.retry,
            repeatable=planned.repeatable,
            rng=self._rng,
            on_retry=self._count_retry,
        )


def decode(sent: Sent) -> Any:
    """The decoded JSON body (``None`` for 204); raises ``EngramAPIError`` for an error."""
    response = sent.response
    if response.status_code >= 400:
        error = api_error(response)
        error.attempts, error.gave_up = sent.attempts, sent.gave_up
        raise error
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError as exc:
        raise EngramResponseError(f"{response.status_code}: the body is not JSON") from exc


def read(call: Call[T], body: Any) -> T:
    """The typed answer of ``call``; ``EngramResponseError`` when the body has another shape."""
    try:
        return call.read(body)
    except (ValidationError, KeyError, TypeError) as exc:
        raise EngramResponseError(f"{call.method} {call.path}: unexpected answer: {exc}") from exc


def send_kwargs(planned: Planned) -> dict[str, Any]:
    return {"json": planned.json, "params": planned.params, "headers": planned.headers}


def sync_operation(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[Any, P], T]:
    """``build`` as a method of the sync client: the call is made, its answer read."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self.call(build(*args, **kwargs))
        return result

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method


def async_operation(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """``build`` as a coroutine method of the async client."""

    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self.call(build(*args, **kwargs))
        return result

    method.__name__ = build.__name__
    method.__doc__ = build.__doc__
    return method
