"""Versions through ``engram serve`` as clients meet them: a memory saved over HTTP, by a
provider's tool call (``POST /v1/tools/memory_save?format=anthropic``) and by the ``mcp``
SDK's own client over Streamable HTTP; its history, a restore, what was true when, one key
however it is spelt, and the refusals, each naming what is wrong and changing nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from tests.e2e.harness import LocalEngram, Tenant
from tests.e2e.test_mcp_http import mcp_session, structured


def mcp_save(service: LocalEngram, token: str, key: str, value: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with mcp_session(service, token) as session:
            saved: dict[str, Any] = structured(
                await session.call_tool("memory_save", {"key": key, "value": value})
            )
            return saved

    return asyncio.run(run())


def tool_save(http: httpx.Client, headers: dict[str, str], key: str, value: str) -> Any:
    block = {"type": "tool_use", "id": "toolu_01", "name": "memory_save"}
    answer = http.post(
        "/v1/tools/memory_save",
        params={"format": "anthropic"},
        json={**block, "input": {"key": key, "value": value}},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def later() -> int:
    """A moment after every write so far and before every write to come."""
    time.sleep(0.02)
    moment = int(time.time() * 1000)
    time.sleep(0.02)
    return moment


def test_three_surfaces_four_versions_a_restore_and_what_was_true_when(
    service: LocalEngram, tenant: Tenant
) -> None:
    token = service.token(tenant.user, tenant.team)
    headers = service.headers(token)
    with service.http() as http:
        first = http.post("/v1/memories", json={"key": "editor", "value": "vim"}, headers=headers)
        assert first.status_code == 201
        memory_id = first.json()["id"]
        http.post("/v1/memories", json={"key": "editor", "value": "emacs"}, headers=headers)
        between = later()
        tool_save(http, headers, "Editor", "helix")
        mcp_save(service, token, "editor", "zed")

        history = http.get(f"/v1/memories/{memory_id}/history", headers=headers).json()
        assert history["recordedFrom"] == 1
        assert history["nextCursor"] is None
        assert [
            (v["version"], v["value"], v["actorId"], v["actorKind"], v["surface"])
            for v in history["versions"]
        ] == [
            (1, "vim", tenant.user, "user", "api"),
            (2, "emacs", tenant.user, "user", "api"),
            (3, "helix", tenant.user, "user", "tool:anthropic"),
            (4, "zed", tenant.user, "user", "mcp"),
        ]
        ends = [v["validTo"] for v in history["versions"]]
        assert ends[:-1] == [v["validFrom"] for v in history["versions"][1:]]
        assert ends[-1] is None
        paged = http.get(
            f"/v1/memories/{memory_id}/history", params={"limit": 3}, headers=headers
        ).json()
        rest = http.get(
            f"/v1/memories/{memory_id}/history",
            params={"limit": 3, "cursor": paged["nextCursor"]},
            headers=headers,
        ).json()
        assert [v["version"] for v in paged["versions"] + rest["versions"]] == [1, 2, 3, 4]

        then = http.get(f"/v1/memories/{memory_id}", params={"asOf": between}, headers=headers)
        assert (then.json()["value"], then.headers["etag"]) == ("emacs", '"2"')
        recalled = http.get(
            "/v1/memories", params={"query": "editor", "asOf": between}, headers=headers
        ).json()
        assert [m["value"] for m in recalled["memories"]] == ["emacs"]
        now = http.get("/v1/memories", params={"query": "editor"}, headers=headers).json()
        assert [m["value"] for m in now["memories"]] == ["zed"]  # never a superseded value

        restored = http.post(
            f"/v1/memories/{memory_id}/restore",
            json={"version": 2},
            headers={**headers, "If-Match": '"4"'},
        )
        assert restored.status_code == 200, restored.text
        assert (restored.json()["value"], restored.json()["version"]) == ("emacs", 5)
        assert restored.headers["etag"] == '"5"'
        session = http.post("/v1/sessions", json={"query": "editor"}, headers=headers).json()
        assert "emacs" in session["sections"]["memories"]
        assert "zed" not in session["sections"]["memories"]


def test_four_spellings_through_three_surfaces_are_one_memory(
    service: LocalEngram, tenant: Tenant
) -> None:
    token = service.token(tenant.user, tenant.team)
    headers = service.headers(token)
    with service.http() as http:
        one = http.post(
            "/v1/memories", json={"key": "favourite editor", "value": "vim"}, headers=headers
        ).json()
        mcp_save(service, token, "favourite_editor", "emacs")
        tool_save(http, headers, "Favourite-Editor", "helix")
        again = http.post(
            "/v1/memories",
            json={"key": "ＦＡＶＯＵＲＩＴＥ EDITOR", "value": "zed"},
            headers=headers,
        )
        assert again.status_code == 200  # an update of the one memory, not a new one
        listed = http.get("/v1/memories/list", headers=headers).json()["memories"]
        assert [(m["id"], m["key"], m["value"]) for m in listed] == [
            (one["id"], "favourite editor", "zed")
        ]
        history = http.get(f"/v1/memories/{one['id']}/history", headers=headers).json()
        assert [v["surface"] for v in history["versions"]] == [
            "api",
            "mcp",
            "tool:anthropic",
            "api",
        ]


def test_refusals_name_the_field_and_change_nothing(service: LocalEngram, tenant: Tenant) -> None:
    headers = service.headers(service.token(tenant.user, tenant.team))
    with service.http() as http:
        saved = http.post("/v1/memories", json={"key": "tea", "value": "green"}, headers=headers)
        memory_id = saved.json()["id"]
        http.post("/v1/memories", json={"key": "tea", "value": "black"}, headers=headers)
        before = http.get(f"/v1/memories/{memory_id}/history", headers=headers).json()

        missing = http.post(
            f"/v1/memories/{memory_id}/restore", json={"version": 9}, headers=headers
        )
        assert missing.status_code == 404
        assert "version 9" in missing.json()["error"]["message"]
        stale = http.post(
            f"/v1/memories/{memory_id}/restore",
            json={"version": 1},
            headers={**headers, "If-Match": '"1"'},
        )
        assert stale.status_code == 412
        for bad in ("soon", "-5", str(int(time.time() * 1000) + 3_600_000), "1.5"):
            reads = ((f"/v1/memories/{memory_id}", {}), ("/v1/memories", {"query": "t"}))
            for path, extra in reads:
                answer = http.get(path, params={"asOf": bad, **extra}, headers=headers)
                assert answer.status_code == 422, (bad, path, answer.text)
                assert [d["field"] for d in answer.json()["error"]["details"]] == ["asOf"]
        for body in ({}, {"version": 0}, {"version": "two"}):
            answer = http.post(f"/v1/memories/{memory_id}/restore", json=body, headers=headers)
            assert answer.status_code == 422
            assert answer.json()["error"]["details"][0]["field"] == "version"
        bad_surface = http.post(
            "/v1/memories",
            json={"key": "tea", "value": "oolong"},
            headers={**headers, "X-Engram-Surface": "fax"},
        )
        assert bad_surface.status_code == 400
        assert "X-Engram-Surface" in bad_surface.text

        after = http.get(f"/v1/memories/{memory_id}/history", headers=headers).json()
        assert after == before
        assert http.get(f"/v1/memories/{memory_id}", headers=headers).json()["value"] == "black"
