"""The caller comes from verified claims only, in every shape API Gateway passes them."""

from __future__ import annotations

from typing import Any

import pytest

from engram.api.errors import error_response
from engram.api.identity import caller_from_event, parse_list_claim
from engram.errors import Forbidden, InvalidHeader, Unauthorized
from engram.settings import Settings

SETTINGS = Settings()


def event(
    claims: dict[str, Any] | None,
    *,
    scopes: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    context: dict[str, Any] = {"requestId": "r", "http": {"method": "GET", "path": "/"}}
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": scopes}}
    return {"version": "2.0", "headers": headers or {}, "requestContext": context}


def user_claims(**extra: Any) -> dict[str, Any]:
    return {"sub": "alice", "custom:team": "acme", **extra}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # an array claim, as API Gateway's JWT authorizer renders it: items, unquoted, spaces
        ("[engram-admins readers]", ["engram-admins", "readers"]),
        ("[solo]", ["solo"]),
        ("[]", []),
        ("[x,engram-admins readers]", ["x,engram-admins", "readers"]),
        # no JSON decoding: quotes belong to the group's name
        ('["engram-admins","readers"]', ['"engram-admins","readers"']),
        ('["engram-admins"]', ['"engram-admins"']),
        # a string claim is one group: no comma or space splitting
        ("engram-admins,readers", ["engram-admins,readers"]),
        ("engram-admins readers", ["engram-admins readers"]),
        ("", []),
        (None, []),
    ],
)
def test_group_claim_shapes(raw: Any, expected: list[str]) -> None:
    assert parse_list_claim(raw) == expected


@pytest.mark.parametrize("raw", [["engram-admins"], 7, {"g": 1}])
def test_a_claim_that_is_not_a_string_is_not_from_api_gateway(raw: Any) -> None:
    with pytest.raises(Unauthorized):
        parse_list_claim(raw)
    with pytest.raises(Unauthorized):
        caller_from_event(event(user_claims(**{"cognito:groups": raw})), SETTINGS)


def test_plain_user() -> None:
    caller = caller_from_event(event(user_claims()), SETTINGS)
    assert (caller.user_id, caller.team_id) == ("alice", "acme")
    assert not (caller.is_admin)
    assert not (caller.is_team_admin)
    assert not (caller.is_service)
    assert caller.identity_id == "acme:alice"


@pytest.mark.parametrize("groups", ["[engram-admins other]", "[engram-admins]", "engram-admins"])
def test_admin_from_groups_in_the_shapes_api_gateway_produces(groups: str) -> None:
    caller = caller_from_event(event(user_claims(**{"cognito:groups": groups})), SETTINGS)
    assert caller.is_admin
    assert not caller.is_team_admin


@pytest.mark.parametrize(
    "groups", ['["engram-admins"]', '"engram-admins"', '["engram-admins" x]', "engram-admins x"]
)
def test_a_group_named_with_quotes_or_spaces_is_not_the_admin_group(groups: str) -> None:
    caller = caller_from_event(event(user_claims(**{"cognito:groups": groups})), SETTINGS)
    assert not caller.is_admin


def test_a_comma_inside_a_bracketed_group_name_does_not_grant_admin() -> None:
    claims = user_claims(**{"cognito:groups": "[x,engram-admins x,engram-team-admins]"})
    caller = caller_from_event(event(claims), SETTINGS)
    assert not caller.is_admin
    assert not caller.is_team_admin
    assert "x,engram-admins" in caller.groups


def test_team_admin() -> None:
    claims = user_claims(**{"cognito:groups": "[engram-team-admins]"})
    caller = caller_from_event(event(claims), SETTINGS)
    assert caller.is_team_admin
    assert not caller.is_admin
    assert caller.can_administer_team("acme")
    assert not caller.can_administer_team("globex")


def test_configured_claim_names_are_used() -> None:
    settings = Settings(team_claim="org", groups_claim="roles", admin_group="root")
    claims = {"sub": "bob", "org": "globex", "roles": "[root]", "custom:team": "acme"}
    caller = caller_from_event(event(claims), settings)
    assert (caller.team_id, caller.is_admin) == ("globex", True)


@pytest.mark.parametrize(
    "claims",
    [
        None,
        {},
        {"custom:team": "acme"},
        {"sub": "alice"},
        {"sub": "", "custom:team": "acme"},
        {"sub": "alice", "custom:team": "  "},
        {"sub": "a\nb", "custom:team": "acme"},
    ],
)
def test_missing_claims_are_unauthorized(claims: dict[str, Any] | None) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event(claims), SETTINGS)


def test_no_authorizer_at_all_is_unauthorized() -> None:
    with pytest.raises(Unauthorized):
        caller_from_event({"headers": {}}, SETTINGS)


def test_user_token_naming_another_user_is_forbidden() -> None:
    with pytest.raises(Forbidden):
        caller_from_event(event(user_claims(), headers={"x-engram-user": "bob"}), SETTINGS)


def test_user_token_naming_itself_is_fine() -> None:
    caller = caller_from_event(event(user_claims(), headers={"X-Engram-User": "alice"}), SETTINGS)
    assert caller.user_id == "alice"


def test_service_token_acts_for_user_of_its_team() -> None:
    claims = {"sub": "chat-backend", "custom:team": "acme", "scope": "engram/service"}
    caller = caller_from_event(
        event(claims, scopes=["engram/service"], headers={"x-engram-user": "bob"}), SETTINGS
    )
    assert (caller.user_id, caller.team_id, caller.is_service) == ("bob", "acme", True)
    assert caller.subject == "chat-backend"
    assert caller.identity_id == "acme:bob"


def test_service_scope_from_scope_claim_when_scopes_absent() -> None:
    claims = {"sub": "svc", "custom:team": "acme", "scope": "engram/other engram/service"}
    caller = caller_from_event(event(claims, headers={"x-engram-user": "bob"}), SETTINGS)
    assert caller.is_service
    assert caller.user_id == "bob"


def test_service_team_from_team_scope() -> None:
    claims = {"sub": "svc", "scope": "engram/service engram/team.globex"}
    caller = caller_from_event(event(claims, headers={"x-engram-user": "carol"}), SETTINGS)
    assert (caller.user_id, caller.team_id) == ("carol", "globex")


@pytest.mark.parametrize("scope", ["engram/service", "engram/service engram/team.a engram/team.b"])
def test_service_token_without_single_team_is_unauthorized(scope: str) -> None:
    claims = {"sub": "svc", "scope": scope}
    with pytest.raises(Unauthorized):
        caller_from_event(event(claims, headers={"x-engram-user": "bob"}), SETTINGS)


def test_service_does_not_inherit_admin_groups_when_acting() -> None:
    claims = {"sub": "svc", "custom:team": "acme", "cognito:groups": "[engram-admins]"}
    caller = caller_from_event(
        event(claims, scopes=["engram/service"], headers={"x-engram-user": "bob"}), SETTINGS
    )
    assert not caller.is_admin


def test_service_without_header_acts_as_itself_in_the_service_namespace() -> None:
    claims = {"sub": "svc", "custom:team": "acme"}
    caller = caller_from_event(event(claims, scopes=["engram/service"]), SETTINGS)
    assert (caller.user_id, caller.is_service, caller.subject) == ("service:svc", True, "svc")
    assert caller.identity_id == "acme:service%3Asvc"


def test_a_service_whose_sub_is_a_user_id_is_not_that_user() -> None:
    service = {"sub": "alice", "custom:team": "acme"}
    as_itself = caller_from_event(event(service, scopes=["engram/service"]), SETTINGS)
    user = caller_from_event(event(user_claims()), SETTINGS)
    assert as_itself.user_id != user.user_id
    assert as_itself.identity_id != user.identity_id


@pytest.mark.parametrize("sub", ["service:svc", "service:alice"])
def test_no_user_token_takes_the_service_namespace(sub: str) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event(user_claims(sub=sub)), SETTINGS)


@pytest.mark.parametrize("act_as", ["b\x01ob", "b\u202eob", "b\u200bob", "x" * 129, "service:svc"])
def test_service_naming_an_invalid_user_is_a_bad_request(act_as: str) -> None:
    claims = {"sub": "svc", "custom:team": "acme"}
    with pytest.raises(InvalidHeader) as err:
        caller_from_event(
            event(claims, scopes=["engram/service"], headers={"x-engram-user": act_as}),
            SETTINGS,
        )
    assert error_response(err.value).status == 400
    assert error_response(err.value).details[0]["field"] == "x-engram-user"


@pytest.mark.parametrize("service", [True, False])
def test_an_act_as_value_with_a_comma_is_a_bad_request(service: bool) -> None:
    # API Gateway joins a repeated header's values with commas: "bob,carol" is two users
    claims = {"sub": "alice", "custom:team": "acme"}
    scopes = ["engram/service"] if service else None
    with pytest.raises(InvalidHeader) as err:
        caller_from_event(
            event(claims, scopes=scopes, headers={"x-engram-user": "alice,bob"}), SETTINGS
        )
    assert error_response(err.value).status == 400


@pytest.mark.parametrize(
    "team", ["[acme]", "123", "acme:eu", '{"t":1}', "a" * 129, "-acme", "acme/eu", "é"]
)
def test_a_team_claim_must_match_the_team_id_pattern(team: str) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event(user_claims(**{"custom:team": team})), SETTINGS)
    service = {"sub": "svc", "scope": f"engram/service engram/team.{team}"}
    with pytest.raises(Unauthorized):
        caller_from_event(event(service, headers={"x-engram-user": "bob"}), SETTINGS)


@pytest.mark.parametrize("team", ["acme", "Acme-2", "t.eu_1", "a" * 128])
def test_team_ids_of_the_pattern_are_accepted(team: str) -> None:
    assert caller_from_event(event(user_claims(**{"custom:team": team})), SETTINGS).team_id == team


def test_a_user_scope_is_not_a_service() -> None:
    claims = user_claims(scope="engram/user")
    with pytest.raises(Forbidden):
        caller_from_event(
            event(claims, scopes=["engram/user"], headers={"x-engram-user": "bob"}), SETTINGS
        )
