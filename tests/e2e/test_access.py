"""The access-control matrix over HTTP: who may touch what, and what a stranger learns."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually, pending_from_transcript

from engram.api.routes import ROUTES
from engram.local.tokens import TokenSigner

pytestmark = pytest.mark.e2e

AUTHENTICATED = [r for r in ROUTES if r.auth]
SAMPLE_BODIES: dict[str, Any] = {
    "POST /v1/observations": {
        "observations": [{"type": "query_pattern", "content": "x", "metadata": {}}]
    },
    "POST /v1/events": {"events": [{"kind": "query", "text": "royalty"}]},
    "POST /v1/sessions": {},
    "POST /v1/memories": {"key": "k", "value": "v"},
    "PATCH /v1/memories/{id}": {"value": "v"},
    "POST /v1/tools/{name}": {"arguments": {}},
    "POST /v1/conversations/{conversationId}/transcript": {
        "messages": [{"role": "user", "content": "hi"}]
    },
    "PUT /v1/personas/{personaId}": {"memoryEnabled": True},
    "PUT /v1/settings/team": {"memoryEnabled": True},
    "POST /v1/review/bulk": {"action": "approve", "ids": ["00000000-0000-4000-8000-000000000000"]},
}


def concrete(path: str) -> str:
    return (
        path.replace("{id}", "00000000-0000-4000-8000-000000000000")
        .replace("{factId}", "fact:tool_affinity:x")
        .replace("{name}", "memory_recall")
        .replace("{conversationId}", "conv-1")
        .replace("{personaId}", "helpdesk")
    )


def call(
    http: httpx.Client,
    method: str,
    path: str,
    token: str | None = None,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    return http.request(method, path, json=body, headers=h)


@pytest.fixture
def http(service: LocalEngram) -> Any:
    with service.http() as client:
        yield client


@pytest.fixture(scope="module")
def foreign_signer(service: LocalEngram, tmp_path_factory: pytest.TempPathFactory) -> TokenSigner:
    """A signer with a key of our own: same issuer, audience and claims, wrong key."""
    return TokenSigner(
        tmp_path_factory.mktemp("foreign-key"),
        audience=service.settings.local_audience,
        settings=service.settings,
    )


def bad_tokens(service: LocalEngram, tenant: Tenant, foreign: TokenSigner) -> dict[str, str | None]:
    return {
        "missing": None,
        "expired": service.token(tenant.user, tenant.team, ttl_s=-120),
        "wrongly signed": foreign.issue(tenant.user, tenant.team),
        "wrong audience": service.token(tenant.user, tenant.team, audience="someone-else"),
        "wrong issuer": service.token(tenant.user, tenant.team, extra_claims={"iss": "evil"}),
        "no team": service.token(tenant.user, None),
        "garbage": "not.a.jwt",
    }


@pytest.mark.parametrize("route", AUTHENTICATED, ids=lambda r: r.route_key)
def test_every_authenticated_route_refuses_bad_tokens_with_401(
    service: LocalEngram,
    tenant: Tenant,
    http: httpx.Client,
    route: Any,
    foreign_signer: TokenSigner,
):
    body = SAMPLE_BODIES.get(route.route_key)
    for what, token in bad_tokens(service, tenant, foreign_signer).items():
        response = call(http, route.method, concrete(route.path), token, body=body)
        assert response.status_code == 401, (what, response.text)
        error = response.json()["error"]
        assert error["code"] == "unauthorized", what
        assert error["message"], what
    # nothing was stored by any of the refused writes
    alice = service.user_client(tenant.user, tenant.team)
    assert alice.recall() == []
    assert alice.export()["observations"] == []


def test_a_non_bearer_authorization_header_is_401(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    token = service.token(tenant.user, tenant.team)
    for header in (f"Basic {token}", token, "Bearer", f"Bearer {token}x"):
        response = http.post("/v1/sessions", json={}, headers={"Authorization": header})
        assert response.status_code == 401, header


def test_health_needs_no_token(http: httpx.Client):
    response = http.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "version": response.json()["version"],
        "redis": "ok",
        "postgres": "ok",
    }


def test_another_users_ids_give_404_and_change_nothing(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    alice = service.user_client(tenant.user, tenant.team)
    memory = alice.save("secret", "alice only")
    shared = alice.save("style", "formal", persona_id="helpdesk")  # persona_user scope
    alice.post_events([{"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 1}])
    eventually(
        lambda: (
            "tool_affinity:get_account" in {f["subject"] for f in alice.start_session()["facts"]}
        )
    )

    strangers = {
        "same team": service.token(tenant.other_user, tenant.team),
        "other team, same user id": service.token(tenant.user, f"x{tenant.team}"),
        "other team admin": service.token(tenant.admin, f"x{tenant.team}", admin=True),
    }
    for who, token in strangers.items():
        for mid in (memory["id"], shared["id"]):
            for method, path, body in (
                ("GET", f"/v1/memories/{mid}", None),
                ("PATCH", f"/v1/memories/{mid}", {"value": "pwned"}),
                ("DELETE", f"/v1/memories/{mid}", None),
                ("POST", f"/v1/memories/{mid}/archive", None),
            ):
                response = call(http, method, path, token, body=body)
                assert response.status_code == 404, (who, method, path, response.text)
                assert response.json()["error"]["code"] == "not_found"
                assert "alice only" not in response.text
        response = call(http, "DELETE", "/v1/facts/fact:tool_affinity:get_account", token)
        assert response.status_code == 404, (who, response.text)
        recalled = call(http, "GET", "/v1/memories", token).json()["memories"]
        assert all(m["value"] not in ("alice only", "formal") for m in recalled), who

    assert alice.get_memory(memory["id"])["value"] == "alice only"
    assert alice.get_memory(shared["id"])["status"] == "active"
    assert "tool_affinity:get_account" in {f["subject"] for f in alice.facts()}


def test_review_ids_of_another_team_give_404(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    pending = pending_from_transcript(
        service, tenant, "conv-1", "My favourite editor is helix.", "helix"
    )["id"]
    other_admin = service.token(tenant.admin, f"x{tenant.team}", admin=True)
    for action in ("approve", "reject"):
        response = call(http, "POST", f"/v1/review/{pending}/{action}", other_admin)
        assert response.status_code == 404, (action, response.text)
    queue = call(http, "GET", "/v1/review", other_admin).json()["memories"]
    assert pending not in {m["id"] for m in queue}
    admin = service.user_client(tenant.admin, tenant.team, admin=True)
    assert pending in {m["id"] for m in admin.review_queue()}  # still pending, untouched


def test_another_teams_persona_is_not_revealed(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    """Persona ids are per team: another team's admin reading our persona gets the 404 of an
    id nobody ever configured, so it does not learn that ours exists; writing the same id
    configures their own team's persona and leaves ours as it was. Sessions and recall with a
    persona id that has no row in the caller's team still work, with the defaults."""
    owner = service.user_client(tenant.admin, tenant.team, team_admin=True)
    owner.put_persona("helpdesk", allowed_groups=["support"], memory_enabled=False)
    other_admin = service.token(tenant.admin, f"x{tenant.team}", team_admin=True)

    seen = call(http, "GET", "/v1/personas/helpdesk", other_admin)
    never = call(http, "GET", "/v1/personas/never-configured", other_admin)
    assert (seen.status_code, never.status_code) == (404, 404)
    assert seen.json() == never.json()
    assert seen.json()["error"]["code"] == "not_found"

    for method, path, body in (
        ("POST", "/v1/sessions", {"personaId": "helpdesk"}),
        ("GET", "/v1/memories?personaId=helpdesk", None),
        ("POST", "/v1/sessions", {"personaId": "never-configured"}),
    ):
        response = call(http, method, path, other_admin, body=body)
        assert response.status_code == 200, (method, path, response.text)

    written = call(http, "PUT", "/v1/personas/helpdesk", other_admin, body={"memoryEnabled": True})
    assert written.status_code == 200
    theirs = call(http, "GET", "/v1/personas/helpdesk", other_admin).json()
    assert theirs["teamId"] == f"x{tenant.team}"
    assert theirs["allowedGroups"] == []
    mine = owner.get_persona("helpdesk")
    assert mine["allowedGroups"] == ["support"]
    assert mine["memoryEnabled"] is False


def test_a_persona_limited_to_groups_hides_its_memories_from_other_users(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    owner = service.user_client(tenant.admin, tenant.team, team_admin=True)
    owner.put_persona("finance", allowed_groups=["finance"])
    member = service.user_client(tenant.user, tenant.team, groups=["finance"])
    saved = member.save("ledger", "FY26", persona_id="finance")
    outsider = service.token(tenant.user, tenant.team)  # same user, without the group
    response = call(http, "GET", f"/v1/memories/{saved['id']}", outsider)
    assert response.status_code == 404
    response = call(http, "GET", "/v1/memories?personaId=finance", outsider)
    assert response.status_code == 200
    assert response.json()["memories"] == []


def test_a_user_token_naming_another_user_is_403(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    token = service.token(tenant.user, tenant.team)
    header = service.settings.act_as_header
    for method, path in (("POST", "/v1/sessions"), ("GET", "/v1/memories"), ("DELETE", "/v1/me")):
        response = call(
            http,
            method,
            path,
            token,
            body={} if method == "POST" else None,
            headers={header: tenant.other_user},
        )
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    # naming itself is fine
    response = call(http, "POST", "/v1/sessions", token, body={}, headers={header: tenant.user})
    assert response.status_code == 200
    assert response.json()["identityId"] == tenant.identity
    # bob was not erased by the refused DELETE /v1/me
    bob = service.user_client(tenant.other_user, tenant.team)
    bob.save("k", "v")
    assert [m["value"] for m in bob.recall()] == ["v"]


def test_a_service_token_acts_for_users_of_its_own_team_only(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    alice = service.user_client(tenant.user, tenant.team)
    mine = alice.save("language", "French")

    backend = service.token("chat-backend", tenant.team, service=True)
    acting = service.client(backend, act_as=tenant.user)
    session = acting.start_session()
    assert session["identityId"] == tenant.identity
    assert [m["value"] for m in acting.recall()] == ["French"]
    acting.save("units", "metric")
    assert {m["key"] for m in alice.recall()} == {"language", "units"}

    # another team's service token naming alice reaches only its own team's "alice"
    foreign = service.client(
        service.token("chat-backend", f"x{tenant.team}", service=True), act_as=tenant.user
    )
    assert foreign.start_session()["identityId"] == f"x{tenant.team}:{tenant.user}"
    assert foreign.recall() == []
    header = {service.settings.act_as_header: tenant.user}
    response = call(
        http,
        "GET",
        f"/v1/memories/{mine['id']}",
        service.token("chat-backend", f"x{tenant.team}", service=True),
        headers=header,
    )
    assert response.status_code == 404
    assert {m["key"] for m in alice.recall()} == {"language", "units"}


def test_non_admins_are_refused_admin_routes_with_403(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
):
    token = service.token(tenant.user, tenant.team)
    for method, path, body in (
        ("GET", "/v1/review", None),
        ("POST", "/v1/review/00000000-0000-4000-8000-000000000000/approve", None),
        ("POST", "/v1/review/00000000-0000-4000-8000-000000000000/reject", None),
        ("GET", "/v1/personas/helpdesk", None),
        ("PUT", "/v1/personas/helpdesk", {"memoryEnabled": False}),
        ("PUT", "/v1/settings/team", {"memoryEnabled": False}),
        ("GET", "/v1/insights/tools", None),
        ("GET", "/v1/insights/domains", None),
    ):
        response = call(http, method, path, token, body=body)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    alice = service.user_client(tenant.user, tenant.team)
    alice.save("still", "on")
    assert [m["value"] for m in alice.recall()] == ["on"]  # the team switch was not flipped
