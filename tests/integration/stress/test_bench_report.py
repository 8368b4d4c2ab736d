"""``bench.report.write_report``: REPORT.md, PNG figures and latest.json from result files,
every number taken from them, stale and quick runs flagged, missing benchmarks said so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import write_report

NOW = "2026-11-30T10:00:00+00:00"


def dist(p50: float, p99: float, n: int = 10) -> dict[str, float]:
    return {"p50": p50, "p99": p99, "n": n}


def results() -> dict[str, dict[str, Any]]:
    rate = {"median": 4321.5, "worst": 4000.0, "best": 4500.0}
    return {
        "session_curve": {
            "ranAt": NOW,
            "quick": True,
            "byPending": [
                {
                    "pendingObservations": p,
                    "facts": 200,
                    "sessionMs": dist(7.5, 11.25),
                    "degradedResponses": 0,
                }
                for p in (10, 100, 1000, 10000)
            ],
            "byFacts": [
                {
                    "pendingObservations": 100,
                    "facts": f,
                    "sessionMs": dist(8.5, 12.5),
                    "degradedResponses": 0,
                }
                for f in (10, 200, 1000)
            ],
            "httpFloorMs": dist(1.5, 2.5),
            "summary": "session summary",
        },
        "ingest": {
            "ranAt": NOW,
            "redis": {"version": "7.0.15"},
            "append": {"observationsPerSecond": rate, "batchMs": dist(0.2, 1.0)},
            "consumer": {"observationsPerSecond": rate, "batchMs": dist(1.6, 8.0)},
            "http": {"observationsPerSecond": rate, "requestMs": dist(50.0, 80.0)},
            "redisBenchmarkZadd": {
                "command": "redis-benchmark -t zadd -P 16 -q (50 clients)",
                "runs": 3,
                "zaddPerSecond": {"median": 654321.0, "worst": 600000.0, "best": 700000.0},
            },
            "load": {
                "clients": 8,
                "iterations": 40,
                "requests": 512,
                "seconds": 5.0,
                "requestsPerSecond": 102.4,
                "observationsPerSecond": 300.0,
                "errorCount": 0,
                "errors": {},
                "latencyMs": {"events": {"n": 320, "p50": 40.0, "p99": 90.0, "max": 99.0}},
                "reconciliation": {
                    "observationsConsolidated": 700,
                    "observationsPending": 260,
                    "memoriesFound": 80,
                    "deadLetters": 0,
                    "ok": True,
                },
            },
        },
        "recall": {
            "ranAt": "2026-11-29T09:00:00+00:00",  # a day older: not re-run
            "postgres": "18.4",
            "runs": [
                {
                    "size": s,
                    "engram_keyword": {"p50_ms": 1.25, "p99_ms": 3.5},
                    "floor_bare_sql_fts": {"p50_ms": 0.5, "p99_ms": 1.75},
                    "peer_langgraph_search": {"p50_ms": 1.125, "p99_ms": 3.0},
                    "ratio_keyword_p99_to_floor_p99": 2.0,
                    "ratio_keyword_p99_to_peer_p99": 1.17,
                }
                for s in (100_000, 1_000_000)
            ],
        },
    }


def test_report_from_result_files(tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    for name, data in results().items():
        (results_dir / f"{name}.json").write_text(json.dumps(data))

    report = write_report(results_dir)

    assert report == tmp_path / "REPORT.md"
    text = report.read_text()
    assert "## Machine" in text
    assert "7.0.15" in text  # Redis version from the results
    assert "18.4" in text  # PostgreSQL version from the results
    assert "4,322" in text or "4,321" in text  # a throughput median, from the file
    assert "0.007" in text  # its ratio to the ZADD floor (4321.5 / 654321)
    assert "**quick mode**" in text
    assert "**not re-run in this run**" in text  # recall.json is a day older than the rest
    assert "## Handler cold-import times\n\n_Not measured in this run._" in text
    assert "**Note:**" not in text  # the HTTP floor is sane here: no Nagle note
    for png in ("session_vs_pending", "session_vs_facts", "ingest_throughput", "recall_vs_corpus"):
        path = tmp_path / "figures" / f"{png}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(figures/{png}.png)" in text
    assert not (tmp_path / "figures" / "handler_imports.png").exists()

    latest = json.loads((results_dir / "latest.json").read_text())
    assert set(latest["results"]) == {"session_curve", "ingest", "recall"}
    assert latest["machine"]["cores"] >= 1
    assert latest["results"]["ingest"]["append"]["observationsPerSecond"]["median"] == 4321.5

    write_report(results_dir)  # latest.json is not read back as a benchmark
    again = json.loads((results_dir / "latest.json").read_text())
    assert set(again["results"]) == {"session_curve", "ingest", "recall"}
