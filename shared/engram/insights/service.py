"""``InsightsService``: the team admins' read of their own team's insights."""

from __future__ import annotations

from engram.errors import Forbidden
from engram.identity import Caller
from engram.insights.models import InsightsPage
from engram.insights.ports import InsightsStore


class InsightsService:
    def __init__(self, store: InsightsStore, *, min_users: int) -> None:
        self._store = store
        self._min_users = min_users

    def read(self, caller: Caller) -> InsightsPage:
        """The caller's team's insights; ``Forbidden`` unless they administer that team."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read their team's insights")
        return self._store.read(caller.team_id, min_users=self._min_users)
