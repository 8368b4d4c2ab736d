"""Ports of the application services."""

from __future__ import annotations

from collections.abc import Sequence
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


class ErasureRecorder(Protocol):
    """The write side of ``engram.maintenance.ports.ErasureLog``."""

    def record(self, team_id: str, user_id: str, at_ms: int) -> None: ...
