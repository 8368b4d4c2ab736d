"""The name rule, signed cursors and the framing rules, over HTTP against ``engram serve``.

* Each refused character class (C1 controls, bidi overrides, bidi isolates, zero-width) is 422
  naming the field in every key, id, tool and entity name a client sends — in bodies and in
  paths — while entity names Engram extracts from tool results are skipped, not refused.
* A transcript whose path id holds a NUL, a newline or 129 characters is 422 and queues
  nothing.
* A review cursor with one byte changed, or from another listing, is 422 ``cursor``.
* Conflicting ``Content-Length`` headers are 400 and nothing is stored.
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually, pending_from_transcript

from engram import limits
from engram.local.sqs import queue_path

pytestmark = pytest.mark.e2e

CLASSES = {
    "C1 control": "\u0085",
    "C1 CSI": "\u009b",
    "bidi override": "\u202e",
    "bidi isolate": "\u2066",
    "zero-width space": "\u200b",
    "zero-width no-break": "\ufeff",
}
Request = tuple[str, str, Any]


def obs(obs_type: str, **metadata: Any) -> dict[str, Any]:
    return {"observations": [{"type": obs_type, "content": "c", "metadata": metadata}]}


FIELDS: dict[str, tuple[str, Callable[[str], Request]]] = {
    "memory key": ("key", lambda v: ("POST", "/v1/memories", {"key": v, "value": "x"})),
    "patch key": ("key", lambda v: ("PATCH", "/v1/memories/{memory}", {"key": v})),
    "tool key": (
        "key",
        lambda v: ("POST", "/v1/tools/memory_save", {"arguments": {"key": v, "value": "x"}}),
    ),
    "personaId": ("personaId", lambda v: ("POST", "/v1/sessions", {"personaId": v})),
    "sourceChannelId": (
        "sourceChannelId",
        lambda v: ("POST", "/v1/memories", {"key": "k", "value": "x", "sourceChannelId": v}),
    ),
    "observation id": (
        "observations.0.id",
        lambda v: (
            "POST",
            "/v1/observations",
            {
                "observations": [
                    {**obs("query_pattern", domain="d", query="q")["observations"][0], "id": v}
                ]
            },
        ),
    ),
    "toolName": (
        "events.0.tool.toolName",
        lambda v: (
            "POST",
            "/v1/events",
            {"events": [{"kind": "tool", "toolName": v, "ok": True, "durationMs": 1}]},
        ),
    ),
    "metadata.toolName": (
        "observations.0.metadata.toolName",
        lambda v: ("POST", "/v1/observations", obs("tool_success", toolName=v, durationMs=1)),
    ),
    "metadata.entityType": (
        "observations.0.metadata.entityType",
        lambda v: ("POST", "/v1/observations", obs("entity_access", entityType=v, entityId="1")),
    ),
    "metadata.entityId": (
        "observations.0.metadata.entityId",
        lambda v: ("POST", "/v1/observations", obs("entity_access", entityType="a", entityId=v)),
    ),
    "metadata.entityName": (
        "observations.0.metadata.entityName",
        lambda v: (
            "POST",
            "/v1/observations",
            obs("entity_access", entityType="a", entityId="1", entityName=v),
        ),
    ),
    "metadata.domain": (
        "observations.0.metadata.domain",
        lambda v: ("POST", "/v1/observations", obs("query_pattern", domain=v, query="q")),
    ),
    "allowedGroups": (
        "allowedGroups.0",
        lambda v: ("PUT", "/v1/personas/p1", {"allowedGroups": [v]}),
    ),
    "path memory id": ("id", lambda v: ("GET", f"/v1/memories/{quote(v)}", None)),
    "path personaId": ("personaId", lambda v: ("GET", f"/v1/personas/{quote(v)}", None)),
    "path conversationId": (
        "conversationId",
        lambda v: (
            "POST",
            f"/v1/conversations/{quote(v)}/transcript",
            {"messages": [{"role": "user", "content": "hi"}]},
        ),
    ),
    "path factId": ("factId", lambda v: ("DELETE", f"/v1/facts/{quote(v)}", None)),
    "path tool name": ("name", lambda v: ("POST", f"/v1/tools/{quote(v)}", {"arguments": {}})),
}


@pytest.fixture(scope="module")
def admin(service: LocalEngram) -> dict[str, Any]:
    tenant = service.tenant()
    token = service.token(tenant.admin, tenant.team, admin=True, team_admin=True)
    client = service.client(token)
    memory = client.save("anchor", "unchanged")
    return {"token": token, "client": client, "memory": memory, "tenant": tenant}


def send(http: httpx.Client, admin: dict[str, Any], request: Request) -> httpx.Response:
    method, path, body = request
    headers = {"Authorization": f"Bearer {admin['token']}"}
    return http.request(
        method, path.replace("{memory}", admin["memory"]["id"]), json=body, headers=headers
    )


@pytest.mark.parametrize("field", FIELDS, ids=str)
def test_each_character_class_is_refused_in_each_name(
    service: LocalEngram, admin: dict[str, Any], field: str
) -> None:
    name, build = FIELDS[field]
    with service.http() as http:
        for label, char in CLASSES.items():
            response = send(http, admin, build(f"ab{char}cd"))
            assert response.status_code == 422, (field, label, response.status_code, response.text)
            details = response.json()["error"]["details"]
            assert name in [d["field"] for d in details], (field, label, details)


def test_nothing_was_stored_by_the_refused_names(service: LocalEngram, admin: dict[str, Any]):
    export = admin["client"].export()
    assert [(m["key"], m["value"]) for m in export["memories"]] == [("anchor", "unchanged")]
    assert export["observations"] == []


def test_values_keep_these_characters(service: LocalEngram, tenant: Tenant) -> None:
    """The rule is for names: a memory's value is text and keeps them as sent."""
    client = service.user_client(tenant.user, tenant.team)
    value = "".join(CLASSES.values()) + " ok"
    assert client.save("chars", value)["value"] == value


def test_extracted_entity_names_breaking_the_rule_are_skipped(
    service: LocalEngram, tenant: Tenant
) -> None:
    client = service.user_client(tenant.user, tenant.team)
    tables = [
        {"fullName": "DB.S.GOOD", "name": "good"},
        *(
            {"fullName": f"DB.S.T{i}", "name": f"bad{c}name"}
            for i, c in enumerate(CLASSES.values())
        ),
        *({"fullName": f"DB.S.{c}ID", "name": "x"} for c in CLASSES.values()),
    ]
    accepted = client.post_events(
        [
            {
                "kind": "tool",
                "toolName": "search_snowflake_schema",
                "ok": True,
                "durationMs": 5,
                "result": {"tables": tables[:20]},
            }
        ]
    )
    assert accepted["accepted"] == 2  # tool_success + the one clean entity

    def stored() -> list[Any] | None:
        obs = client.export()["observations"]
        return obs if len(obs) == 2 else None

    entities = [o for o in eventually(stored) if o["type"] == "entity_access"]
    assert [o["metadata"]["entityId"] for o in entities] == ["DB.S.GOOD"]


def _last_queued(service: LocalEngram) -> int:
    path = queue_path(service.data_dir, "engram-extraction")
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize(
    "conversation", ["a\x00b", "a\nb", "c" * (limits.MAX_ID_CHARS + 1), "a\u202eb"], ids=repr
)
def test_a_transcript_path_id_breaking_the_rule_is_refused_and_queues_nothing(
    service: LocalEngram, tenant: Tenant, conversation: str
) -> None:
    token = service.token(tenant.user, tenant.team)
    body = {"messages": [{"role": "user", "content": "Remember that my editor is helix."}]}
    before = _last_queued(service)
    with service.http() as http:
        response = http.post(
            f"/v1/conversations/{quote(conversation)}/transcript",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"][0]["field"] == "conversationId"
        good = http.post(
            "/v1/conversations/" + "c" * limits.MAX_ID_CHARS + "/transcript",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert good.status_code == 202
    assert _last_queued(service) == before + 1  # the good one only


def test_a_cursor_with_one_byte_changed_is_422_cursor(service: LocalEngram, tenant: Tenant):
    pending_from_transcript(
        service,
        tenant,
        "conv-cursor",
        "Remember that my editor is helix. Remember that my shell is fish.",
        "fish",
    )
    admin = service.user_client(tenant.admin, tenant.team, admin=True)
    first = eventually(lambda: (p := admin.review_page(limit=1)) and p["nextCursor"] and p)
    cursor: str = first["nextCursor"]
    second = admin.review_page(limit=1, cursor=cursor)
    assert second["memories"]
    assert second["memories"] != first["memories"]
    token = service.token(tenant.admin, tenant.team, admin=True)
    with service.http() as http:
        for i in (0, len(cursor) // 2, len(cursor) - 1):
            flipped = cursor[:i] + ("A" if cursor[i] != "A" else "B") + cursor[i + 1 :]
            response = http.get(
                "/v1/review",
                params={"limit": 1, "cursor": flipped},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 422, (i, response.text)
            assert response.json()["error"]["details"][0]["field"] == "cursor"
        other_listing = http.get(
            "/v1/review",
            params={"limit": 1, "cursor": cursor, "personaId": "another"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert other_listing.status_code == 422
        other_team = service.token(tenant.admin, f"x{tenant.team}", admin=True)
        foreign = http.get(
            "/v1/review",
            params={"limit": 1, "cursor": cursor},
            headers={"Authorization": f"Bearer {other_team}"},
        )
        assert foreign.status_code == 422


def _raw(service: LocalEngram, head: str, body: bytes) -> bytes:
    host, port = service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "lengths", [("2", "30"), ("30", "2"), ("+30",), ("3_0",), ("30, 30",)], ids=str
)
def test_conflicting_content_length_is_400_and_stores_nothing(
    service: LocalEngram, tenant: Tenant, lengths: tuple[str, ...]
) -> None:
    token = service.token(tenant.user, tenant.team)
    body = b'{"key": "smuggled", "value": "v"}'
    head = "\r\n".join(
        [
            "POST /v1/memories HTTP/1.1",
            "Host: localhost",
            f"Authorization: Bearer {token}",
            "Content-Type: application/json",
            *(f"Content-Length: {n}" for n in lengths),
        ]
    )
    answer = _raw(service, head, body)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b'"code":"bad_request"' in rest
    assert service.user_client(tenant.user, tenant.team).recall() == []
