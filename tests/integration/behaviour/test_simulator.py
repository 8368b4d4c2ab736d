"""The behaviour simulator (``bench/behaviour``) on a tiny population against the real Redis
store: it drives Engram end to end, loses and doubles nothing, learns, and the same seed gives
the same numbers; the report section and its figures come out of its result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.behaviour.engine import UseCaseEngram
from bench.behaviour.experiment import Config, run_experiment
from bench.behaviour.world import WorldConfig
from bench.report import write_report
from tests.support.services import APP_PREFIX, RedisServer, redis_server

TINY = WorldConfig(seed=7, users=8, days=24, change_day=12, change_share=0.5)
CONFIGS = [Config("exponential", 2.0), Config("adaptive", 0.5)]


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """A server of the module's own: its runs are read back by several tests, and the shared
    ones are flushed between tests."""
    with redis_server() as own:
        yield own


@pytest.fixture(scope="module")
def results(server: RedisServer) -> tuple[dict[str, Any], dict[str, Any], str]:
    url = server.url
    first = run_experiment(url, TINY, CONFIGS, prefix=f"{APP_PREFIX}:simtest-a")
    second = run_experiment(url, TINY, CONFIGS[:1], prefix=f"{APP_PREFIX}:simtest-b")
    return first, second, url


def test_the_same_seed_gives_the_same_numbers(results: Any) -> None:
    first, second, _ = results
    assert json.loads(json.dumps(first, allow_nan=False)) == first  # strict JSON
    a, b = first["configs"][0], second["configs"][0]
    assert a["recordsDigest"] == b["recordsDigest"]
    for key in ("afterWeek", "firstWeek", "overall", "adaptation", "flaky", "byDay", "bySession"):
        assert a[key] == b[key]


def test_every_session_went_through_engram_and_it_learnt(results: Any, server: RedisServer) -> None:
    first, _, _ = results
    world = first["world"]
    assert world["users"] == 8
    assert world["sessions"] > 40
    facts_keys = server.target().key_names(f"{APP_PREFIX}:simtest-a0:facts:*")
    assert len(facts_keys) == 8  # every user has facts in the real store
    for row in first["configs"]:
        assert row["sessions"] == world["sessions"]
        assert row["observations"] > row["sessions"]  # stored == accepted is checked by the run
        week = row["afterWeek"]
        # no memory is the same catalogue ranking in every configuration
        assert week["top1"]["none"] == first["configs"][0]["afterWeek"]["top1"]["none"]
    reference = first["configs"][0]["afterWeek"]
    assert reference["top1"]["memory"]["mean"] > reference["top1"]["none"]["mean"]
    assert reference["ndcg5"]["memory"]["mean"] > reference["ndcg5"]["none"]["mean"]
    assert 0.5 < reference["promptPrecision"]["mean"] <= 1.0
    assert 0.3 < reference["promptRecall"]["mean"] <= 1.0
    (comparison,) = first["comparisons"]
    assert comparison["label"] == "adaptive ×0.5"
    # the first session knows nothing: memory and catalogue rank alike
    session_one = first["configs"][0]["bySession"][0]
    assert session_one["top1Memory"] == session_one["top1None"]


def test_the_session_view_is_what_engram_returned(results: Any) -> None:
    _, _, url = results
    engram = UseCaseEngram(url, prefix=f"{APP_PREFIX}:simtest-view", decay="exponential")
    try:
        engram.set_time(1_767_225_600_000)
        assert engram.start_session("u").facts == {}
        events = [
            {"kind": "query", "text": "royalty numbers please"},
            {"kind": "tool", "toolName": "royalty_report", "ok": True, "durationMs": 5},
            {"kind": "tool", "toolName": "royalty_search", "ok": False, "durationMs": 5},
        ]
        assert engram.record_events("u", events, "k1") == 3
        assert engram.record_events("u", events, "k1") == 3  # a retry: stored once
        engram.set_time(1_767_225_600_000 + 86_400_000)
        view = engram.start_session("u")
    finally:
        engram.close()
    assert engram.queue.stored == 3
    assert view.tool_affinities == {"royalty_report": 0.5, "royalty_search": -0.5}
    assert set(view.prompt_subjects) == {
        "tool_affinity:royalty_report",
        "tool_avoidance:royalty_search",
        "domain_preference:royalty",
    }
    assert view.degraded == ()


def test_the_report_has_the_behaviour_section_and_figures(results: Any, tmp_path: Path) -> None:
    first, _, _ = results
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    record = {"benchmark": "behaviour", "ranAt": "2026-11-30T10:00:00+00:00", **first}
    (results_dir / "behaviour.json").write_text(json.dumps(record))
    report = write_report(results_dir).read_text()
    assert "## Does behavioural memory learn? (simulated users)" in report
    margin = first["configs"][0]["afterWeek"]["top1"]["margin"]
    assert f"{100 * margin['mean']:.1f} [{100 * margin['lo']:.1f}, {100 * margin['hi']:.1f}]" in (
        report
    )
    for name in ("behaviour_learning", "behaviour_days", "behaviour_configs"):
        assert f"figures/{name}.png" in report
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 1000
