"""Ports of the application services."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class MessageQueue(Protocol):
    """A queue that durably accepts message bodies (SQS in AWS, the stand-in locally)."""

    def send(self, bodies: Sequence[str]) -> int:
        """Send every body or raise ``engram.errors.Unavailable``; returns how many."""
        ...


class Limiter(Protocol):
    """Admits ``cost`` units for an identity or raises ``engram.errors.RateLimited`` (429);
    e.g. ``engram.ratelimit.RateLimiter``."""

    def check(self, identity_id: str, cost: int = 1) -> object: ...


@dataclass(frozen=True)
class KeyClaim:
    """Who holds an ``Idempotency-Key``: the first request's body digest and arrival time."""

    digest: str
    first_ms: int


class IdempotencyKeys(Protocol):
    """Remembers, per scope (caller, route, key), the first request that used a key.

    ``claim`` returns the live claim of ``scope`` — the one already held when it is younger
    than its ``ttl_ms``, else a new one of ``digest`` made at ``now_ms`` — in one atomic step
    (concurrent claims of one scope all get the same answer). Raise
    ``engram.errors.Unavailable`` when the backing store cannot answer.
    """

    def claim(self, scope: str, digest: str, *, now_ms: int, ttl_ms: int) -> KeyClaim: ...
