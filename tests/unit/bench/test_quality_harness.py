"""The recall-quality harness's pure parts: LoCoMo loading (evidence repair) and the metrics,
on a hand-written fixture conversation and hand-computed rankings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.quality.configs import CONFIGS, pick
from bench.quality.locomo import evidence_keys, load
from bench.quality.metrics import Outcome, first_rank, summarise
from bench.quality.report import section
from bench.report import _table

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "locomo-tiny.json"


def test_the_fixture_becomes_memories_and_retrieval_questions() -> None:
    [conv] = load(FIXTURE)
    assert conv.sample_id == "tiny-1"
    assert [m.key for m in conv.memories] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    assert conv.memories[0].value == (
        "[10:00 am on 1 May, 2023] Ana: I adopted a greyhound named Pixel last weekend."
    )
    assert (
        conv.memories[3].value == "[9:00 pm on 3 June, 2023] Ben: My cello teacher moved to Lisbon."
    )
    # the adversarial question is no retrieval question; the one whose evidence names no turn
    # is skipped; "D1:1; D2:2" is split and "D:2:02" repaired
    assert [(q.category, sorted(q.evidence)) for q in conv.questions] == [
        (4, ["D1:1"]),
        (2, ["D2:3"]),
        (1, ["D2:1"]),
        (3, ["D1:2"]),
        (1, ["D1:1", "D2:2"]),
        (2, ["D2:2"]),
    ]
    assert conv.skipped_questions == 1
    assert conv.dropped_evidence == ["D9:9", "D"]


def test_evidence_ids_are_repaired_or_dropped_by_one_rule() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    assert evidence_keys("D8:6; D9:17", known) == (["D8:6", "D9:17"], [])
    assert evidence_keys("D:11:26", known) == (["D11:26"], [])
    assert evidence_keys("D30:05", known) == (["D30:5"], [])
    assert evidence_keys("D", known) == ([], ["D"])
    assert evidence_keys("D10:19", known) == ([], ["D10:19"])


def test_folder_of_flattened_conversations_and_a_list_file_load_alike(tmp_path: Path) -> None:
    sample = json.loads(FIXTURE.read_text())[0]
    flat = {**sample["conversation"], "qa": sample["qa"]}
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "conv-a.json").write_text(json.dumps(flat))
    (folder / "conv-b.json").write_text(json.dumps(flat))
    a, b = load(folder)
    assert (a.sample_id, b.sample_id) == ("conv-a", "conv-b")
    [from_list] = load(FIXTURE)
    assert a.memories == from_list.memories
    assert a.questions == from_list.questions


def test_a_missing_path_says_where_the_data_comes_from(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="snap-research/locomo"):
        load(tmp_path / "nowhere")


def test_metrics_on_hand_computed_rankings() -> None:
    filler = [f"x{i}" for i in range(30)]

    def ranked(evidence_at: dict[str, int]) -> list[str]:
        out = list(filler)
        for key, position in sorted(evidence_at.items(), key=lambda kv: kv[1]):
            out.insert(position - 1, key)
        return out

    cases = [
        (1, {"e1": 3}, {"e1"}),  # rank 3
        (1, {"e1": 7}, {"e1"}),  # rank 7
        (2, {"e1": 15}, {"e1"}),  # rank 15
        (2, {"e1": 25}, {"e1"}),  # beyond the depth of 20: not found
        (4, {"e2": 2, "e3": 1}, {"e2", "e3"}),  # the first of two evidence turns: rank 1
    ]
    ranks = [first_rank(ranked(at), relevant) for _, at, relevant in cases]
    assert ranks == [3, 7, 15, None, 1]
    scored = summarise([Outcome(c, r) for (c, _, _), r in zip(cases, ranks, strict=True)])
    # R@5 = {3, 1} of 5; R@10 = {3, 7, 1}; R@20 = {3, 7, 15, 1}; MRR = (1/3+1/7+1/15+0+1)/5
    assert scored["overall"] == {"n": 5, "R@5": 0.4, "R@10": 0.6, "R@20": 0.8, "MRR": 0.3086}
    assert scored["byCategory"] == {
        "1": {"n": 2, "R@5": 0.5, "R@10": 1.0, "R@20": 1.0, "MRR": 0.2381},
        "2": {"n": 2, "R@5": 0.0, "R@10": 0.0, "R@20": 0.5, "MRR": 0.0333},
        "4": {"n": 1, "R@5": 1.0, "R@10": 1.0, "R@20": 1.0, "MRR": 1.0},
    }
    assert first_rank([], {"e1"}) is None


def test_configurations_are_picked_by_name() -> None:
    assert [c.name for c in pick(None)] == ["keyword", "hybrid-local", "hybrid-minilm"]
    assert [c.name for c in pick("keyword, keyword")] == ["keyword"]
    assert CONFIGS["keyword"].env == {"ENGRAM_EMBEDDER": "none"}
    with pytest.raises(ValueError, match="unknown configuration"):
        pick("keyword,nonsense")


def test_the_report_section_shows_every_configuration_beside_the_baseline() -> None:
    def scored(r10: float, mrr: float) -> dict[str, object]:
        overall = {"n": 4, "R@5": 0.5, "R@10": r10, "R@20": 0.75, "MRR": mrr}
        return {
            "overall": overall,
            "byCategory": {"2": {**overall, "n": 4}},
            "perConversation": {"c1": overall},
            "queryMs": {"p50": 4.5, "p99": 9.25, "n": 4},
        }

    quality = {
        "data": {
            "path": "data",
            "conversations": ["c1"],
            "memories": 10,
            "questions": 4,
            "skippedQuestions": 0,
        },
        "configs": {
            "keyword": {
                **scored(0.75, 0.625),
                "ratioToBaseline": {"R@10": 1.5, "MRR": 1.25},
                "index": {"seconds": 1.5},
                "settings": {"ENGRAM_EMBEDDER": "none"},
                "throttled": {"responses": 0},
            },
            "hybrid": {
                **scored(1.0, 0.875),
                "ratioToBaseline": {"R@10": 2.0, "MRR": 1.75},
                "index": {"seconds": 2.5},
                "settings": {"ENGRAM_EMBEDDER": "local"},
                "throttled": {"responses": 3},
            },
        },
        "baseline": scored(0.5, 0.5),
        "targets": {"keyword_R@10_at_least_0.70": True},
    }
    text = "\n".join(section(quality, "_Source: here._", _table))
    assert "| keyword | 0.5 | 0.75 | 0.75 | 0.625 | 1.5 | 1.25 | 1.5 | 4.5 | 9.25 |" in text
    assert "| hybrid | 0.5 | 1 | 0.75 | 0.875 | 2 | 1.75 | 2.5 | 4.5 | 9.25 |" in text
    assert "| baseline (plain SQL) | 0.5 | 0.5 | 0.75 | 0.5 | - | - | - | 4.5 | 9.25 |" in text
    assert "| 2 temporal | 4 | 0.75 | 1 | 0.5 |" in text
    assert "`ENGRAM_EMBEDDER=local`; 429s met: 3." in text
    assert "keyword_R@10_at_least_0.70 = True" in text
    assert section(None, "", _table)[-2] == "_Not measured in this run._"


def test_make_bench_skips_quality_without_data_but_make_eval_insists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import bench_quality

    monkeypatch.delenv("ENGRAM_BENCH_QUALITY_DATA", raising=False)
    monkeypatch.setattr(bench_quality, "DEFAULT_DATA", str(tmp_path / "absent"))
    assert "no LoCoMo data" in bench_quality.run(tmp_path)["skipped"]
    monkeypatch.setenv("ENGRAM_BENCH_QUALITY_DATA", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError):
        bench_quality.run(tmp_path)
