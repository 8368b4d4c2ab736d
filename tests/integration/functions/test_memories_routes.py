"""Every route of the memories function: happy paths and the main errors."""

from __future__ import annotations

from typing import Any

from tests.integration.functions.conftest import Stack

ADMIN = ("engram-team-admins",)


def save(stack: Stack, key: str = "editor", value: str = "helix", **kw: Any) -> Any:
    return stack.call(
        "POST /v1/memories", body={"key": key, "value": value, **kw.pop("body", {})}, **kw
    )


def test_memory_crud(stack: Stack) -> None:
    created = save(stack)
    assert created.status == 201
    memory = created.body
    assert (memory["scope"], memory["ownerId"], memory["status"]) == ("user", "alice", "active")
    assert isinstance(memory["createdAt"], int)
    updated = save(stack, value="vim")
    assert updated.status == 200
    assert updated.body["id"] == memory["id"]

    path = {"id": memory["id"]}
    got = stack.call("GET /v1/memories/{id}", path=path)
    assert got.status == 200
    assert got.body["value"] == "vim"
    patched = stack.call("PATCH /v1/memories/{id}", path=path, body={"value": "helix again"})
    assert patched.status == 200
    assert patched.body["value"] == "helix again"
    recalled = stack.call("GET /v1/memories", query="query=helix&maxResults=5")
    assert [m["id"] for m in recalled.body["memories"]] == [memory["id"]]
    archived = stack.call("POST /v1/memories/{id}/archive", path=path)
    assert archived.status == 200
    assert archived.body["status"] == "archived"
    assert stack.call("GET /v1/memories", query="query=helix").body["memories"] == []
    assert stack.call("DELETE /v1/memories/{id}", path=path).status == 204
    assert stack.call("GET /v1/memories/{id}", path=path).status == 404


def test_memory_errors(stack: Stack) -> None:
    memory = save(stack).body
    path = {"id": memory["id"]}
    for route in (
        "GET /v1/memories/{id}",
        "DELETE /v1/memories/{id}",
        "POST /v1/memories/{id}/archive",
    ):
        assert stack.call(route, path=path, user="bob").status == 404, route
    assert (
        stack.call("PATCH /v1/memories/{id}", path=path, user="bob", body={"value": "x"}).status
        == 404
    )
    assert stack.call("GET /v1/memories/{id}", path=path, team="other").status == 404
    bad = stack.call("POST /v1/memories", body={"key": "k", "value": "v", "confidence": 2})
    assert bad.status == 422
    assert bad.body["error"]["details"][0]["field"] == "confidence"
    assert stack.call("POST /v1/memories", body={"key": "k" * 101, "value": "v"}).status == 422
    assert stack.call("PATCH /v1/memories/{id}", path=path, body={}).status == 422
    assert stack.call("GET /v1/memories", query="maxResults=0").status == 422
    assert stack.call("GET /v1/memories", query="bogus=1").status == 422
    assert stack.call("GET /v1/memories/{id}", path={"id": "not-a-uuid"}).status == 404
    listed = stack.call("GET /v1/memories", query="query=").body["memories"]
    assert [m["key"] for m in listed] == ["editor"]  # nothing else was stored


def test_tools(stack: Stack) -> None:
    tools = stack.call("GET /v1/tools")
    assert tools.status == 200
    assert {t["name"] for t in tools.body["tools"]} == {"memory_save", "memory_recall"}
    assert all(t["inputSchema"]["type"] == "object" for t in tools.body["tools"])
    saved = stack.call(
        "POST /v1/tools/{name}",
        path={"name": "memory_save"},
        body={"arguments": '{"key": "deploys", "value": "Kubernetes"}'},
    )
    assert saved.status == 200
    assert saved.body["result"]["ok"] is True
    assert saved.body["result"]["created"] is True
    recalled = stack.call(
        "POST /v1/tools/{name}",
        path={"name": "memory_recall"},
        body={"arguments": {"query": "deploys"}},
    )
    assert [m["key"] for m in recalled.body["result"]["memories"]] == ["deploys"]
    assert "Kubernetes" in recalled.body["result"]["text"]
    assert stack.call("POST /v1/tools/{name}", path={"name": "rm_rf"}, body={}).status == 404
    bad = stack.call(
        "POST /v1/tools/{name}", path={"name": "memory_save"}, body={"arguments": {"key": "k"}}
    )
    assert bad.status == 422


def test_review_approve_and_reject(stack: Stack) -> None:
    one, two = stack.proposed("team", "platform"), stack.proposed("pet", "a cat", 0.7)
    assert stack.call("GET /v1/review").status == 403  # not an admin
    pending = stack.call("GET /v1/review", user="carol", groups=ADMIN)
    assert pending.status == 200
    assert {m["key"] for m in pending.body["memories"]} == {"team", "pet"}
    approved = stack.call(
        "POST /v1/review/{id}/approve", path={"id": one.id}, user="carol", groups=ADMIN
    )
    assert approved.status == 200
    assert approved.body["status"] == "active"
    rejected = stack.call(
        "POST /v1/review/{id}/reject", path={"id": two.id}, user="carol", groups=ADMIN
    )
    assert rejected.status == 200
    assert rejected.body["status"] == "rejected"
    again = stack.call(
        "POST /v1/review/{id}/reject", path={"id": two.id}, user="carol", groups=ADMIN
    )
    assert again.status == 409  # already decided
    assert again.body["error"]["code"] == "conflict"
    other_team = stack.call(
        "POST /v1/review/{id}/approve", path={"id": one.id}, user="dave", team="other", groups=ADMIN
    )
    assert other_team.status == 404
    keys = [m["key"] for m in stack.call("GET /v1/memories").body["memories"]]
    assert keys == ["team"]


def test_personas_and_team_settings(stack: Stack) -> None:
    body = {
        "allowedGroups": ["sales"],
        "memoryEnabled": False,
        "extraction": {"enabled": True, "prompt": "Find preferences."},
    }
    path = {"personaId": "p1"}
    assert stack.call("PUT /v1/personas/{personaId}", path=path, body=body).status == 403
    put = stack.call(
        "PUT /v1/personas/{personaId}", path=path, body=body, user="carol", groups=ADMIN
    )
    assert put.status == 200
    assert put.body["allowedGroups"] == ["sales"]
    assert put.body["memoryEnabled"] is False
    got = stack.call("GET /v1/personas/{personaId}", path=path, user="carol", groups=ADMIN)
    assert got.body["extraction"] == {"enabled": True, "prompt": "Find preferences."}
    assert (
        stack.call(
            "PUT /v1/personas/{personaId}",
            path=path,
            user="carol",
            groups=ADMIN,
            body={**body, "memoryEnabled": "no"},
        ).status
        == 422
    )

    assert stack.call("PUT /v1/settings/team", body={"memoryEnabled": False}).status == 403
    off = stack.call(
        "PUT /v1/settings/team", body={"memoryEnabled": False}, user="carol", groups=ADMIN
    )
    assert off.status == 200
    assert off.body == {**off.body, "teamId": "acme", "memoryEnabled": False}
    refused = save(stack)
    assert refused.status == 403
    assert refused.body["error"]["code"] == "memory_disabled"


def test_facts_list_and_forget(stack: Stack) -> None:
    stack.call("POST /v1/events", body={"events": [{"kind": "query", "text": "royalty please"}]})
    stack.deliver()
    stack.call("POST /v1/sessions", body={})
    facts = stack.call("GET /v1/facts")
    assert [f["id"] for f in facts.body["facts"]] == ["fact:domain_preference:royalty"]
    assert stack.call("GET /v1/facts", user="bob").body["facts"] == []
    path = {"factId": "fact:domain_preference:royalty"}
    assert stack.call("DELETE /v1/facts/{factId}", path=path, user="bob").status == 404
    assert stack.call("DELETE /v1/facts/{factId}", path=path).status == 204
    assert stack.call("GET /v1/facts").body["facts"] == []
    assert stack.call("DELETE /v1/facts/{factId}", path=path).status == 404


def test_session_combines_facts_and_memories(stack: Stack) -> None:
    save(stack)
    stack.call("POST /v1/events", body={"events": [{"kind": "query", "text": "royalty please"}]})
    stack.deliver()
    res = stack.call("POST /v1/sessions", body={"query": "editor"})
    assert res.status == 200
    sections = res.body["sections"]
    assert sections["facts"]
    assert "helix" in sections["memories"]
    assert res.body["prompt"] == sections["facts"] + "\n\n" + sections["memories"]
    assert [m["key"] for m in res.body["memories"]] == ["editor"]
    assert stack.call("POST /v1/sessions", body={"bogus": 1}).status == 422
    assert stack.call("POST /v1/sessions", body=None).status == 200
