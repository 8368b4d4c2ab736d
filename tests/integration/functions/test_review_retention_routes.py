"""Through the memories handler (real Redis + embedded PostgreSQL): retention rules on personas
and team settings, review paging, approve with edits, and tool-call provenance."""

from __future__ import annotations

from typing import Any

import pytest
from tests.integration.functions.conftest import Stack
from tests.support.services import RedisTarget

from engram.adapters.postgres.retention import PostgresRetentionPolicies


@pytest.fixture
def redis_target(standalone_redis: RedisTarget) -> RedisTarget:
    """The standalone server only: these tests are about review and retention (PostgreSQL)."""
    return standalone_redis


ADMIN = ("engram-team-admins",)
PERSONA = {"personaId": "chef"}


def as_admin(stack: Stack, route: str, **kw: Any) -> Any:
    return stack.call(route, user="carol", groups=ADMIN, **kw)


def job_policies(stack: Stack) -> dict[str, tuple[int | None, int | None]]:
    """The policies the maintenance job reads (across teams), by ``team/persona`` key."""
    source = PostgresRetentionPolicies(stack.container.database)
    return {
        p.key: (p.archive_after_days, p.delete_archived_after_days)
        for p in source.list_policies(after=None, limit=100)
    }


def test_persona_retention_is_set_read_kept_and_cleared(stack: Stack) -> None:
    body: dict[str, Any] = {
        "memoryEnabled": True,
        "retention": {"archiveAfterDays": 90, "deleteArchivedAfterDays": 30},
    }
    put = as_admin(stack, "PUT /v1/personas/{personaId}", path=PERSONA, body=body)
    assert put.status == 200
    assert put.body["retention"] == {"archiveAfterDays": 90, "deleteArchivedAfterDays": 30}
    got = as_admin(stack, "GET /v1/personas/{personaId}", path=PERSONA)
    assert got.body["retention"] == {"archiveAfterDays": 90, "deleteArchivedAfterDays": 30}
    assert job_policies(stack) == {"acme/chef": (90, 30)}

    # a PUT without retention changes the other settings and keeps the rules
    kept = as_admin(
        stack, "PUT /v1/personas/{personaId}", path=PERSONA, body={"allowedGroups": ["sales"]}
    )
    assert kept.body["allowedGroups"] == ["sales"]
    assert kept.body["retention"] == {"archiveAfterDays": 90, "deleteArchivedAfterDays": 30}

    one_rule = as_admin(
        stack,
        "PUT /v1/personas/{personaId}",
        path=PERSONA,
        body={"retention": {"archiveAfterDays": 7}},
    )
    assert one_rule.body["retention"] == {"archiveAfterDays": 7, "deleteArchivedAfterDays": None}
    assert job_policies(stack) == {"acme/chef": (7, None)}

    cleared = as_admin(
        stack, "PUT /v1/personas/{personaId}", path=PERSONA, body={"retention": None}
    )
    assert cleared.body["retention"] == {"archiveAfterDays": None, "deleteArchivedAfterDays": None}
    assert job_policies(stack) == {}


def test_bad_retention_names_the_field_and_stores_nothing(stack: Stack) -> None:
    good = {"retention": {"archiveAfterDays": 10, "deleteArchivedAfterDays": 20}}
    assert as_admin(stack, "PUT /v1/personas/{personaId}", path=PERSONA, body=good).status == 200
    for retention, field in (
        ({"archiveAfterDays": 0}, "retention.archiveAfterDays"),
        ({"archiveAfterDays": -5}, "retention.archiveAfterDays"),
        ({"deleteArchivedAfterDays": "30"}, "retention.deleteArchivedAfterDays"),
        ({"deleteArchivedAfterDays": 1.5}, "retention.deleteArchivedAfterDays"),
        ({"archiveAfterDays": True}, "retention.archiveAfterDays"),
        ({"archiveAfterDays": 36_501}, "retention.archiveAfterDays"),
        ({"keepForever": True}, "retention.keepForever"),
        ([30], "retention"),
    ):
        for route, extra, path in (
            ("PUT /v1/personas/{personaId}", {}, PERSONA),
            ("PUT /v1/settings/team", {"memoryEnabled": True}, None),
        ):
            bad = as_admin(stack, route, path=path, body={**extra, "retention": retention})
            assert bad.status == 422, (route, retention)
            assert bad.body["error"]["details"][0]["field"] == field, (route, retention)
    assert job_policies(stack) == {"acme/chef": (10, 20)}
    got = as_admin(stack, "GET /v1/personas/{personaId}", path=PERSONA)
    assert got.body["retention"] == {"archiveAfterDays": 10, "deleteArchivedAfterDays": 20}


def test_team_retention_is_set_kept_and_cleared(stack: Stack) -> None:
    body = {"memoryEnabled": True, "retention": {"archiveAfterDays": 365}}
    assert stack.call("PUT /v1/settings/team", body=body).status == 403  # not a team admin
    assert job_policies(stack) == {}
    put = as_admin(stack, "PUT /v1/settings/team", body=body)
    assert put.status == 200
    assert put.body["retention"] == {"archiveAfterDays": 365, "deleteArchivedAfterDays": None}
    assert job_policies(stack) == {"acme/": (365, None)}
    kept = as_admin(stack, "PUT /v1/settings/team", body={"memoryEnabled": False})
    assert kept.body["memoryEnabled"] is False
    assert kept.body["retention"] == {"archiveAfterDays": 365, "deleteArchivedAfterDays": None}
    cleared = as_admin(
        stack, "PUT /v1/settings/team", body={"memoryEnabled": True, "retention": None}
    )
    assert cleared.body["retention"] == {"archiveAfterDays": None, "deleteArchivedAfterDays": None}
    assert job_policies(stack) == {}


def test_review_pages_with_limit_and_cursor(stack: Stack) -> None:
    memories = stack.container.memories
    keys = [f"k{i}" for i in range(5)]
    for key in keys:
        assert (
            memories.jobs.propose("acme", "alice", None, key, f"value {key}", 0.8, "c1") is not None
        )
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = as_admin(stack, "GET /v1/review", query=query)
        assert page.status == 200
        assert len(page.body["memories"]) <= 2
        seen += [m["key"] for m in page.body["memories"]]
        pages += 1
        cursor = page.body["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == keys
    assert len(seen) == len(set(seen))
    assert pages == 3
    everything = as_admin(stack, "GET /v1/review")
    assert len(everything.body["memories"]) == 5
    assert everything.body["nextCursor"] is None
    for query, field in (
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=two", "limit"),
        ("cursor=not-a-cursor", "cursor"),
        ("bogus=1", "bogus"),
    ):
        bad = as_admin(stack, "GET /v1/review", query=query)
        assert bad.status == 422, query
        assert bad.body["error"]["details"][0]["field"] == field, query


def test_approve_with_edits_without_a_body_and_with_bad_edits(stack: Stack) -> None:
    one, two = stack.proposed("pet", "a cat"), stack.proposed("editor", "vim")
    for body in ({"value": ""}, {"key": "k" * 101}, {"value": 5}, {"status": "active"}):
        bad = as_admin(stack, "POST /v1/review/{id}/approve", path={"id": one.id}, body=body)
        assert bad.status == 422, body
    pending = as_admin(stack, "GET /v1/review").body["memories"]
    assert sorted((m["key"], m["value"]) for m in pending) == [("editor", "vim"), ("pet", "a cat")]
    edited = as_admin(
        stack,
        "POST /v1/review/{id}/approve",
        path={"id": one.id},
        body={"key": "pets", "value": "two cats"},
    )
    assert edited.status == 200
    assert (edited.body["key"], edited.body["value"], edited.body["status"]) == (
        "pets",
        "two cats",
        "active",
    )
    plain = as_admin(stack, "POST /v1/review/{id}/approve", path={"id": two.id})
    assert plain.status == 200
    assert (plain.body["key"], plain.body["value"]) == ("editor", "vim")
    mine = {m["key"]: m["value"] for m in stack.call("GET /v1/memories").body["memories"]}
    assert mine == {"pets": "two cats", "editor": "vim"}


def test_tool_save_records_the_source_channel(stack: Stack) -> None:
    saved = stack.call(
        "POST /v1/tools/{name}",
        path={"name": "memory_save"},
        body={
            "arguments": {"key": "deploys", "value": "Kubernetes"},
            "sourceChannelId": "conv-42",
        },
    )
    assert saved.status == 200
    [memory] = saved.body["result"]["memories"]
    assert memory["sourceChannelId"] == "conv-42"
    got = stack.call("GET /v1/memories/{id}", path={"id": memory["id"]})
    assert got.body["sourceChannelId"] == "conv-42"
