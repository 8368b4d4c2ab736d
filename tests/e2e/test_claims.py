"""Each claim rule over HTTP, with tokens signed by the local service's own key.

The local server flattens claims exactly as API Gateway's HTTP API JWT authorizer does (an
array becomes ``"[a b]"``, a number its digits), so these tokens reach the handlers in the
shapes a deployed Engram sees.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.e2e.harness import LocalEngram, Tenant

pytestmark = pytest.mark.e2e


def get(service: LocalEngram, path: str, token: str, **headers: Any) -> httpx.Response:
    with service.http() as http:
        return http.get(path, headers={"Authorization": f"Bearer {token}", **headers})


@pytest.mark.parametrize(
    "team", [["acme"], 123, "[acme]", {"id": "acme"}, "acme:eu", "9lives"], ids=repr
)
def test_a_team_claim_that_is_not_a_team_id_is_401(
    service: LocalEngram, tenant: Tenant, team: Any
) -> None:
    token = service.signer.issue(tenant.user, None, extra_claims={"custom:team": team})
    response = get(service, "/v1/memories", token)
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    ("groups", "admin"),
    [
        (["engram-admins"], True),  # an array claim: "[engram-admins]"
        (["readers", "engram-admins"], True),
        ("engram-admins", True),  # a string claim is one group
        (['"engram-admins"'], False),  # a group *named* with quotes
        ("engram-admins readers", False),  # one group, with a space in its name
        ("engram-admins,readers", False),  # one group, with a comma in its name
        (["x,engram-admins"], False),
    ],
    ids=repr,
)
def test_the_groups_claim_is_read_only_in_api_gateway_shapes(
    service: LocalEngram, tenant: Tenant, groups: Any, admin: bool
) -> None:
    token = service.signer.issue(tenant.admin, tenant.team, extra_claims={"cognito:groups": groups})
    response = get(service, "/v1/review", token)
    assert response.status_code == (200 if admin else 403), (groups, response.text)


def test_an_act_as_value_with_a_comma_is_400(service: LocalEngram, tenant: Tenant) -> None:
    header = service.settings.act_as_header
    backend = service.token("chat-backend", tenant.team, service=True)
    user = service.token(tenant.user, tenant.team)
    with service.http() as http:
        for token in (backend, user):
            auth = ("Authorization", f"Bearer {token}")
            joined = http.get("/v1/memories", headers=[auth, (header, f"{tenant.user},bob")])
            # a repeated header reaches the handler joined with a comma, as API Gateway joins it
            repeated = http.get(
                "/v1/memories", headers=[auth, (header, tenant.user), (header, "bob")]
            )
            for response in (joined, repeated):
                assert response.status_code == 400, response.text
                error = response.json()["error"]
                assert error["code"] == "invalid_header"
                assert error["details"][0]["field"] == header


@pytest.mark.parametrize("act_as", ["service:chat-backend", "b\u202eob", "x" * 129])
def test_an_act_as_value_that_is_no_user_id_is_400(
    service: LocalEngram, tenant: Tenant, act_as: str
) -> None:
    # (a header is bytes: a server reads UTF-8 as latin-1, so U+202E arrives as C1 controls)
    backend = service.token("chat-backend", tenant.team, service=True)
    with service.http() as http:
        response = http.get(
            "/v1/memories",
            headers={
                "Authorization": f"Bearer {backend}",
                service.settings.act_as_header: act_as.encode("utf-8"),
            },
        )
    assert response.status_code == 400, response.text


def test_a_service_token_without_act_as_is_not_the_user_with_its_sub(
    service: LocalEngram, tenant: Tenant
) -> None:
    alice = service.user_client(tenant.user, tenant.team)
    alice.save("secret", "alice's own")
    # a service token whose sub happens to be alice's user id
    same_sub = service.token(tenant.user, tenant.team, service=True)
    itself = service.client(same_sub)
    export = itself.export()
    assert export["memories"] == []
    assert export["userId"] == f"service:{tenant.user}"
    assert itself.start_session()["identityId"] == f"{tenant.team}:service%3A{tenant.user}"
    itself.save("service note", "its own")
    assert [m["key"] for m in alice.recall()] == ["secret"]
    # naming the user is how a service acts for her
    acting = service.client(same_sub, act_as=tenant.user)
    assert {m["key"] for m in acting.recall()} == {"secret"}


def test_no_user_token_takes_the_service_namespace(service: LocalEngram, tenant: Tenant):
    token = service.token(f"service:{tenant.user}", tenant.team)
    response = get(service, "/v1/me/export", token)
    assert response.status_code == 401
