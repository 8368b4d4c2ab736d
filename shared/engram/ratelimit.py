"""Per-identity rate limits: a port (``RateLimitStore``) and the policy (``RateLimiter``).

A limit is ``limit`` units per ``window_s`` seconds per identity (ingest: one unit per
observation, ``Settings.observations_per_minute`` per 60 s). ``RateLimiter.check(identity_id,
cost=n)`` either admits all ``n`` units or none of them (a refused request consumes nothing)
and raises ``RateLimited`` with ``retry_after_s`` — the whole seconds after which the same
request would be admitted — which ``engram.api.errors`` answers as 429 with ``Retry-After``.

Two algorithms, each one atomic step in the store:

- ``sliding`` (default): a sliding-window log. Each admitted request is remembered with its
  time and cost until it is ``window_s`` old; a request is admitted when the units of the last
  ``window_s`` plus its cost fit in ``limit``. Exact: never more than ``limit`` units in any
  window of ``window_s``, whatever the timing; ``retry_after`` is the moment enough old units
  leave the window. The log holds at most ``limit`` entries per identity.
- ``fixed``: a counter per calendar window (``now // window``); one small key, but up to
  ``2 * limit`` units can pass around a window boundary.

A request whose ``cost`` exceeds ``limit`` can never pass; it is refused with
``retry_after_s = window_s`` (and the 429 says so) rather than looping clients forever.

Failure policy: when the store is unavailable (``Unavailable`` from the adapter) the limiter
fails open by default — a limiter outage must not stop ingest, which does not otherwise need
Redis — and reports ``Decision.degraded``; ``fail_open=False`` makes it raise instead.

The domain imports no Redis: adapters implement ``RateLimitStore``
(``engram.adapters.redis_ratelimit.RedisRateLimitStore``,
``engram.adapters.redis_ratelimit.InMemoryRateLimitStore``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from engram.clock import Clock, SystemClock
from engram.errors import InvalidInput, RateLimited, Unavailable

_log = logging.getLogger("engram.ratelimit")

Algorithm = Literal["sliding", "fixed"]
ALGORITHMS: tuple[Algorithm, ...] = ("sliding", "fixed")


@dataclass(frozen=True)
class Decision:
    """The outcome of one check."""

    allowed: bool
    """Whether every unit of the request was admitted (and consumed)."""
    limit: int
    """Units per window."""
    remaining: int
    """Units that could still be admitted right now (after this request when allowed)."""
    retry_after_ms: int
    """0 when allowed; otherwise how long until the same request would be admitted."""
    degraded: bool = False
    """The store could not be asked; the request was admitted by the fail-open policy."""

    @property
    def retry_after_s(self) -> int:
        """``retry_after_ms`` rounded up to whole seconds (``Retry-After`` header), 0 if allowed."""
        return 0 if self.allowed else max(1, math.ceil(self.retry_after_ms / 1000))


@dataclass(frozen=True)
class Hit:
    """One request on a counter: ``cost`` units against ``limit`` per ``window_ms``, at the
    caller's ``now_ms``, by ``algorithm``."""

    cost: int
    limit: int
    window_ms: int
    now_ms: int
    algorithm: Algorithm


class RateLimitStore(Protocol):
    """One atomic admit-or-refuse step on the counter of ``key``.

    Implementations must admit all of ``cost`` or nothing, and must be atomic across
    processes (a Lua script in Redis; a lock in memory). ``Hit.now_ms`` is the caller's
    clock; stores may keep keys alive no longer than about one window past the last admitted
    unit. Raise ``engram.errors.Unavailable`` when the backing service cannot answer.
    """

    def hit(self, key: str, request: Hit) -> Decision: ...

    def reset(self, key: str, *, window_ms: int, now_ms: int) -> None:
        """Forget the counter of ``key`` (tests, erasure): the sliding log, and the fixed
        windows of ``now_ms`` and the one before (older ones have expired)."""
        ...


def _positive(field: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(field, "must be a positive integer")
    return value


class RateLimiter:
    """``limit`` units per ``window_s`` per identity, on ``store``."""

    def __init__(
        self,
        store: RateLimitStore,
        *,
        limit: int,
        window_s: int = 60,
        name: str = "observations",
        algorithm: Algorithm = "sliding",
        clock: Clock | None = None,
        fail_open: bool = True,
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise InvalidInput("algorithm", f"must be one of {', '.join(ALGORITHMS)}")
        if not name or not name.replace("_", "").isalnum():
            raise InvalidInput("name", "must be a short alphanumeric name")
        self.store = store
        self.limit = _positive("limit", limit)
        self.window_s = _positive("window_s", window_s)
        self.name = name
        self.algorithm: Algorithm = algorithm
        self.clock = clock or SystemClock()
        self.fail_open = fail_open

    @property
    def window_ms(self) -> int:
        return self.window_s * 1000

    def key(self, identity_id: str) -> str:
        """The store key of ``identity_id`` for this limit (adapters add prefix and hash tag)."""
        return f"{self.name}:{identity_id}"

    def decide(self, identity_id: str, cost: int = 1) -> Decision:
        """Admit (and consume) ``cost`` units, or refuse them all; never raises ``RateLimited``."""
        if not identity_id:
            raise InvalidInput("identity_id", "must not be empty")
        cost = _positive("cost", cost)
        if cost > self.limit:
            return Decision(
                allowed=False, limit=self.limit, remaining=0, retry_after_ms=self.window_ms
            )
        try:
            request = Hit(cost, self.limit, self.window_ms, self.clock.now_ms(), self.algorithm)
            return self.store.hit(self.key(identity_id), request)
        except Unavailable:
            if not self.fail_open:
                raise
            _log.warning("rate limit store unavailable; admitting (fail open)", exc_info=True)
            return Decision(
                allowed=True, limit=self.limit, remaining=0, retry_after_ms=0, degraded=True
            )

    def check(self, identity_id: str, cost: int = 1) -> Decision:
        """``decide`` that raises ``RateLimited`` (429 + ``Retry-After``) when refused."""
        decision = self.decide(identity_id, cost)
        if not decision.allowed:
            if cost > self.limit:
                message = (
                    f"{cost} {self.name} in one request is more than the limit of "
                    f"{self.limit} per {self.window_s} s"
                )
            else:
                message = f"more than {self.limit} {self.name} per {self.window_s} s"
            raise RateLimited(
                message,
                retry_after_s=decision.retry_after_s,
                details={
                    "limit": self.limit,
                    "windowSeconds": self.window_s,
                    "cost": cost,
                    "retryAfterSeconds": decision.retry_after_s,
                },
            )
        return decision

    def reset(self, identity_id: str) -> None:
        self.store.reset(
            self.key(identity_id), window_ms=self.window_ms, now_ms=self.clock.now_ms()
        )


def sliding_window(entries: Sequence[tuple[int, int]], request: Hit) -> Decision:
    """The sliding-log step as a pure function over the live ``(time_ms, cost)`` entries
    (oldest first; those with ``time_ms <= now_ms - window_ms`` already dropped). The caller
    appends ``(now_ms, cost)`` when the decision is ``allowed``. The Redis script implements
    the same rule."""
    cost, limit, window_ms, now_ms = request.cost, request.limit, request.window_ms, request.now_ms
    used = sum(c for _, c in entries)
    if used + cost <= limit:
        return Decision(allowed=True, limit=limit, remaining=limit - used - cost, retry_after_ms=0)
    need = used + cost - limit
    freed = 0
    retry = window_ms
    for at, c in entries:
        freed += c
        if freed >= need:
            retry = at + window_ms - now_ms
            break
    return Decision(
        allowed=False, limit=limit, remaining=max(0, limit - used), retry_after_ms=max(1, retry)
    )


def fixed_window(used: int, request: Hit) -> tuple[Decision, int]:
    """The fixed-window step as a pure function: ``(decision, new_used)`` for the window that
    contains ``now_ms`` (``used`` units already admitted in it)."""
    cost, limit, window_ms, now_ms = request.cost, request.limit, request.window_ms, request.now_ms
    window_end = (now_ms // window_ms + 1) * window_ms
    if used + cost > limit:
        return (
            Decision(
                allowed=False,
                limit=limit,
                remaining=max(0, limit - used),
                retry_after_ms=window_end - now_ms,
            ),
            used,
        )
    return Decision(allowed=True, limit=limit, remaining=limit - used - cost, retry_after_ms=0), (
        used + cost
    )
