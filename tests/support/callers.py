"""Callers as the authorizer makes them from a user's verified claims."""

from __future__ import annotations

from engram.identity import Caller


def team_caller(user: str, team: str = "acme", *, admin: bool = False) -> Caller:
    """A user of ``team`` (one of its administrators with ``admin``)."""
    return Caller(user_id=user, team_id=team, is_team_admin=admin)
