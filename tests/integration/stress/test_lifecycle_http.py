"""The memory lifecycle over HTTP against the local server (real Redis + PostgreSQL): rejected is
its own status, a decided proposal answers 409 ``conflict``, ``GET /v1/memories/{id}/history``
(and the Python client's ``memory_history``) follows the visibility rules, and a quota refusal
is a 429 whose body names the quota and its limit."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from tests.integration.stress.conftest import Live
from tests.support.services import RedisTarget

from engram.client import EngramAPIError, EngramClient


def client(live: Live, user: str, *, team_admin: bool = False) -> EngramClient:
    return EngramClient(live.url, live.token(user, "acme", team_admin=team_admin), timeout=30)


def test_review_conflict_history_and_rejected_status(live: Live, migrated_url: str) -> None:
    assert live.app.container is not None
    memories = live.app.container.memories
    one = memories.jobs.propose("acme", "alice", None, "hobby", "chess", 0.8, "conv-1")
    two = memories.jobs.propose("acme", "alice", None, "editor", "vim", 0.8, "conv-1")
    assert one is not None
    assert two is not None
    with client(live, "root", team_admin=True) as admin, client(live, "alice") as alice:
        rejected = admin.reject(one.id)
        assert rejected["status"] == "rejected"
        with pytest.raises(EngramAPIError) as again:
            admin.approve(one.id)
        assert (again.value.status, again.value.code) == (409, "conflict")
        admin.approve(two.id)
        with pytest.raises(EngramAPIError) as late:
            admin.reject(two.id)
        assert (late.value.status, late.value.code) == (409, "conflict")

        trail = alice.memory_history(one.id)
        assert [(a["action"], a["actorId"]) for a in trail] == [("reject", "root")]
        assert trail[0]["before"]["status"] == "pending_review"
        assert trail[0]["after"]["status"] == "rejected"
        assert trail[0]["after"]["value"] == "chess"
        assert isinstance(trail[0]["at"], int)
        assert admin.memory_history(one.id) == trail  # a proposal the admin decided
        # the approved memory is now alice's own: the admin no longer sees its history
        assert [a["action"] for a in alice.memory_history(two.id)] == ["approve"]
        with pytest.raises(EngramAPIError) as hidden:
            admin.memory_history(two.id)
        assert (hidden.value.status, hidden.value.code) == (404, "not_found")
        with client(live, "bob") as bob, pytest.raises(EngramAPIError) as other:
            bob.memory_history(one.id)
        assert other.value.status == 404
    with psycopg.connect(migrated_url) as conn:
        assert conn.execute("SELECT count(*) FROM review_actions").fetchone() == (2,)


@pytest.mark.parametrize(
    ("setting", "quota"),
    [
        ("max_memories_per_team", "memoriesPerTeam"),
        ("max_memories_per_persona", "memoriesPerPersona"),
        ("max_memories_per_user", "memoriesPerUser"),
    ],
)
def test_quota_refusals_name_the_quota_and_its_limit(
    redis_target: RedisTarget,
    migrated_url: str,
    live_factory: Callable[..., Live],
    setting: str,
    quota: str,
) -> None:
    live = live_factory(redis_target, migrated_url, **{setting: 2})
    alice = live.user("alice", "acme")
    body = {"key": "a", "value": "1", "personaId": "made-up"}
    assert alice.post("/v1/memories", json=body).status_code == 201
    assert alice.post("/v1/memories", json={**body, "key": "b"}).status_code == 201
    over = alice.post("/v1/memories", json={**body, "key": "c"})
    assert over.status_code == 429
    error = over.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["details"] == {
        "quota": quota,
        "limit": 2,
        "setting": f"ENGRAM_{setting.upper()}",
    }
    assert quota in error["message"]
    assert int(over.headers["Retry-After"]) >= 1
    assert alice.post("/v1/memories", json={**body, "value": "9"}).status_code == 200
    with psycopg.connect(migrated_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (2,)
