"""Choose an embedder's hybrid tuning by measurement: a sweep of threshold, RRF k and weights.

``python -m bench.quality.sweep [--data PATH]`` stores LoCoMo's turns with the local embedder's
vectors in an embedded PostgreSQL through ``PostgresMemoryStore`` (as the service does), takes
each question's keyword list from the store's own recall (keyword-only, the first 100) and its
vector list by exact cosine over the conversation's vectors (what the recall statement
computes), and fuses them by the documented weighted RRF for every point of the grid. Scores
are those of the harness (``metrics.py``: R@5/10/20, MRR over the first 20). The chosen point
is then confirmed through the HTTP API by ``make eval``; this sweep only narrows the choice.
Results: ``bench/results/quality_sweep.json``.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import pickle
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.quality.locomo import load
from bench.quality.metrics import DEPTH, Outcome, first_rank, summarise
from bench.quality.runner import embedded_postgres

RESULTS = Path(__file__).resolve().parents[1] / "results" / "quality_sweep.json"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "locomo-dev"
LIST = 100
THRESHOLDS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)
RRF_KS = (10, 30, 60)
VECTOR_WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5)


def fuse(keyword: Sequence[str], vector: Sequence[str], k: int, wk: float, wv: float) -> list[str]:
    """Weighted RRF of two ranked key lists; ties by key (every confidence is 1 here)."""
    scores: dict[str, float] = {}
    for weight, ranked in ((wk, keyword), (wv, vector)):
        for rank, key in enumerate(ranked, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda key: (-scores[key], key))[:DEPTH]


SCORE_ALPHAS = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9)
SCORE_THRESHOLDS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)


def score_fuse(
    keyword: Sequence[str],
    bm25: dict[str, float],
    vector: Sequence[tuple[str, float]],
    alpha: float,
    threshold: float = 0.0,
) -> list[str]:
    """Weighted score fusion as the recall statement computes it: ``alpha * bm25 / max bm25``
    over the keyword list (the store's first ``LIST``) plus ``(1 - alpha) * max(cosine, 0)``
    over the vector list's rows of at least ``threshold`` (a missing side counts 0)."""
    kw = {k: bm25.get(k, 0.0) for k in keyword}
    top = max(kw.values(), default=0.0) or 1.0
    cos = {k: c for k, c in vector if c >= threshold}
    keys = set(kw) | set(cos)
    fused = {
        k: alpha * kw.get(k, 0.0) / top + (1 - alpha) * max(cos.get(k, 0.0), 0.0) for k in keys
    }
    return sorted(fused, key=lambda k: (-fused[k], k))[:DEPTH]


def main(argv: list[str] | None = None) -> int:
    from engram.adapters.local_embedder import WordLlamaEmbedder
    from engram.adapters.postgres.migrate import apply_migrations
    from engram.adapters.postgres.pool import Database
    from engram.adapters.postgres.store import PostgresMemoryStore
    from engram.memories import writes
    from engram.memories.models import NewMemory, RecallRequest, Scope
    from engram.memories.ports import AccessContext, Embedder, embedding_text

    parser = argparse.ArgumentParser(prog="python -m bench.quality.sweep")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--embedder",
        default=None,
        help="module:attribute of another Embedder factory to measure (default: the local one)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="pickle the lists here")
    parser.add_argument(
        "--reuse", action="store_true", help="score the grid on the lists pickled in --cache"
    )
    parser.add_argument("--conversations", type=int, default=None, help="the first N only")
    args = parser.parse_args(argv)
    if args.reuse and args.cache is None:
        parser.error("--reuse needs --cache")
    conversations = load(args.data)[: args.conversations]
    embedder: Embedder = WordLlamaEmbedder()
    if args.embedder:
        module, _, attr = args.embedder.partition(":")
        embedder = getattr(importlib.import_module(module), attr)()
    started = time.perf_counter()
    team = "engram-sweep"
    lists: list[tuple[list[str], list[tuple[str, float]], frozenset[str], int]] = []
    scores: list[dict[str, float]] = []
    spread: list[tuple[float, float]] = []
    if args.reuse:  # the lists of an earlier run of the same embedder: only the grid is scored
        lists, scores, spread = pickle.loads(args.cache.read_bytes())
    else:
        with embedded_postgres() as fresh:
            url = fresh(f"sweep_{uuid.uuid4().hex[:8]}")
            apply_migrations(url, embedding_dimensions=embedder.dimensions)
            db = Database(url, max_size=2, connect_timeout_s=5, statement_timeout_ms=60_000)
            store = PostgresMemoryStore(db)
            try:
                for conv in conversations:
                    user = f"locomo-{conv.sample_id}"
                    ctx = AccessContext(team_id=team, user_id=user)
                    texts = [embedding_text(m.key, m.value) for m in conv.memories]
                    batches = [embedder.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)]
                    vectors = np.asarray([v for b in batches for v in b], dtype=np.float32)
                    for m, v in zip(conv.memories, vectors, strict=True):
                        memory = NewMemory(
                            scope=Scope.USER,
                            owner_id=user,
                            team_id=team,
                            key=m.key,
                            value=m.value,
                            embedding=v.tolist(),
                            embedding_model=embedder.model_id,
                        )
                        with store(ctx) as tx:
                            writes.save(tx, memory)
                    keys = [m.key for m in conv.memories]
                    for q in conv.questions:
                        with store(ctx) as tx:
                            found = tx.recall(
                                RecallRequest(team_id=team, user_id=user, query=q.text, limit=LIST)
                            )
                        with db.tenant(ctx) as conn:
                            bm25 = dict(
                                conn.execute(
                                    "SELECT m.key, c.score FROM engram_fts_rank(%s,"
                                    " 'english'::regconfig, NULL, 1.2) c"
                                    " JOIN memories m ON m.id = c.id",
                                    (q.text,),
                                ).fetchall()
                            )
                        scores.append(bm25)
                        qv = np.asarray(embedder.embed([q.text])[0], dtype=np.float32)
                        sims = vectors @ qv
                        order = sorted(range(len(keys)), key=lambda i: (-sims[i], keys[i]))[:LIST]
                        vector = [(keys[i], float(sims[i])) for i in order]
                        spread.append((float(sims.mean()), float(sims.std())))
                        lists.append(([m.key for m in found], vector, q.evidence, q.category))
            finally:
                db.close()

    if args.cache and not args.reuse:
        args.cache.write_bytes(pickle.dumps((lists, scores, spread)))

    def score(ranked_of: list[list[str]]) -> dict[str, object]:
        outcomes = [
            Outcome(category=cat, rank=first_rank(ranked, ev))
            for ranked, (_, _, ev, cat) in zip(ranked_of, lists, strict=True)
        ]
        return summarise(outcomes)["overall"]  # type: ignore[return-value]

    rows: list[dict[str, object]] = [
        {"fusion": "keyword only", **score([kw[:DEPTH] for kw, _, _, _ in lists])},
        {"fusion": "vector only", **score([[k for k, _ in vec][:DEPTH] for _, vec, _, _ in lists])},
    ]
    for threshold, k, wv in itertools.product(THRESHOLDS, RRF_KS, VECTOR_WEIGHTS):
        fused = [
            fuse(kw, [key for key, s in vec if s >= threshold], k, 1.0, wv)
            for kw, vec, _, _ in lists
        ]
        rows.append(
            {"fusion": "rrf", "minSimilarity": threshold, "rrfK": k, "vectorWeight": wv}
            | score(fused)
        )
    for threshold, alpha in itertools.product(SCORE_THRESHOLDS, SCORE_ALPHAS):
        fused = [
            score_fuse(kw, bm25, vec, alpha, threshold)
            for bm25, (kw, vec, _, _) in zip(scores, lists, strict=True)
        ]
        rows.append(
            {"fusion": "score", "minSimilarity": threshold, "keywordShare": alpha} | score(fused)
        )
    best = max(rows[2:], key=lambda r: (r["R@10"], r["MRR"]))  # type: ignore[arg-type]
    out = {
        "benchmark": "quality_sweep",
        "embedder": embedder.model_id,
        "questions": len(lists),
        "seconds": round(time.perf_counter() - started, 1),
        "best": best,
        "rows": rows,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for row in rows[:2]:
        print(row)
    print("best:", best)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
