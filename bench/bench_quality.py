"""Recall quality on LoCoMo's turn-retrieval task, through the real HTTP API (``bench/quality``).

``make eval`` runs this benchmark alone; ``make bench`` runs it with the others. Env:
``ENGRAM_BENCH_QUALITY_DATA`` (a LoCoMo file or folder; default ``../shared/data/locomo-dev/``
from the repository root), ``ENGRAM_BENCH_QUALITY_CONFIGS`` (comma-separated names of
``bench/quality/configs.py``; default ``keyword``), ``ENGRAM_BENCH_QUALITY_CONVERSATIONS``
(use only the first N conversations; quick mode sets 1). Results:
``bench/results/quality.json`` and the report's "Recall quality" section.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.quality.configs import pick
from bench.quality.runner import evaluate

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = "../shared/data/locomo-dev/"
#: The targets of keyword recall on LoCoMo's development half.
TARGETS = {"R@10": 0.70, "MRR": 0.50}
#: A hybrid configuration's R@10 over keyword recall's, in the same run.
HYBRID_GAIN = 0.02


def run(results_dir: Path) -> dict[str, Any]:
    # a relative path is read from the repository root, whatever the working directory
    data = REPO / (os.environ.get("ENGRAM_BENCH_QUALITY_DATA") or DEFAULT_DATA)
    # LoCoMo is not part of the repository: without it `make bench` skips this one and says so;
    # data asked for by name (`make eval`, ENGRAM_BENCH_QUALITY_DATA) must exist.
    if not data.exists() and not os.environ.get("ENGRAM_BENCH_QUALITY_DATA"):
        print(f"   skipped: no LoCoMo data at {os.path.relpath(data, REPO)} (see make eval)")
        return {"skipped": f"no LoCoMo data at {os.path.relpath(data, REPO)}"}
    configs = pick(os.environ.get("ENGRAM_BENCH_QUALITY_CONFIGS"))
    limit = os.environ.get("ENGRAM_BENCH_QUALITY_CONVERSATIONS")
    result = evaluate(data, configs, limit=int(limit) if limit else None)
    result["data"]["path"] = os.path.relpath(data, REPO)
    keyword = result["configs"].get("keyword")
    if keyword is not None:
        result["targets"] = {
            f"keyword_{metric}_at_least_{goal:.2f}": keyword["overall"][metric] >= goal
            for metric, goal in TARGETS.items()
        }
        for name, scored in result["configs"].items():
            if name.startswith("hybrid"):
                gain = scored["overall"]["R@10"] - keyword["overall"]["R@10"]
                result["targets"][f"{name}_R@10_{HYBRID_GAIN:.2f}_above_keyword"] = (
                    gain >= HYBRID_GAIN
                )
    lines = [
        f"   {len(result['data']['conversations'])} conversations, "
        f"{result['data']['questions']} questions ({result['data']['path']})"
    ]
    for name, scored in [*result["configs"].items(), ("baseline", result["baseline"])]:
        o = scored["overall"]
        ratio = scored.get("ratioToBaseline")
        lines.append(
            f"   {name:<9} R@5 {o['R@5']:.3f}  R@10 {o['R@10']:.3f}  R@20 {o['R@20']:.3f}  "
            f"MRR {o['MRR']:.3f}  query p50 {scored['queryMs']['p50']} ms"
            + (f"  (x{ratio['R@10']} R@10, x{ratio['MRR']} MRR of baseline)" if ratio else "")
        )
    if "targets" in result:
        lines.append("   targets: " + ", ".join(f"{k}={v}" for k, v in result["targets"].items()))
    result["summary"] = "\n".join(lines)
    return result
