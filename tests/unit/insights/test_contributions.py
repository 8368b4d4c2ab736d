"""A user's contribution to team insights: tool and domain facts at their current confidence,
expired ones left out; identities read back into team and user."""

from __future__ import annotations

import pytest
from tests.support.facts import make_fact

from engram.behaviour.models import Fact, FactCategory
from engram.identity import identity_id_for, parse_identity_id
from engram.insights.models import Contribution, contributions


def fact(category: FactCategory, name: str) -> Fact:
    return make_fact(f"{category.value}:{name}", identity="acme:alice", content="-")


def test_tools_and_domains_count_at_their_current_confidence_and_expired_ones_do_not() -> None:
    facts = [
        fact(FactCategory.TOOL_AFFINITY, "run_sql"),
        fact(FactCategory.TOOL_AVOIDANCE, "get_account"),
        fact(FactCategory.DOMAIN_PREFERENCE, "finance"),
        fact(FactCategory.ENTITY_FREQUENCY, "account:A-1"),  # entities are never aggregated
        fact(FactCategory.TOOL_AFFINITY, "old_tool"),
    ]
    got = contributions(facts, [0.9, 0.4, 0.3, 0.8, 0.05], threshold=0.1)
    assert got == [
        Contribution("tool_affinity", "run_sql", 0.9),
        Contribution("tool_avoidance", "get_account", 0.4),
        Contribution("domain_preference", "finance", 0.3),
    ]


@pytest.mark.parametrize(
    ("team", "user"), [("acme", "alice"), ("acme:eu", "bob"), ("acme", "eu:bob"), ("a%3A", "{x}%")]
)
def test_an_identity_reads_back_into_its_team_and_user(team: str, user: str) -> None:
    assert parse_identity_id(identity_id_for(team, user)) == (team, user)


@pytest.mark.parametrize("bad", ["", "acme", ":alice", "acme:", "a:b:c"])
def test_other_strings_are_no_identity(bad: str) -> None:
    assert parse_identity_id(bad) is None
