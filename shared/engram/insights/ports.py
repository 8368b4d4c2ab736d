"""Ports of team insights: where contributions and aggregates are kept, where facts come from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engram.insights.models import Contribution, InsightsPage


class InsightsStore(Protocol):
    def contribute(
        self,
        team_id: str,
        user_id: str,
        rows: Sequence[Contribution],
        *,
        cycle: int,
        read_at_ms: int,
    ) -> bool:
        """Replace the user's contribution with ``rows``, stamped with the aggregation cycle,
        unless the user was erased at or after ``read_at_ms`` (when ``rows`` were read): then
        nothing is written and the answer is False. An erasure in flight is waited for."""
        ...

    def publish(self, *, cycle: int, min_users: int, now_ms: int) -> int:
        """End of a cycle: drop contributions not refreshed in it (users who left the index:
        erased, or swept as idle) and replace every team's published rows with the aggregates
        that at least ``min_users`` distinct users contribute to; how many rows."""
        ...

    def read(self, team_id: str, *, min_users: int) -> InsightsPage:
        """The team's published rows with at least ``min_users`` users (a team admin's read)."""
        ...


class FactSource(Protocol):
    """The behavioural facts the job aggregates, one identity at a time."""

    def identity_page(self, cursor: str, limit: int) -> tuple[list[str], str]:
        """One page of the identity index (keyset cursor, ``""`` to start and when done)."""
        ...

    def contributions(self, identity_id: str, now_ms: int) -> list[Contribution]: ...
