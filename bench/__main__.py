"""``python -m bench [names...]``: run every (or the named) ``bench/bench_*.py`` module.

A name is the part after ``bench_`` (``consolidation``) or the module name itself. Each
module's ``run(results_dir)`` returns a JSON-able dict; it is written, with the machine it ran
on, to ``bench/results/<name>.json``. Exit status 1 if any benchmark raised.

``ENGRAM_BENCH_QUICK=1`` is a smoke run: the benchmarks that know it do fewer, smaller
repetitions, and the sizes the others read default to small values (``QUICK_DEFAULTS``; a
variable already set in the environment wins).
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

#: Environment defaults of quick mode (each read by the benchmark named in the comment).
QUICK_DEFAULTS: dict[str, str] = {
    "ENGRAM_BENCH_RECALL_SIZES": "10000,100000",  # bench_recall
    "ENGRAM_BENCH_RECALL_QUERIES": "200",  # bench_recall, bench_recall_curve
    "ENGRAM_BENCH_IMPORT_RUNS": "3",  # bench_handlers
    "ENGRAM_BENCH_SESSIONS": "50",  # bench_handlers
    "ENGRAM_BENCH_BEHAVIOUR_USERS": "40",  # bench_behaviour
    "ENGRAM_BENCH_QUALITY_CONVERSATIONS": "1",  # bench_quality
    "ENGRAM_BENCH_QUOTA_SAVES": "30",  # bench_quota
    "ENGRAM_BENCH_DUPLICATES_ROWS": "1000",  # bench_duplicates
    "ENGRAM_BENCH_DUPLICATES_SAVES": "50",  # bench_duplicates
}


def apply_quick_defaults(environ: dict[str, str] | None = None) -> dict[str, str]:
    """With ``ENGRAM_BENCH_QUICK=1``, set the quick sizes the environment does not already
    set; returns what was set."""
    env = os.environ if environ is None else environ
    if env.get("ENGRAM_BENCH_QUICK") != "1":
        return {}
    applied = {k: v for k, v in QUICK_DEFAULTS.items() if k not in env}
    for key, value in applied.items():
        env.setdefault(key, value)
    return applied


def discover() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    available = discover()
    if args and args[0] in {"-h", "--help"}:
        print(__doc__)
        print("available:", ", ".join(available))
        return 0
    wanted = [a.removeprefix("bench_") for a in args] or available
    unknown = [w for w in wanted if w not in available]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}")
        return 2
    quick = apply_quick_defaults()
    if quick:
        print("quick mode:", ", ".join(f"{k}={v}" for k, v in quick.items()), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in wanted:
        print(f"== bench {name}", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"bench.bench_{name}")
            result = module.run(RESULTS)
        except Exception:
            traceback.print_exc()
            failed += 1
            continue
        record = {
            "benchmark": name,
            "ranAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - started, 1),
            "machine": machine(),
            **result,
        }
        if os.environ.get("ENGRAM_BENCH_QUICK") == "1":
            record.setdefault("quick", True)  # the report marks the section as quick
        tmp = RESULTS / f"{name}.json.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
        tmp.replace(RESULTS / f"{name}.json")
        summary = result.get("summary")
        if summary:
            print(summary)
        print(f"   -> {RESULTS / (name + '.json')} ({record['seconds']} s)", flush=True)
    print(f"== report -> {importlib.import_module('bench.report').write_report(RESULTS)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
