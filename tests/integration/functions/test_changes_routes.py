"""Change proposals, possible duplicates and merges through the API (the handlers, real Redis,
embedded PostgreSQL, the offline WordLlama embedder): the review queue shows what a change
would replace, approving it makes a new version of the same memory, a save names a close
memory under another key, and a merge folds one memory into another."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from tests.integration.functions.conftest import Stack, settings_for
from tests.support.services import RedisTarget

ADMIN = ("engram-team-admins",)


@pytest.fixture
def redis_target(standalone_redis: RedisTarget) -> RedisTarget:
    return standalone_redis


@pytest.fixture
def world(make: Any, redis_target: RedisTarget, migrated_url: str, tmp_path: Any) -> Stack:
    stack: Stack = make(settings_for(redis_target, migrated_url, tmp_path, embedder="local"))
    return stack


def ok(res: Any, status: int = 200) -> Any:
    assert res.status == status, res.body
    return res.body


def test_a_change_proposal_shows_what_it_replaces_and_approving_it_is_a_new_version(
    world: Stack,
) -> None:
    jobs = world.container.memories.jobs
    teal = jobs.propose("acme", "alice", None, "favourite colour", "teal", 0.8, "conv-1")
    assert teal is not None
    memory = ok(world.call("POST /v1/review/{id}/approve", path={"id": teal.id}, groups=ADMIN))
    crimson = jobs.propose("acme", "alice", None, "favourite colour", "crimson", 0.8, "conv-2")
    assert crimson is not None

    [item] = ok(world.call("GET /v1/review", groups=ADMIN))["memories"]
    assert (item["id"], item["key"], item["value"]) == (crimson.id, "favourite colour", "crimson")
    assert item["current"] == {"id": memory["id"], "version": memory["version"], "value": "teal"}
    history = ok(world.call("GET /v1/memories/{id}/history", path={"id": memory["id"]}))
    assert history["pendingChange"]["id"] == crimson.id
    assert history["pendingChange"]["value"] == "crimson"
    refused = world.call(
        "POST /v1/review/{id}/approve",
        path={"id": crimson.id},
        body={"key": "colour"},
        groups=ADMIN,
    )
    assert refused.status == 422, refused.body
    assert "key" in str(refused.body)

    res = world.call("POST /v1/review/{id}/approve", path={"id": crimson.id}, groups=ADMIN)
    after = ok(res)
    assert (after["id"], after["value"], after["version"]) == (
        memory["id"],
        "crimson",
        memory["version"] + 1,
    )
    assert res.headers["ETag"] == f'"{after["version"]}"'
    again = world.call("POST /v1/review/{id}/reject", path={"id": crimson.id}, groups=ADMIN)
    assert again.status == 409, again.body
    history = ok(world.call("GET /v1/memories/{id}/history", path={"id": memory["id"]}))
    assert history["pendingChange"] is None
    assert [v["value"] for v in history["versions"]][-2:] == ["teal", "crimson"]


def test_a_save_names_a_close_memory_and_merge_folds_it_in(world: Stack) -> None:
    first = ok(
        world.call("POST /v1/memories", body={"key": "preferred editor", "value": "helix"}),
        201,
    )
    assert first["duplicateOf"] is None
    second = ok(
        world.call("POST /v1/memories", body={"key": "editor of choice", "value": "helix"}),
        201,
    )
    assert second["duplicateOf"] == {"id": first["id"], "key": "preferred editor"}
    bobs = ok(
        world.call("POST /v1/memories", body={"key": "editor", "value": "helix"}, user="bob"), 201
    )

    for into in (bobs["id"], "", second["id"]):
        res = world.call(
            "POST /v1/memories/{id}/merge", path={"id": second["id"]}, body={"into": into}
        )
        assert res.status == 422, res.body
        assert res.body["error"]["details"][0]["field"] == "into", res.body
    stale = world.call(
        "POST /v1/memories/{id}/merge",
        path={"id": second["id"]},
        body={"into": first["id"]},
        headers={"if-match": '"7"'},
    )
    assert stale.status == 412, stale.body

    merged = ok(
        world.call(
            "POST /v1/memories/{id}/merge",
            path={"id": second["id"]},
            body={"into": first["id"]},
            headers={"if-match": f'"{second["version"]}"'},
        )
    )
    assert (merged["id"], merged["key"], merged["version"]) == (first["id"], "preferred editor", 2)
    assert world.call("GET /v1/memories/{id}", path={"id": second["id"]}).status == 404
    history = ok(world.call("GET /v1/memories/{id}/history", path={"id": first["id"]}))
    assert [(v["version"], v["key"]) for v in history["versions"]] == [
        (1, "editor of choice"),
        (2, "preferred editor"),
    ]
    assert history["actions"][-1]["action"] == "merge"
    url = world.settings.database_url
    assert url is not None
    with psycopg.connect(url) as conn:
        [(detail,)] = conn.execute(
            "SELECT detail FROM event_outbox WHERE event_type = 'memory.merged'"
        ).fetchall()
    assert (detail["memoryId"], detail["intoId"], detail["status"]) == (
        second["id"],
        first["id"],
        None,
    )
    assert not {"key", "value"} & set(detail)
