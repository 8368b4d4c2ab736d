"""``rank_tools``: the caller's facts as the last session start left them, read once, never
consolidated by ranking, and ranking by scores alone when the behaviour store is down."""

from __future__ import annotations

from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.behaviour.commands import RankTools, ToolRan
from engram.behaviour.models import Fact
from engram.behaviour.service import BehaviourService
from engram.clock import FakeClock
from engram.identity import Caller
from engram.use_cases.tool_ranking import rank_tools

ALICE = Caller(user_id="alice", team_id="acme")
CATALOGUE = RankTools((("run_sql", 5.0), ("get_account", 4.5), ("search_docs", 4.2)))


def behaviour_with_outcomes(store: InMemoryBehaviourStore, clock: FakeClock) -> BehaviourService:
    behaviour = BehaviourService(store, clock=clock)
    events = [
        ToolRan(tool_name="run_sql", ok=False, duration_ms=900, error="timeout"),
        ToolRan(tool_name="get_account", ok=True, duration_ms=120),
    ]
    now = clock.now_ms()
    behaviour.record(
        ALICE.identity_id, behaviour.observations_from_events(ALICE.identity_id, events, now_ms=now)
    )
    return behaviour


def test_ranking_uses_the_facts_of_the_last_session_start() -> None:
    clock = FakeClock()
    behaviour = behaviour_with_outcomes(InMemoryBehaviourStore(clock=clock), clock)
    before = rank_tools(behaviour, ALICE, CATALOGUE)  # recorded, not yet consolidated
    assert [t.name for t in before.tools] == ["run_sql", "get_account", "search_docs"]
    assert {t.affinity for t in before.tools} == {0.0}

    behaviour.load(ALICE.identity_id)  # a session start consolidates
    ranked = rank_tools(behaviour, ALICE, CATALOGUE)
    assert ranked.degraded == []
    assert ranked.boost_factor == 2.0
    assert [(t.name, t.affinity) for t in ranked.tools] == [
        ("get_account", 0.5),
        ("search_docs", 0.0),
        ("run_sql", -0.5),
    ]
    assert [t.boosted_score for t in ranked.tools] == [5.5, 4.2, 4.0]


def test_ranking_does_not_reinforce_and_sees_decay() -> None:
    clock = FakeClock()
    store = InMemoryBehaviourStore(clock=clock)
    behaviour = behaviour_with_outcomes(store, clock)
    behaviour.load(ALICE.identity_id)
    facts: list[Fact] = store.get(ALICE.identity_id)
    for _ in range(3):
        rank_tools(behaviour, ALICE, CATALOGUE)
    assert store.get(ALICE.identity_id) == facts  # nothing written, nothing reinforced
    clock.advance(days=14)  # two weeks: about half the confidence is left
    later = {t.name: t.affinity for t in rank_tools(behaviour, ALICE, CATALOGUE).tools}
    assert 0.2 < later["get_account"] < 0.3
    assert -0.3 < later["run_sql"] < -0.2


class DownStore(InMemoryBehaviourStore):
    def get(self, identity_id: str) -> list[Fact]:
        raise ConnectionError("redis is down")


def test_a_store_down_ranks_by_score_alone_and_says_so() -> None:
    clock = FakeClock()
    ranked = rank_tools(BehaviourService(DownStore(clock=clock), clock=clock), ALICE, CATALOGUE)
    assert ranked.degraded == ["behaviour:unavailable"]
    assert [(t.name, t.affinity) for t in ranked.tools] == [
        (n, 0.0) for n, _ in CATALOGUE.candidates
    ]
