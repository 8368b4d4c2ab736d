"""A/B of two revisions of the code, alternating, with an A/A spread: ``python -m bench.ab OLD
[NEW]``.

Each side is a checkout of its revision (``git worktree`` in a scratch folder; ``NEW`` left out
is this working tree) and runs in a process of its own, importing that checkout's ``engram``,
``functions`` and ``bench`` (so each side is measured by its own harness), over a private
``redis-server`` and, for sessions, an embedded PostgreSQL. Runs alternate ``A B A B … A``, so
both sides meet the same load on a shared machine, and the spread of the A runs among
themselves (A/A) says how much a number moves with no change of code at all.

Measured per run:

* session start (``POST /v1/sessions`` through the local service, ``bench_session_curve``'s
  harness): p50 and p99 at 100 and 1,000 pending observations over 200 facts, and at 100
  pending over 1,000 facts;
* ingest consumer throughput (``bench_ingest.bench_batches``): observations per second through
  ``functions.ingest_consumer.handler`` at batches of 100.

The verdict for each number: NEW's median over the A runs' median; whether NEW's median lies
within the A/A range (min to max of the A runs); and whether it is no worse than the worst A
run (a latency no higher, a rate no lower). Written to
``bench/results/ab.json`` and printed.

Not a ``bench_*`` module: ``python -m bench`` does not run it (it needs two revisions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

#: the session points: (pending observations, facts)
SESSION_POINTS = ((100, 200), (1_000, 200), (100, 1_000))
CONSUMER_BATCH = 100


# --- one side's run (in its own process, importing its own checkout) ----------------------
def _side() -> dict[str, Any]:
    """Run in the child: the session points and the consumer, with this checkout's harness."""
    import uuid

    import redis

    from bench import bench_ingest, bench_session_curve
    from bench.bench_consolidation import redis_url
    from bench.local import embedded_postgres, serve
    from engram.adapters.redis_behaviour import RedisBehaviourStore
    from engram.bootstrap import set_container

    repeats = int(os.environ.get("ENGRAM_BENCH_AB_SESSIONS", "40"))
    bench_session_curve.repeats = lambda pending: repeats  # type: ignore[assignment]
    out: dict[str, Any] = {}
    with (
        embedded_postgres("engram-bench-ab-") as (database_url, root),
        redis_url() as url,
    ):
        prefix = f"ab{uuid.uuid4().hex[:6]}"
        served = serve(url, prefix, root, database_url=database_url, consolidation_budget_ms=5_000)
        client = redis.Redis.from_url(url, socket_timeout=30)
        store = RedisBehaviourStore(client, prefix=prefix)
        try:
            for pending, facts in SESSION_POINTS:
                bench_session_curve.PENDING = (pending,)
                bench_session_curve.BASE_FACTS = facts
                bench_session_curve.FACTS = ()
                by_pending, _, _ = bench_session_curve.measure(
                    served.service.url, served.signer, store
                )
                out[f"session {pending} pending / {facts} facts"] = by_pending[0]["sessionMs"]
        finally:
            served.service.stop()
            set_container(None)
            client.close()
        bench_ingest.BATCHES = (CONSUMER_BATCH,)
        n = int(os.environ.get("ENGRAM_BENCH_AB_OBSERVATIONS", "20000"))
        batches = bench_ingest.bench_batches(url, n, 3)
        rate = batches[str(CONSUMER_BATCH)]["consumer"]["observationsPerSecond"]["median"]
        out[f"consumer obs/s at {CONSUMER_BATCH}"] = {"rate": rate}
    return out


def tree_env(tree: Path) -> dict[str, str]:
    """The environment of a child process that imports the checkout at ``tree``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "shared")])
    env.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    env.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    env.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    return env


def child_result(done: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    """The JSON a child printed on its ``RESULT`` line; its output when it printed none."""
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line.removeprefix("RESULT ")))
    raise RuntimeError(f"{what} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def run_in_tree(tree: Path, script: Path, function: str) -> dict[str, Any]:
    """``function`` of ``script`` (no arguments, returning JSON) run in a child process that
    imports the checkout at ``tree`` (its ``engram``, ``functions`` and ``bench``)."""
    code = (
        "import json, runpy; "
        f"run = runpy.run_path({str(script.resolve())!r})[{function!r}]; "
        "print('RESULT ' + json.dumps(run()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    return child_result(done, f"{function} at {tree}")


def _run_side(tree: Path) -> dict[str, Any]:
    return run_in_tree(tree, Path(__file__), "_side")


def checkout(rev: str, path: Path) -> Path:
    """A detached ``git worktree`` of ``rev`` at ``path``."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
        check=True,
        capture_output=True,
    )
    return path


def remove(tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
        check=False,
        capture_output=True,
    )


# --- the comparison -------------------------------------------------------------------------
def _values(run: dict[str, Any]) -> dict[str, float]:
    """Every number of a run, flat: ``"<point> p50"``, ``"<point> p99"``, ``"<point> rate"``."""
    return {
        f"{name} {stat}": float(value)
        for name, stats in run.items()
        for stat, value in stats.items()
        if stat in ("p50", "p99", "rate")
    }


def compare(a_runs: list[dict[str, Any]], b_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per number: the A runs (min, median, max), B's median, B/A and whether B's median lies
    within the A/A range."""
    a_values = [_values(r) for r in a_runs]
    b_values = [_values(r) for r in b_runs]
    out: dict[str, Any] = {}
    for name in a_values[0]:
        a = [v[name] for v in a_values]
        b = [v[name] for v in b_values]
        a_med, b_med = statistics.median(a), statistics.median(b)
        out[name] = {
            "aRuns": a,
            "bRuns": b,
            "aaSpread": round(max(a) / min(a), 3) if min(a) else None,
            "bOverA": round(b_med / a_med, 3) if a_med else None,
            "withinAA": min(a) <= b_med <= max(a),
            # a latency no higher, a rate no lower, than the worst A run
            "noWorseThanAA": b_med >= min(a) if name.endswith("rate") else b_med <= max(a),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("old", help="the A revision (the code before the change)")
    parser.add_argument("new", nargs="?", help="the B revision (default: this working tree)")
    parser.add_argument("--rounds", type=int, default=3, help="B runs; A runs one more")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-ab-") as scratch:
        old_tree = checkout(args.old, Path(scratch) / "a")
        new_tree = checkout(args.new, Path(scratch) / "b") if args.new else ROOT
        try:
            a_runs: list[dict[str, Any]] = []
            b_runs: list[dict[str, Any]] = []
            for round_ in range(args.rounds):
                a_runs.append(_run_side(old_tree))
                print(f"round {round_ + 1}: A done", flush=True)
                b_runs.append(_run_side(new_tree))
                print(f"round {round_ + 1}: B done", flush=True)
            a_runs.append(_run_side(old_tree))
        finally:
            for tree in (old_tree, new_tree):
                if tree != ROOT:
                    remove(tree)
    result = {
        "old": args.old,
        "new": args.new or "working tree",
        "rounds": args.rounds,
        "numbers": compare(a_runs, b_runs),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ab.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, row in result["numbers"].items():
        print(
            f"{name:<45} A {min(row['aRuns']):9.2f}..{max(row['aRuns']):9.2f}"
            f"  B/A {row['bOverA']}  A/A {row['aaSpread']}  within: {row['withinAA']}"
            f"  no worse: {row['noWorseThanAA']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
