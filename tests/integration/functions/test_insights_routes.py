"""Team insights through the API: what users learnt (ingest, session start) is aggregated by
the maintenance job; a row appears only with enough distinct users of the caller's team,
erasure removes a user's contribution at the next aggregation, and only team admins read."""

from __future__ import annotations

from typing import Any

import psycopg
from tests.integration.functions.conftest import Stack

from engram.bootstrap.maintenance import build_maintenance_job
from engram.insights.models import Contribution

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


def test_a_user_erased_while_the_job_reads_their_facts_leaves_no_contribution(
    stack: Stack,
) -> None:
    """The job reads a user's facts, the user is erased, then the job writes: what it read
    before the erasure is not written after it (nor is anything of theirs left in the table)."""
    for i in range(5):
        learn(stack, f"u{i}", tool="run_sql", domain="finance")
    job = build_maintenance_job(stack.container, schedule="daily")
    assert job.facts is not None
    facts = job.facts
    erased: list[str] = []

    class ErasedWhileRead:
        def identity_page(self, cursor: str, limit: int) -> tuple[list[str], str]:
            return facts.identity_page(cursor, limit)

        def contributions(self, identity_id: str, now_ms: int) -> list[Contribution]:
            rows = facts.contributions(identity_id, now_ms)
            if identity_id.endswith(":u0"):
                assert stack.call("DELETE /v1/me", user="u0").status == 200
                erased.append(identity_id)
            return rows

    job.facts = ErasedWhileRead()
    assert job.run().tasks["insights"].completed_cycle
    assert erased == ["acme:u0"]
    assert stack.settings.database_url is not None
    with psycopg.connect(stack.settings.database_url) as conn:
        users = conn.execute(
            "SELECT DISTINCT user_id FROM insight_contributions WHERE team_id = 'acme'"
        ).fetchall()
    assert sorted(u for (u,) in users) == ["u1", "u2", "u3", "u4"]
    assert tools(stack) == {}  # four users are under the threshold of five
