"""Tool formats, tool ranking and the served OpenAPI document through ``engram serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually

from engram import limits
from engram.client import EngramAPIError

pytestmark = pytest.mark.e2e

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_openapi_is_served_without_a_token(service: LocalEngram) -> None:
    with service.http() as http:
        served = http.get("/v1/openapi.json")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/json")
    assert served.json() == json.loads(DOCUMENT.read_text(encoding="utf-8"))


def test_a_bad_format_is_422_naming_it(service: LocalEngram, tenant: Tenant) -> None:
    headers = service.headers(service.token(tenant.user, tenant.team))
    with service.http() as http:
        listed = http.get("/v1/tools", params={"format": "gemini"}, headers=headers)
        called = http.post(
            "/v1/tools/memory_recall",
            params={"format": "openai"},
            json={"arguments": {}},
            headers=headers,
        )
    for answer in (listed, called):
        assert answer.status_code == 422
        assert answer.json()["error"]["details"][0]["field"] == "format"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"candidates": []}, 422, "candidates"),
        ({}, 422, "candidates"),
        (
            {"candidates": [{"name": "a", "score": 1}, {"name": "a", "score": 2}]},
            422,
            "candidates.1.name",
        ),
        ({"candidates": [{"name": "a", "score": "1"}]}, 422, "candidates.0.score"),
        ({"candidates": [{"name": "a"}]}, 422, "candidates.0.score"),
        ({"candidates": [{"name": "a\u202eb", "score": 1}]}, 422, "candidates.0.name"),
        ({"candidates": [{"name": "a", "score": 1, "why": "x"}]}, 422, "candidates.0.why"),
        (
            {
                "candidates": [
                    {"name": f"t{i}", "score": 1} for i in range(limits.MAX_RANK_CANDIDATES + 1)
                ]
            },
            422,
            "candidates",
        ),
    ],
)
def test_rank_refuses_bad_input_naming_the_field(
    service: LocalEngram, tenant: Tenant, body: dict[str, Any], status: int, field: str
) -> None:
    engram = service.user_client(tenant.user, tenant.team)
    with pytest.raises(EngramAPIError) as err:
        engram.request("POST", "/v1/tools/rank", json=body)
    assert err.value.status == status
    assert err.value.details[0]["field"] == field


def test_rank_needs_a_token(service: LocalEngram) -> None:
    with service.http() as http:
        answer = http.post("/v1/tools/rank", json={"candidates": [{"name": "a", "score": 1}]})
    assert answer.status_code == 401


def test_ranking_with_the_callers_affinities(service: LocalEngram, tenant: Tenant) -> None:
    engram = service.user_client(tenant.user, tenant.team)
    good = [{"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 100}]
    bad = [{"kind": "tool", "toolName": "run_sql", "ok": False, "durationMs": 900, "error": "x"}]
    engram.post_events(good + bad)

    def learnt() -> dict[str, float] | None:  # a session start consolidates what was recorded
        affinities = dict(engram.start_session().tool_affinities)
        return affinities if {"get_account", "run_sql"} <= set(affinities) else None

    affinities = eventually(learnt)
    assert affinities["get_account"] > 0 > affinities["run_sql"]

    # a gap larger than 4 is never reordered, whatever the affinities
    far = engram.rank_tools({"run_sql": 9.0, "get_account": 4.9})
    assert far.names() == ["run_sql", "get_account"]
    # a smaller one is: avoidance pushes the failing tool below the one that works
    near = engram.rank_tools({"run_sql": 5.0, "get_account": 4.5, "search_docs": 4.2})
    assert near.names() == ["get_account", "search_docs", "run_sql"]
    by_name = {t.name: t for t in near.tools}
    assert by_name["search_docs"].affinity == 0.0
    for name, tool in by_name.items():
        expected = tool.score + near.boost_factor * affinities.get(name, 0.0)
        assert tool.boosted_score == pytest.approx(expected)
    assert near.boost_factor == 2.0
    assert near.degraded == []

    # another user's facts are not the caller's
    other = service.user_client(tenant.other_user, tenant.team)
    theirs = other.rank_tools({"run_sql": 5.0, "get_account": 4.5})
    assert [t.affinity for t in theirs.tools] == [0.0, 0.0]
