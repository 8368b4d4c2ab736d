"""The memory lifecycle and ingest keys over HTTP against `engram serve`: a memory's history
(who sees it, its shape), the erasure receipt after a persona learnt from the user (every
count it names, checked against the database), and the ``Idempotency-Key`` header at its
boundaries."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually

from engram import limits
from engram.api.models import IDEMPOTENCY_HEADER

pytestmark = pytest.mark.e2e

PERSONA = "helpdesk"


def call(service: LocalEngram, token: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with service.http() as http:
        return http.request(method, path, headers=service.headers(token), **kwargs)


def test_history_over_http_shows_the_owner_every_change_and_hides_it_from_admins(
    service: LocalEngram, tenant: Tenant
) -> None:
    alice = service.token(tenant.user, tenant.team)
    admin = service.token(tenant.admin, tenant.team, admin=True, team_admin=True)
    other = service.token(tenant.other_user, tenant.team)
    saved = call(service, alice, "POST", "/v1/memories", json={"key": "tea", "value": "green"})
    assert saved.status_code == 201, saved.text
    memory_id = saved.json()["id"]
    patched = call(service, alice, "PATCH", f"/v1/memories/{memory_id}", json={"value": "oolong"})
    assert patched.status_code == 200, patched.text

    res = call(service, alice, "GET", f"/v1/memories/{memory_id}/history")
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["memoryId"] == memory_id
    [update] = body["actions"]
    assert set(update) == {"id", "action", "actorId", "at", "before", "after"}
    assert (update["action"], update["actorId"]) == ("update", tenant.user)
    assert (update["before"]["value"], update["after"]["value"]) == ("green", "oolong")
    # a user's own active user-scope memory is not what admins manage; nor another user's:
    # neither its history nor the memory itself
    for token in (admin, other):
        for path in (f"/v1/memories/{memory_id}/history", f"/v1/memories/{memory_id}"):
            hidden = call(service, token, "GET", path)
            assert hidden.status_code == 404, (path, hidden.text)
            assert hidden.json()["error"]["code"] == "not_found"

    # a deletion is in the history too, which the owner still reads
    assert call(service, alice, "DELETE", f"/v1/memories/{memory_id}").status_code == 204
    after = call(service, alice, "GET", f"/v1/memories/{memory_id}/history").json()
    assert [a["action"] for a in after["actions"]] == ["update", "delete"]
    assert after["actions"][-1]["after"] is None
    bad = call(service, alice, "GET", "/v1/memories/not-a-uuid/history")
    assert bad.status_code in (404, 422)


def test_the_erasure_receipt_counts_what_was_learnt_from_the_user(
    service: LocalEngram, tenant: Tenant
) -> None:
    alice = service.token(tenant.user, tenant.team)
    admin = service.token(tenant.admin, tenant.team, admin=True, team_admin=True)
    persona = {"allowedGroups": [], "memoryEnabled": True, "extraction": {"enabled": True}}
    res = call(service, admin, "PUT", f"/v1/personas/{PERSONA}", json=persona)
    assert res.status_code == 200, res.text
    conversation = f"conv-{tenant.user}"
    transcript = {
        "personaId": PERSONA,
        "messages": [
            {"role": "user", "content": "How do I export my royalty statements?"},
            {"role": "user", "content": "I prefer dark mode."},
        ],
    }
    res = call(
        service, alice, "POST", f"/v1/conversations/{conversation}/transcript", json=transcript
    )
    assert res.status_code == 202, res.text

    def learnt() -> list[dict[str, Any]] | None:
        page = call(service, admin, "GET", "/v1/review", params={"personaId": PERSONA}).json()
        found = [m for m in page["memories"] if m["sourceChannelId"] == conversation]
        scopes = {m["scope"] for m in found}
        return found if {"persona", "persona_user"} <= scopes else None

    proposals = eventually(learnt, timeout_s=60, every_s=0.5)
    faq = next(m for m in proposals if m["scope"] == "persona")
    mine = next(m for m in proposals if m["scope"] == "persona_user")
    res = call(service, admin, "POST", f"/v1/review/{faq['id']}/approve", json={})
    assert res.status_code == 200, res.text
    res = call(service, admin, "POST", f"/v1/review/{mine['id']}/approve", json={})
    assert res.status_code == 200, res.text
    assert call(service, alice, "DELETE", f"/v1/memories/{mine['id']}").status_code == 204

    res = call(service, alice, "DELETE", "/v1/me")
    assert res.status_code == 200, res.text
    counts = res.json()["counts"]
    assert counts["personaMemories"] == 1  # the FAQ learnt from her transcript
    assert counts["memories"] == 1  # her persona_user memory was deleted before: the FAQ only
    assert counts["reviewActions"] == 3  # two approvals and her deletion
    assert counts["suppressions"] == 1  # her deletion
    assert service.sql(
        "SELECT count(*) FROM memories WHERE team_id = %s AND (source_user_id = %s"
        " OR source_channel_id = %s)",
        (tenant.team, tenant.user, conversation),
    ) == [(0,)]
    assert service.sql(
        "SELECT count(*) FROM review_actions WHERE team_id = %s AND memory_id IN (%s, %s)",
        (tenant.team, faq["id"], mine["id"]),
    ) == [(0,)]
    assert service.sql(
        "SELECT count(*) FROM memory_suppressions WHERE team_id = %s", (tenant.team,)
    ) == [(0,)]


@pytest.mark.parametrize(
    ("key", "status"),
    [
        ("k" * limits.MAX_ID_CHARS, 202),
        ("k" * (limits.MAX_ID_CHARS + 1), 422),
        (b"tab\there", 422),
        ("zero\u200bwidth".encode(), 422),  # a zero-width space, as UTF-8 bytes
        ("bidi\u202eoverride".encode(), 422),
        (b"c1-\x85-control", 422),  # a C1 control as a Latin-1 byte
    ],
    ids=["at-limit", "past-limit", "tab", "zero-width", "bidi", "c1"],
)
def test_the_idempotency_key_header_at_its_boundaries(
    service: LocalEngram, tenant: Tenant, key: str | bytes, status: int
) -> None:
    token = service.token(tenant.user, tenant.team)
    body = {"events": [{"kind": "query", "text": "show my royalties"}]}
    headers = {**service.headers(token), IDEMPOTENCY_HEADER: key}
    with service.http() as http:
        res = http.post("/v1/events", json=body, headers=headers)  # type: ignore[arg-type]
    assert res.status_code == status, res.text
    if status == 422:
        error = res.json()["error"]
        assert [d["field"] for d in error["details"]] == [IDEMPOTENCY_HEADER]
    else:
        assert res.json()["accepted"] == 1
