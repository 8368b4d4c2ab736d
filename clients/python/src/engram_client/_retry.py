"""When the Python client retries a request, and how long it waits.

- Always retried, because the service did not act on the request: 429 and 503 answers, and
  transport errors before the request reached the service (connection refused or timed out,
  no free connection in the pool).
- Retried only when repeating the request is harmless (``repeatable``), because the service
  may have acted on it: 502 and 504 (a gateway lost the answer) and transport errors after
  the request was sent (read or write errors and timeouts, a connection closed without an
  answer).
- Every other answer is final.

The retries of one call send the same request, ``Idempotency-Key`` included, so the service
stores a retried ingest request once.

Retry ``n`` (from 0) waits between half and all of ``min(max_backoff_s, backoff_s * 2**n)``
(exponential backoff with jitter). With a ``Retry-After`` header (seconds or an HTTP date) it
waits that long plus the jittered backoff, so never earlier than the service asked. A call
stops after ``max_retries`` retries, or rather than start a wait that would end more than
``max_elapsed_s`` after its first attempt, or when ``stop`` is set (the client is closing); the
last failure is then reported with ``gave_up=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from engram_client._errors import EngramTransportError

_log = logging.getLogger("engram_client")

RETRIED_STATUSES = frozenset({429, 503})
REPEATABLE_STATUSES = frozenset({502, 504})
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_MAYBE_SENT = (
    httpx.ReadError,
    httpx.ReadTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds of the client's retries (see the module docstring). ``RetryPolicy(max_retries=0)``
    sends every request once."""

    max_retries: int = 4
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    max_elapsed_s: float = 15.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or self.max_elapsed_s < 0:
            raise ValueError("backoff_s, max_backoff_s and max_elapsed_s must be 0 or more")

    def delay_s(self, retry: int, retry_after_s: float | None, rng: random.Random) -> float:
        """How long to wait before retry number ``retry`` (0 for the first retry)."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2.0**retry)
        jittered = ceiling * (0.5 + rng.random() / 2)
        return jittered if retry_after_s is None else retry_after_s + jittered


def retry_after_s(response: httpx.Response, now: float | None = None) -> float | None:
    """The ``Retry-After`` of ``response`` in seconds (delta-seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def is_retried(failure: httpx.Response | httpx.HTTPError, *, repeatable: bool) -> bool:
    if isinstance(failure, httpx.Response):
        status = failure.status_code
        return status in RETRIED_STATUSES or (repeatable and status in REPEATABLE_STATUSES)
    if isinstance(failure, _NOT_SENT):
        return True
    return repeatable and isinstance(failure, _MAYBE_SENT)


@dataclass(frozen=True)
class Sent:
    """The answer a call ends with: ``attempts`` sends; ``gave_up`` as in ``EngramError``."""

    response: httpx.Response
    attempts: int
    gave_up: bool


Failure = httpx.Response | httpx.HTTPError


class Attempts:
    """The retry decisions of one call, shared by the sync and the async loop: after each
    attempt, ``wait_s`` says how long to wait before the next one, or ``None`` when the
    answer is final; ``result`` turns the last answer into a ``Sent`` or raises."""

    def __init__(
        self,
        what: str,
        policy: RetryPolicy,
        *,
        repeatable: bool,
        rng: random.Random,
        on_retry: Callable[[], None] | None = None,
    ) -> None:
        self.what = what
        self.policy = policy
        self.repeatable = repeatable
        self.rng = rng
        self.on_retry = on_retry
        self.started = time.monotonic()
        self.attempts = 0
        self.gave_up = False

    def wait_s(self, failure: Failure) -> float | None:
        self.attempts += 1
        if not is_retried(failure, repeatable=self.repeatable):
            return None
        after = retry_after_s(failure) if isinstance(failure, httpx.Response) else None
        delay = self.policy.delay_s(self.attempts - 1, after, self.rng)
        in_budget = (
            self.attempts <= self.policy.max_retries
            and time.monotonic() - self.started + delay <= self.policy.max_elapsed_s
        )
        if not in_budget:
            self.gave_up = True
            return None
        _log.debug("%s got %s; retry %d in %.1fs", self.what, _name(failure), self.attempts, delay)
        return delay

    def retrying(self) -> None:
        """The wait is over and the next attempt starts."""
        if self.on_retry is not None:
            self.on_retry()

    def result(self, failure: Failure, *, stopped: bool = False) -> Sent:
        """The last answer (``stopped``: the client closed during the wait before a retry)."""
        gave_up = self.gave_up or stopped
        if isinstance(failure, httpx.Response):
            return Sent(failure, self.attempts, gave_up=gave_up)
        raise _transport_error(self.what, failure, self.attempts, gave_up=gave_up)


def send_with_retries(
    send: Callable[[], httpx.Response],
    attempts: Attempts,
    *,
    stop: threading.Event,
) -> Sent:
    """``send()`` until an answer is final or the policy's bounds are reached. Returns the
    last response; raises ``EngramTransportError`` when the last attempt got none."""
    while True:
        failure: Failure
        try:
            failure = send()
        except httpx.HTTPError as exc:
            failure = exc
        delay = attempts.wait_s(failure)
        if delay is None or stop.wait(delay):  # final, or stopped while waiting
            return attempts.result(failure, stopped=delay is not None)
        attempts.retrying()


async def asend_with_retries(
    send: Callable[[], Awaitable[httpx.Response]],
    attempts: Attempts,
    *,
    stop: asyncio.Event,
) -> Sent:
    """``send_with_retries`` for the async client (waits with the event loop's clock)."""
    while True:
        failure: Failure
        try:
            failure = await send()
        except httpx.HTTPError as exc:
            failure = exc
        delay = attempts.wait_s(failure)
        if delay is None or await _stopped_within(stop, delay):
            return attempts.result(failure, stopped=delay is not None)
        attempts.retrying()


async def _stopped_within(stop: asyncio.Event, delay: float) -> bool:
    """Wait ``delay`` seconds unless ``stop`` is set first; whether it was."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay)
    return stop.is_set()


def _name(failure: Failure) -> str:
    if isinstance(failure, httpx.Response):
        return str(failure.status_code)
    return type(failure).__name__


def _transport_error(
    what: str, exc: httpx.HTTPError, attempts: int, *, gave_up: bool
) -> EngramTransportError:
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    error = EngramTransportError(f"{what}: {exc}{tries}")
    error.attempts = attempts
    error.gave_up = gave_up
    error.__cause__ = exc
    return error
