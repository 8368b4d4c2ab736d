"""The caller, from verified JWT claims only.

API Gateway's HTTP API JWT authorizer verifies the token and puts its claims under
``requestContext.authorizer.jwt.claims`` and the token's scopes under
``requestContext.authorizer.jwt.scopes``. Every claim value arrives as a *string*: an array
claim such as Cognito's ``cognito:groups`` as ``"[a b]"`` (the items, unquoted, separated by
single spaces), a number as its digits. The local server does the same
(``engram.local.gateway.flatten_claims``). Nothing else in the request — no body field, no
query parameter — ever decides who the caller is. The rules:

* **user**: ``sub``, an id under the name rule (``engram.fields``), at most 128 characters,
  not starting with ``service:`` (that namespace is the service's own). Otherwise 401.
* **team**: the ``Settings.team_claim`` claim, matching ``engram.identity.TEAM_ID_PATTERN``
  (a letter, then letters, digits, ``.``, ``_``, ``-``; 1-128 characters). So a list claim
  flattened to ``"[acme]"`` or a number flattened to ``"123"`` is no team: 401.
* **groups**: the ``Settings.groups_claim`` claim in the two shapes API Gateway produces: an
  array, ``"[a b]"`` (split on whitespace, items taken as they are — no JSON decoding, so a
  group *named* ``"engram-admins"`` with its quotes is not ``engram-admins``, and no comma
  splitting), or a plain string, which is one group. Any other value (a JSON list that did not
  pass through API Gateway) is 401. Admin / team-admin: membership of
  ``Settings.admin_group`` / ``Settings.team_admin_group``.
* A **service token** is one whose scopes (or ``scope`` claim, space-separated) contain
  ``Settings.service_scope``. It may act for a user of its own team by naming the user in the
  ``Settings.act_as_header`` header; the resulting caller is that user in the service's team
  (``is_service=True``, ``subject`` = the service's ``sub``); the service's own groups/roles
  are not inherited. **Without the header it acts as itself**, as the user
  ``service:<sub>``: a namespace no user id can take, so a service token whose ``sub`` equals
  a user's id never reads that user's data.
* **The act-as header** names one user: a value with a comma is 400 (API Gateway joins a
  repeated header's values with commas), as is one that breaks the user-id rule. A user token
  that names another user gets 403; naming itself is allowed.
* **The team of a service token** comes, in order, from (1) the team claim, which a Cognito
  pre-token-generation trigger (event version V3) adds to client-credentials tokens, or (2)
  exactly one scope of the form ``<resource-server>/team.<teamId>`` on the same resource
  server as ``Settings.service_scope`` (e.g. ``engram/team.acme``), which an app client is
  granted per team. With neither, or with several team scopes, the token is rejected (401).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from engram.errors import Forbidden, InvalidHeader, Unauthorized
from engram.fields import Identifier
from engram.identity import SERVICE_USER_PREFIX, TEAM_ID_PATTERN, Caller
from engram.settings import Settings, get_settings

_TEAM = re.compile(TEAM_ID_PATTERN)
_USER_ID: TypeAdapter[str] = TypeAdapter(Identifier)


def parse_list_claim(value: Any) -> list[str]:
    """A list claim as API Gateway passes it: ``"[a b]"`` (its items) or a plain string (one
    item). ``Unauthorized`` for anything that is not a string."""
    if value is None:
        return []
    if not isinstance(value, str):
        raise Unauthorized("claims must be strings, as API Gateway passes them")
    text = value.strip()
    if not text:
        return []
    if text.startswith("[") and text.endswith("]"):
        return text[1:-1].split()
    return [text]


def _scopes(jwt: Mapping[str, Any], claims: Mapping[str, Any]) -> list[str]:
    """``jwt.scopes`` (API Gateway's list), else the OAuth ``scope`` claim (space-separated)."""
    scopes = jwt.get("scopes")
    if isinstance(scopes, list | tuple):
        return [str(s) for s in scopes if str(s).strip()]
    scope = claims.get("scope")
    return scope.split() if isinstance(scope, str) else []


def _user_problem(value: Any, *, service: bool = False) -> str | None:
    """Why ``value`` is no user id (the id rule; the service namespace is reserved unless
    ``service``), or ``None`` when it is one."""
    if not isinstance(value, str) or not value.strip():
        return "is missing"
    try:
        user = _USER_ID.validate_python(value)
    except ValidationError as err:
        return str(err.errors()[0]["msg"])
    if not service and user.startswith(SERVICE_USER_PREFIX):
        return f"must not start with {SERVICE_USER_PREFIX!r} (the services' namespace)"
    return None


def _sub(claims: Mapping[str, Any], *, service: bool) -> str:
    sub = claims.get("sub")
    problem = _user_problem(sub, service=service)
    if problem is not None:
        raise Unauthorized(f"sub {problem}")
    return _USER_ID.validate_python(sub)


def _team_id(value: Any, what: str = "team") -> str:
    if not isinstance(value, str) or not value.strip():
        raise Unauthorized(f"{what} is missing")
    team = value.strip()
    if not _TEAM.fullmatch(team):
        raise Unauthorized(f"{what} is not a team id (a letter, then letters, digits, . _ -)")
    return team


def _jwt(event: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") if isinstance(context, Mapping) else None
    jwt = authorizer.get("jwt") if isinstance(authorizer, Mapping) else None
    if not isinstance(jwt, Mapping):
        raise Unauthorized("no verified token")
    claims = jwt.get("claims")
    if not isinstance(claims, Mapping) or not claims:
        raise Unauthorized("no verified token")
    return claims, _scopes(jwt, claims)


def event_header(event: Mapping[str, Any], name: str) -> str | None:
    """The value of header ``name`` of an API Gateway event, matched case-insensitively."""
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
    if team is not None:
        return _team_id(team)
    server, _, _ = settings.service_scope.rpartition("/")
    prefix = f"{server}/team." if server else "team."
    teams = [s[len(prefix) :] for s in scopes if s.startswith(prefix) and len(s) > len(prefix)]
    if len(teams) != 1:
        raise Unauthorized("service token names no single team")
    return _team_id(teams[0], "team scope")


def _act_as(value: str | None, header: str) -> str | None:
    """The user the act-as header names (``None`` when absent or blank); 400 otherwise."""
    if value is None or not value.strip():
        return None
    if "," in value:
        raise InvalidHeader(
            header, "names one user; a comma means several values (a repeated header)"
        )
    problem = _user_problem(value)
    if problem is not None:
        raise InvalidHeader(header, problem)
    return _USER_ID.validate_python(value)


def caller_from_claims(
    claims: Mapping[str, Any],
    scopes: list[str] | tuple[str, ...] = (),
    *,
    act_as: str | None = None,
    settings: Settings | None = None,
) -> Caller:
    """The caller for verified ``claims``; ``act_as`` is the act-as header's value, if any."""
    settings = settings or get_settings()
    scope_list = list(scopes) or _scopes({}, claims)
    is_service = settings.service_scope in scope_list
    subject = _sub(claims, service=is_service)
    acting = _act_as(act_as, settings.act_as_header)

    if is_service:
        team = _service_team(claims, scope_list, settings)
        user = acting if acting is not None else SERVICE_USER_PREFIX + subject
        return Caller(user_id=user, team_id=team, is_service=True, subject=subject)

    team = _team_id(claims.get(settings.team_claim))
    if acting is not None and acting != subject:
        raise Forbidden("a user token may not act for another user")
    groups = frozenset(parse_list_claim(claims.get(settings.groups_claim)))
    return Caller(
        user_id=subject,
        team_id=team,
        groups=groups,
        is_admin=settings.admin_group in groups,
        is_team_admin=settings.team_admin_group in groups,
    )


#: the header a client names the surface it is with (``api`` when absent)
SURFACE_HEADER = "X-Engram-Surface"
#: the surfaces a client may name; ``tool:<format>`` is the tool routes' own
CLIENT_SURFACES = ("api", "mcp", "console")


def _surface(value: str | None) -> str:
    if value is None or not value.strip():
        return "api"
    if value.strip() not in CLIENT_SURFACES:
        raise InvalidHeader(SURFACE_HEADER, f"is one of {', '.join(CLIENT_SURFACES)}")
    return value.strip()


def caller_from_event(event: Mapping[str, Any], settings: Settings | None = None) -> Caller:
    """The caller of an API Gateway HTTP API (payload v2) event. 401 / 403 / 400 as documented."""
    settings = settings or get_settings()
    claims, scopes = _jwt(event)
    caller = caller_from_claims(
        claims, scopes, act_as=event_header(event, settings.act_as_header), settings=settings
    )
    surface = _surface(event_header(event, SURFACE_HEADER))
    return caller if surface == "api" else caller.model_copy(update={"surface": surface})
