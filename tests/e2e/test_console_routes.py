"""The console's routes over HTTP on `engram serve`: the memory listing and its cursor, ETag
and If-Match, bulk review, the personas list and the team settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.e2e.harness import LocalEngram, Tenant, pending_from_transcript

pytestmark = pytest.mark.e2e


@pytest.fixture
def http(service: LocalEngram) -> Iterator[httpx.Client]:
    with service.http() as client:
        yield client


def auth(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def save(http: httpx.Client, token: str, key: str, value: str, **extra: Any) -> dict[str, Any]:
    r = http.post("/v1/memories", json={"key": key, "value": value, **extra}, headers=auth(token))
    assert r.status_code in {200, 201}, r.text
    assert r.headers["etag"] == f'"{r.json()["version"]}"'
    body: dict[str, Any] = r.json()
    return body


def test_listing_pages_with_a_cursor_and_filters_by_conversation(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
) -> None:
    user = service.token(tenant.user, tenant.team)
    other = service.token(tenant.other_user, tenant.team)
    saved = {
        save(http, user, f"k{i}", f"v{i}", sourceChannelId=f"c{i % 2}")["id"] for i in range(5)
    }
    save(http, other, "k0", "not yours", sourceChannelId="c0")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = http.get("/v1/memories/list", params=params, headers=auth(user))
        assert r.status_code == 200, r.text
        seen += [m["id"] for m in r.json()["memories"]]
        cursor = r.json()["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(saved)
    r = http.get("/v1/memories/list", params={"sourceChannelId": "c0"}, headers=auth(user))
    assert {m["value"] for m in r.json()["memories"]} == {"v0", "v2", "v4"}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 101}, "limit"),
        ({"limit": 0}, "limit"),
        ({"status": "deleted"}, "status"),
        ({"scope": "team"}, "scope"),
        ({"cursor": "abc.def"}, "cursor"),
        ({"sourceChannelId": "a\u200bb"}, "sourceChannelId"),
        ({"maxResults": 5}, "maxResults"),  # a recall parameter is no listing parameter
    ],
)
def test_listing_refuses_bad_parameters_naming_them(
    service: LocalEngram, tenant: Tenant, http: httpx.Client, params: dict[str, Any], field: str
) -> None:
    r = http.get(
        "/v1/memories/list", params=params, headers=auth(service.token(tenant.user, tenant.team))
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == field


def test_a_stale_if_match_is_412_and_changes_nothing(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
) -> None:
    token = service.token(tenant.user, tenant.team)
    memory = save(http, token, "editor", "vim")
    url = f"/v1/memories/{memory['id']}"
    read = http.get(url, headers=auth(token))
    etag = read.headers["etag"]
    assert etag == '"1"'
    first = http.patch(url, json={"value": "helix"}, headers=auth(token, **{"If-Match": etag}))
    assert first.status_code == 200, first.text
    assert first.headers["etag"] == '"2"'
    for tag in (etag, 'W/"2"'):  # stale, and a weak tag (If-Match compares strongly)
        late = http.patch(url, json={"value": "nano"}, headers=auth(token, **{"If-Match": tag}))
        assert late.status_code == 412, late.text
        assert late.json()["error"]["code"] == "precondition_failed"
    gone = http.delete(url, headers=auth(token, **{"If-Match": etag}))
    assert gone.status_code == 412
    archive = http.post(f"{url}/archive", headers=auth(token, **{"If-Match": etag}))
    assert archive.status_code == 412
    assert http.get(url, headers=auth(token)).json()["value"] == "helix"
    bad = http.patch(url, json={"value": "x"}, headers=auth(token, **{"If-Match": "2"}))
    assert bad.status_code == 400
    assert bad.json()["error"]["details"][0]["field"] == "If-Match"
    anyway = http.patch(url, json={"value": "ed"}, headers=auth(token, **{"If-Match": "*"}))
    assert anyway.status_code == 200
    assert http.delete(url, headers=auth(token, **{"If-Match": '"1", "3"'})).status_code == 204


def test_bulk_review_answers_per_id(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
) -> None:
    admin = service.token(tenant.admin, tenant.team, team_admin=True)
    user = service.token(tenant.user, tenant.team)
    said = [
        ("conv-b1", "My favourite editor is helix.", "helix"),
        ("conv-b2", "I live in Lisbon.", "Lisbon"),
        ("conv-b3", "My favourite colour is teal.", "teal"),
    ]
    pending = [pending_from_transcript(service, tenant, *words) for words in said]
    ids = [m["id"] for m in pending]
    assert http.post(f"/v1/review/{ids[0]}/reject", headers=auth(admin)).status_code == 200
    body = {"action": "approve", "ids": ids}
    refused = http.post("/v1/review/bulk", json=body, headers=auth(user))
    assert refused.status_code == 403
    r = http.post("/v1/review/bulk", json=body, headers=auth(admin))
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["id"] for x in results] == ids
    assert results[0]["ok"] is False
    assert results[0]["error"]["code"] == "conflict"
    assert [x["ok"] for x in results[1:]] == [True, True]
    assert {x["memory"]["status"] for x in results[1:]} == {"active"}
    duplicate = http.post(
        "/v1/review/bulk", json={"action": "reject", "ids": [ids[1], ids[1]]}, headers=auth(admin)
    )
    assert duplicate.status_code == 422
    assert duplicate.json()["error"]["details"][0]["field"] == "ids"


def test_admins_read_personas_and_team_settings(
    service: LocalEngram, tenant: Tenant, http: httpx.Client
) -> None:
    admin = service.token(tenant.admin, tenant.team, team_admin=True)
    user = service.token(tenant.user, tenant.team)
    team = http.get("/v1/settings/team", headers=auth(admin))
    assert team.status_code == 200, team.text
    assert team.json()["memoryEnabled"] is True
    assert team.json()["updatedAt"] is None
    put = {"memoryEnabled": False, "retention": {"archiveAfterDays": 30}}
    assert http.put("/v1/settings/team", json=put, headers=auth(admin)).status_code == 200
    after = http.get("/v1/settings/team", headers=auth(admin)).json()
    assert after["memoryEnabled"] is False
    assert after["retention"]["archiveAfterDays"] == 30
    for persona in ("waiter", "chef"):
        body = {"allowedGroups": ["staff"]}
        r = http.put(f"/v1/personas/{persona}", json=body, headers=auth(admin))
        assert r.status_code == 200, r.text
    listed = http.get("/v1/personas", headers=auth(admin))
    assert [p["personaId"] for p in listed.json()["personas"]] == ["chef", "waiter"]
    for path in ("/v1/personas", "/v1/settings/team"):
        assert http.get(path, headers=auth(user)).status_code == 403
