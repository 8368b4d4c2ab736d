"""Who is calling. Built only from verified token claims (see ``engram.api.identity``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_ESCAPES = {"%": "%25", ":": "%3A", "{": "%7B", "}": "%7D"}


def _escape(part: str) -> str:
    """Percent-encode only '%', ':', '{' and '}': ordinary ids stay as they are."""
    return "".join(_ESCAPES.get(ch, ch) for ch in part)


def identity_id_for(team_id: str, user_id: str) -> str:
    """The unambiguous behavioural identity of a user: ``<team>:<user>``, each part escaped.

    Team and user ids may contain ':' (and '{', '}' would change a Redis hash slot), so each
    part is percent-encoded for exactly those characters plus '%'. Team ``acme`` + user
    ``eu:bob`` and team ``acme:eu`` + user ``bob`` therefore never share an identity.
    """
    return f"{_escape(team_id)}:{_escape(user_id)}"


class Caller(BaseModel):
    """The verified identity a request acts as.

    ``user_id`` is the user the request acts for: the token's ``sub``, or — for a service token
    acting for a user of its own team — the user it names. ``team_id`` always comes from the
    token. ``is_admin`` (global admin group) and ``is_team_admin`` (team admin group) come from
    the groups claim.
    """

    model_config = ConfigDict(frozen=True)

    user_id: str = Field(min_length=1, max_length=256)
    team_id: str = Field(min_length=1, max_length=256)
    groups: frozenset[str] = frozenset()
    is_admin: bool = False
    is_team_admin: bool = False
    is_service: bool = False
    subject: str | None = Field(
        default=None, description="The token's own sub when it differs from user_id (service)."
    )

    @property
    def identity_id(self) -> str:
        """The key of this user's behavioural memory: users never meet across teams."""
        return identity_id_for(self.team_id, self.user_id)

    def can_administer_team(self, team_id: str) -> bool:
        return self.is_admin or (self.is_team_admin and self.team_id == team_id)
