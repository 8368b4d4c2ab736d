"""Who is calling. Built only from verified token claims (see ``engram.api.identity``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from engram import limits

#: One documented form of a team id (the team claim, or a service token's team scope): a
#: letter, then letters, digits, ``.``, ``_`` or ``-``, 1-128 characters in all. A claim API
#: Gateway flattened from a list (``"[acme]"``), an object or a number (``"123"``) does not match.
TEAM_ID_PATTERN = rf"^[A-Za-z][A-Za-z0-9._-]{{0,{limits.MAX_ID_CHARS - 1}}}$"
#: The namespace of a service token acting as itself: ``service:<sub>``. No user id can take
#: it (a user token's ``sub`` and an act-as user may not start with it), so a service's own
#: memories are never a user's.
SERVICE_USER_PREFIX = "service:"
MAX_CALLER_ID_CHARS = len(SERVICE_USER_PREFIX) + limits.MAX_ID_CHARS

_ESCAPES = {"%": "%25", ":": "%3A", "{": "%7B", "}": "%7D"}


def _escape(part: str) -> str:
    """Percent-encode only '%', ':', '{' and '}': ordinary ids stay as they are."""
    return "".join(_ESCAPES.get(ch, ch) for ch in part)


def parse_identity_id(identity_id: str) -> tuple[str, str] | None:
    """``(team, user)`` of an identity made by :func:`identity_id_for`; ``None`` for any other
    string (an escaped part holds no raw ':', so the first ':' separates them)."""
    team, sep, user = identity_id.partition(":")
    if not sep or not team or not user or ":" in user:
        return None
    for code, ch in (("%3A", ":"), ("%7B", "{"), ("%7D", "}")):
        team, user = team.replace(code, ch), user.replace(code, ch)
    return team.replace("%25", "%"), user.replace("%25", "%")


def identity_id_for(team_id: str, user_id: str) -> str:
    """The unambiguous behavioural identity of a user: ``<team>:<user>``, each part escaped.

    Team and user ids may contain ':' (and '{', '}' would change a Redis hash slot), so each
    part is percent-encoded for exactly those characters plus '%'. Team ``acme`` + user
    ``eu:bob`` and team ``acme:eu`` + user ``bob`` therefore never share an identity.
    """
    return f"{_escape(team_id)}:{_escape(user_id)}"


class Caller(BaseModel):
    """The verified identity a request acts as.

    ``user_id`` is the user the request acts for: the token's ``sub``; for a service token
    acting for a user of its own team, the user it names; for a service token acting as
    itself, ``service:<sub>``. ``team_id`` always comes from the token. ``is_admin`` (global
    admin group) and ``is_team_admin`` (team admin group) come from the groups claim.
    """

    model_config = ConfigDict(frozen=True)

    user_id: str = Field(min_length=1, max_length=MAX_CALLER_ID_CHARS)
    team_id: str = Field(min_length=1, max_length=limits.MAX_ID_CHARS)
    groups: frozenset[str] = frozenset()
    is_admin: bool = False
    is_team_admin: bool = False
    is_service: bool = False
    subject: str | None = Field(
        default=None, description="A service token's own sub (the caller is a service)."
    )
    surface: str = Field(
        default="api",
        description="Where the request came from: api, mcp, console or tool:<format>.",
    )

    @property
    def identity_id(self) -> str:
        """The key of this user's behavioural memory: users never meet across teams."""
        return identity_id_for(self.team_id, self.user_id)

    def can_administer_team(self, team_id: str) -> bool:
        return self.is_admin or (self.is_team_admin and self.team_id == team_id)
