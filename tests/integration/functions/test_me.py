"""Export and erasure across Redis and PostgreSQL."""

from __future__ import annotations

import psycopg
from tests.integration.functions.conftest import Stack

EVENTS = {
    "events": [
        {"kind": "query", "text": "royalty statement"},
        {
            "kind": "tool",
            "toolName": "get_account",
            "ok": True,
            "durationMs": 5,
            "result": {"accountId": "A-1"},
        },
    ]
}


def populate(stack: Stack, user: str) -> None:
    assert stack.call("POST /v1/events", body=EVENTS, user=user).status == 202
    stack.deliver()
    assert stack.call("POST /v1/sessions", body={}, user=user).status == 200
    assert (
        stack.call(
            "POST /v1/events",
            body={"events": [EVENTS["events"][0]]},
            headers={"Idempotency-Key": "second"},
            user=user,
        ).status
        == 202
    )
    stack.deliver()
    assert (
        stack.call("POST /v1/memories", body={"key": "editor", "value": "helix"}, user=user).status
        == 201
    )
    assert (
        stack.call(
            "POST /v1/memories",
            body={"key": "tone", "value": "short", "personaId": "p1"},
            user=user,
        ).status
        == 201
    )


def redis_keys_naming(stack: Stack, text: str) -> list[str]:
    return [k for k in stack.redis_key_names() if text in k]


def memory_rows(url: str, user: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE owner_id = %s OR user_id = %s", (user, user)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_export_holds_everything_about_the_caller(stack: Stack) -> None:
    populate(stack, "alice")
    populate(stack, "bob")
    res = stack.call("GET /v1/me/export")
    assert res.status == 200
    body = res.body
    assert (body["identityId"], body["userId"], body["teamId"]) == ("acme:alice", "alice", "acme")
    assert len(body["observations"]) == 4
    assert {f["subject"] for f in body["facts"]} >= {"domain_preference:royalty"}
    assert body["checkpoint"] is not None
    assert {(m["key"], m["scope"]) for m in body["memories"]} == {
        ("editor", "user"),
        ("tone", "persona_user"),
    }
    assert all(o["identityId"] == "acme:alice" for o in body["observations"])


def test_erasure_leaves_nothing_of_the_user(stack: Stack) -> None:
    populate(stack, "alice")
    populate(stack, "bob")
    assert redis_keys_naming(stack, "acme:alice")
    receipt = stack.call("DELETE /v1/me")
    assert receipt.status == 200
    counts = receipt.body["counts"]
    assert counts["observations"] == 4
    assert counts["facts"] >= 2
    assert counts["checkpoints"] == 1
    assert counts["memories"] == 2
    assert redis_keys_naming(stack, "acme:alice") == []
    assert memory_rows(stack.settings.database_url or "", "alice") == 0
    # the erasure is recorded, so extraction and the maintenance purge never bring it back
    assert stack.container.erasure_log.erased_since("acme", "alice", receipt.body["erasedAt"])
    # nobody else was touched
    assert redis_keys_naming(stack, "acme:bob")
    assert memory_rows(stack.settings.database_url or "", "bob") == 2
    after = stack.call("GET /v1/me/export").body
    assert (after["observations"], after["facts"], after["memories"]) == ([], [], [])
    again = stack.call("DELETE /v1/me")
    assert again.status == 200
    assert again.body["counts"]["memories"] == 0
