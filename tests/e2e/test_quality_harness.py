"""The recall-quality harness end to end on a hand-written fixture conversation: a real
``engram serve`` on its own embedded PostgreSQL, indexed and queried over HTTP, and the
plain-SQL baseline on the same rows, scored as computed by hand."""

from __future__ import annotations

from pathlib import Path

from bench.quality.configs import CONFIGS
from bench.quality.runner import evaluate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "locomo-tiny.json"


def test_the_harness_scores_the_fixture_through_the_service_and_the_baseline() -> None:
    result = evaluate(FIXTURE, [CONFIGS["keyword"]], log=lambda line: None)
    assert result["data"]["memories"] == 6
    assert result["data"]["questions"] == 6
    assert result["data"]["skippedQuestions"] == 1
    assert result["data"]["droppedEvidence"] == {"tiny-1": ["D9:9", "D"]}
    keyword = result["configs"]["keyword"]
    assert keyword["index"]["created"] == 6
    assert keyword["throttled"]["responses"] == 0
    assert keyword["settings"]["ENGRAM_MAX_MEMORIES_PER_USER"] == "100000"
    # every question but "Which instrument does she play?" shares a word with only its own
    # evidence turn (rank 1); that one shares no word with any turn (not found): 5 of 6
    ranks = "1 1 1 - 1 1"
    assert result["details"]["ranks"]["keyword"] == {"tiny-1": ranks}
    assert result["details"]["ranks"]["baseline"] == {"tiny-1": ranks}
    five_of_six = {"n": 6, "R@5": 0.8333, "R@10": 0.8333, "R@20": 0.8333, "MRR": 0.8333}
    assert keyword["overall"] == five_of_six
    assert result["baseline"]["overall"] == five_of_six
    assert keyword["byCategory"]["3"] == {"n": 1, "R@5": 0.0, "R@10": 0.0, "R@20": 0.0, "MRR": 0.0}
    assert keyword["ratioToBaseline"] == {"R@5": 1.0, "R@10": 1.0, "R@20": 1.0, "MRR": 1.0}
    assert keyword["queryMs"]["n"] == 6
    assert result["baseline"]["queryMs"]["n"] == 6
