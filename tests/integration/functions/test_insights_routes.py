"""Team insights through the API: what users learnt (ingest, session start) is aggregated by
the maintenance job; a row appears only with enough distinct users of the caller's team,
erasure removes a user's contribution at the next aggregation, and only team admins read."""

from __future__ import annotations

from typing import Any

from tests.integration.functions.conftest import Stack

from engram.bootstrap.maintenance import build_maintenance_job

ADMIN = ("engram-team-admins",)


def learn(stack: Stack, user: str, *, team: str = "acme", tool: str, domain: str) -> None:
    """One session's worth of behaviour: a successful call of ``tool``, a query in ``domain``,
    then the next session start consolidates them into facts."""
    body = {
        "observations": [
            {
                "type": "tool_success",
                "content": "ok",
                "metadata": {"toolName": tool, "durationMs": 5},
            },
            {"type": "query_pattern", "content": "q", "metadata": {"query": "q", "domain": domain}},
        ]
    }
    assert stack.call("POST /v1/observations", body=body, user=user, team=team).status == 202
    stack.deliver()
    assert stack.call("POST /v1/sessions", body={}, user=user, team=team).status == 200


def aggregate(stack: Stack) -> None:
    report = build_maintenance_job(stack.container, schedule="daily").run()
    assert report.tasks["insights"].completed_cycle, report.tasks["insights"]


def tools(stack: Stack, team: str = "acme") -> dict[str, Any]:
    res = stack.call("GET /v1/insights/tools", user="root", team=team, groups=ADMIN)
    assert res.status == 200, res.body
    return {row["tool"]: row for row in res.body["tools"]}


def domains(stack: Stack, team: str = "acme") -> dict[str, Any]:
    res = stack.call("GET /v1/insights/domains", user="root", team=team, groups=ADMIN)
    assert res.status == 200, res.body
    return {row["domain"]: row for row in res.body["domains"]}


def test_five_users_of_a_team_make_a_row_four_do_not_and_other_teams_do_not_count(
    stack: Stack,
) -> None:
    for i in range(5):
        learn(stack, f"u{i}", tool="run_sql", domain="finance")
    for i in range(4):
        learn(stack, f"v{i}", tool="get_account", domain="music")
    learn(stack, "w0", team="other", tool="get_account", domain="music")  # not acme's
    aggregate(stack)

    rows = tools(stack)
    assert set(rows) == {"run_sql"}
    row = rows["run_sql"]
    assert (row["users"], row["usersWithAffinity"], row["usersWithAvoidance"]) == (5, 5, 0)
    assert 0 < row["meanAffinityConfidence"] <= 1
    assert row["meanAvoidanceConfidence"] is None
    assert set(domains(stack)) == {"finance"}
    body = stack.call("GET /v1/insights/tools", user="root", groups=ADMIN).body
    assert body["minUsers"] == 5
    assert body["aggregatedAt"] > 0
    # the other team has only one user: nothing to show there either
    assert tools(stack, team="other") == {}


def test_after_one_of_the_five_is_erased_the_next_aggregation_drops_the_row(
    stack: Stack,
) -> None:
    for i in range(5):
        learn(stack, f"u{i}", tool="run_sql", domain="finance")
    aggregate(stack)
    assert set(tools(stack)) == {"run_sql"}
    assert stack.call("DELETE /v1/me", user="u3").status == 200
    assert set(tools(stack)) == {"run_sql"}  # published figures change only when aggregated
    aggregate(stack)
    assert tools(stack) == {}
    assert domains(stack) == {}


def test_only_team_admins_read_their_team_s_insights(stack: Stack) -> None:
    for route in ("GET /v1/insights/tools", "GET /v1/insights/domains"):
        res = stack.call(route, user="alice")
        assert res.status == 403, res.body
        assert res.body["error"]["code"] == "forbidden"
        assert stack.call(route, user=None).status == 401
