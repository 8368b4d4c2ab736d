"""The caller, from verified JWT claims only (SPEC §4).

API Gateway's JWT authorizer verifies the token and puts its claims under
``requestContext.authorizer.jwt.claims`` (every value flattened to a string: a list claim
such as Cognito's ``cognito:groups`` arrives as ``"[a b]"``) and the token's scopes under
``requestContext.authorizer.jwt.scopes``. The local server does the same. Nothing else in
the request — no body field, no query parameter — ever decides who the caller is.

* user: ``sub``; team: the ``Settings.team_claim`` claim; groups: ``Settings.groups_claim``
  (a JSON list, ``"[a b]"``, ``"a,b"`` or ``"a b"``); admin / team-admin: membership of
  ``Settings.admin_group`` / ``Settings.team_admin_group``.
* A *service token* is one whose scopes (or ``scope`` claim) contain ``Settings.service_scope``.
  It may act for a user of its own team by naming the user in the ``Settings.act_as_header``
  header; the resulting caller is that user in the service's team (``is_service=True``,
  ``subject`` = the service's ``sub``); the service's own groups/roles are not inherited.
  Without the header a service token acts as itself.
* **The team of a service token** comes, in order, from (1) the team claim, which a Cognito
  pre-token-generation trigger (event version V3) adds to client-credentials tokens, or (2)
  exactly one scope of the form ``<resource-server>/team.<teamId>`` on the same resource
  server as ``Settings.service_scope`` (e.g. ``engram/team.acme``), which an app client is
  granted per team. With neither, or with several team scopes, the token is rejected (401).
* A user token that names another user in the header gets 403; naming itself is allowed.
* Missing ``sub`` or team -> 401.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engram.errors import Forbidden, Unauthorized
from engram.identity import Caller
from engram.settings import Settings, get_settings

MAX_ID_CHARS = 256


def parse_list_claim(value: Any) -> list[str]:
    """A list claim in any shape API Gateway or a token may give it."""
    if value is None:
        return []
    if isinstance(value, list | tuple | set | frozenset):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value).strip()
    if not text:
        return []
    if text.startswith("[") and text.endswith("]"):
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, list):
            return [str(v).strip() for v in decoded if str(v).strip()]
        # API Gateway's "[a b]" rendering separates items by spaces only: a comma belongs to
        # the item ("x,engram-admins" is one group, never two)
        return text[1:-1].split()
    return [part for part in text.replace(",", " ").split() if part]


def _clean_id(value: Any, what: str, exc: type[Exception]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise exc(f"{what} is missing")
    text = value.strip()
    if len(text) > MAX_ID_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise exc(f"{what} is not a valid identifier")
    return text


def _jwt(event: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") if isinstance(context, Mapping) else None
    jwt = authorizer.get("jwt") if isinstance(authorizer, Mapping) else None
    if not isinstance(jwt, Mapping):
        raise Unauthorized("no verified token")
    claims = jwt.get("claims")
    if not isinstance(claims, Mapping) or not claims:
        raise Unauthorized("no verified token")
    scopes = parse_list_claim(jwt.get("scopes"))
    if not scopes:
        scopes = parse_list_claim(claims.get("scope"))
    return claims, scopes


def _header(event: Mapping[str, Any], name: str) -> str | None:
    headers = event.get("headers") or {}
    if not isinstance(headers, Mapping):
        return None
    wanted = name.lower()
    for key, value in headers.items():
        if str(key).lower() == wanted:
            return str(value)
    return None


def _service_team(claims: Mapping[str, Any], scopes: list[str], settings: Settings) -> str:
    team = claims.get(settings.team_claim)
    if isinstance(team, str) and team.strip():
        return _clean_id(team, "team", Unauthorized)
    server, _, _ = settings.service_scope.rpartition("/")
    prefix = f"{server}/team." if server else "team."
    teams = [s[len(prefix) :] for s in scopes if s.startswith(prefix) and len(s) > len(prefix)]
    if len(teams) != 1:
        raise Unauthorized("service token names no single team")
    return _clean_id(teams[0], "team", Unauthorized)


def caller_from_claims(
    claims: Mapping[str, Any],
    scopes: list[str] | tuple[str, ...] = (),
    *,
    act_as: str | None = None,
    settings: Settings | None = None,
) -> Caller:
    """The caller for verified ``claims``; ``act_as`` is the act-as header's value, if any."""
    settings = settings or get_settings()
    subject = _clean_id(claims.get("sub"), "sub", Unauthorized)
    scope_list = list(scopes) or parse_list_claim(claims.get("scope"))
    is_service = settings.service_scope in scope_list
    act_as = act_as.strip() if act_as is not None else None

    if is_service:
        team = _service_team(claims, scope_list, settings)
        if act_as:
            user = _clean_id(act_as, settings.act_as_header, Forbidden)
            return Caller(user_id=user, team_id=team, is_service=True, subject=subject)
        return Caller(user_id=subject, team_id=team, is_service=True)

    team = _clean_id(claims.get(settings.team_claim), "team", Unauthorized)
    if act_as and act_as != subject:
        raise Forbidden("a user token may not act for another user")
    groups = frozenset(parse_list_claim(claims.get(settings.groups_claim)))
    return Caller(
        user_id=subject,
        team_id=team,
        groups=groups,
        is_admin=settings.admin_group in groups,
        is_team_admin=settings.team_admin_group in groups,
    )


def caller_from_event(event: Mapping[str, Any], settings: Settings | None = None) -> Caller:
    """The caller of an API Gateway HTTP API (payload v2) event. 401 / 403 as documented."""
    settings = settings or get_settings()
    claims, scopes = _jwt(event)
    return caller_from_claims(
        claims, scopes, act_as=_header(event, settings.act_as_header), settings=settings
    )
