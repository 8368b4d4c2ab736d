"""How close two memories' embeddings must be to flag one as a possible duplicate of the other
(``RecallTuning.duplicate_similarity`` of each offline embedder).

The data is made here: facts a user might state, each under two to three keys a model or a
person could choose ("preferred editor", "editor of choice", "text editor I use") with the same
or a lightly reworded value — the pairs that should be flagged — and every pair of different
facts of the same user — the pairs that should not, among them hard ones (the same value of a
different thing: "car colour: teal" beside "favourite colour: teal"; the same kind of thing
with another value). Each memory is embedded as the service embeds it
(``engram.memories.ports.embedding_text``). The threshold is the lowest cosine similarity at
which precision on these pairs is at least ``MIN_PRECISION`` (a wrong flag costs a reviewer a
look; a missed one costs nothing new), reported with its precision and recall.

What the flag costs a save: ``MemoryService.save_flagged`` on embedded PostgreSQL with the
WordLlama embedder, timed call by call against the same save with an embedder that flags
nothing (its tuning without ``duplicate_similarity``), interleaved, for an owner holding
``ENGRAM_BENCH_DUPLICATES_ROWS`` memories (1000,5000: 5000 is ``ENGRAM_MAX_MEMORIES_PER_USER``'s
default): the flag is one more query, an exact
scan of the owner's live rows of the model.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from engram.memories.ports import Embedder, embedding_text
from engram.memories.recall import cosine

MIN_PRECISION = 0.95

#: one fact per entry: its (key, value) spellings
FACTS: list[list[tuple[str, str]]] = [
    [("preferred editor", "helix"), ("editor of choice", "helix"), ("text editor", "Helix")],
    [("favourite colour", "teal"), ("favorite color", "teal"), ("colour I like best", "teal")],
    [("home city", "Oslo"), ("city of residence", "Oslo"), ("lives in", "Oslo, Norway")],
    [("pet", "a cat called Miso"), ("pet cat", "Miso, a cat"), ("cat's name", "Miso")],
    [("allergy", "peanuts"), ("food allergy", "allergic to peanuts")],
    [("diet", "vegetarian"), ("dietary preference", "vegetarian"), ("eats", "no meat")],
    [("employer", "Acme Corp"), ("works at", "Acme Corp"), ("company", "Acme Corporation")],
    [("job title", "data engineer"), ("role", "data engineer"), ("occupation", "data engineer")],
    [("timezone", "Europe/Oslo"), ("time zone", "CET, Europe/Oslo")],
    [("coffee order", "flat white"), ("preferred coffee", "a flat white")],
    [("programming language", "Rust"), ("favourite language", "Rust")],
    [("partner name", "Sam"), ("spouse", "Sam")],
    [("birthday", "14 March"), ("date of birth", "March 14")],
    [("music taste", "jazz"), ("favourite music", "jazz")],
    [("running goal", "a marathon in May"), ("training for", "the May marathon")],
    [("car", "a blue Volvo"), ("vehicle", "blue Volvo")],
    [("reply style", "short answers"), ("answer length", "keep answers short")],
    [("os", "Debian Linux"), ("operating system", "Debian")],
    [("team", "platform team"), ("works on", "the platform team")],
    [("meeting preference", "mornings"), ("best time for meetings", "in the morning")],
    # hard negatives for the others: the same value of a different thing, or the same kind of
    # thing with another value
    [("car colour", "teal")],
    [("favourite food", "peanuts")],
    [("sister's city", "Bergen")],
    [("dog", "a dog called Rex")],
    [("previous employer", "Globex")],
    [("second language", "Python")],
    [("favourite film", "Heat")],
    [("work editor", "vim")],
]


def pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(duplicates, distinct): pairs of embedding texts."""
    texts = [[embedding_text(k, v) for k, v in fact] for fact in FACTS]
    same = [pair for fact in texts for pair in itertools.combinations(fact, 2)]
    other = [
        (a, b) for fa, fb in itertools.combinations(texts, 2) for a, b in itertools.product(fa, fb)
    ]
    return same, other


def measure(embedder: Embedder) -> dict[str, Any]:
    same, other = pairs()
    texts = sorted({t for pair in same + other for t in pair})
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    pos = sorted(cosine(vectors[a], vectors[b]) for a, b in same)
    neg = sorted(cosine(vectors[a], vectors[b]) for a, b in other)
    chosen: dict[str, float] | None = None
    for t in sorted(set(pos)):
        tp = sum(1 for s in pos if s >= t)
        fp = sum(1 for s in neg if s >= t)
        if tp and tp / (tp + fp) >= MIN_PRECISION:
            precision, recall = tp / (tp + fp), tp / len(pos)
            chosen = {"threshold": round(t, 3), "precision": precision, "recall": recall}
            break
    return {
        "model": embedder.model_id,
        "duplicatePairs": len(pos),
        "distinctPairs": len(neg),
        "duplicateSimilarity": {"min": pos[0], "median": pos[len(pos) // 2], "max": pos[-1]},
        "distinctSimilarity": {"min": neg[0], "median": neg[len(neg) // 2], "max": neg[-1]},
        "chosen": chosen,
        "configured": embedder.tuning.duplicate_similarity,
    }


def embedders() -> list[Embedder]:
    from engram.adapters.local_embedder import WordLlamaEmbedder
    from engram.adapters.minilm_embedder import MiniLMEmbedder
    from engram.memories.recall import HashingEmbedder

    return [WordLlamaEmbedder(), MiniLMEmbedder(), HashingEmbedder()]


def _timed_saves(url: str, rows: int, saves: int) -> dict[str, Any]:
    """Saves with and without the flag, interleaved, for an owner holding ``rows`` memories."""
    from bench.bench_recall import timed_interleaved
    from engram.adapters.local_embedder import WORDLLAMA_TUNING, WordLlamaEmbedder
    from engram.adapters.postgres.migrate import apply_migrations
    from engram.adapters.postgres.pool import Database
    from engram.adapters.postgres.store import PostgresMemoryStore
    from engram.identity import Caller
    from engram.memories.commands import SaveMemory
    from engram.memories.service import MemoryService
    from engram.settings import Settings

    class NotFlagging(WordLlamaEmbedder):
        tuning = WORDLLAMA_TUNING.model_copy(update={"duplicate_similarity": None})

    words = sorted({w for fact in FACTS for k, v in fact for w in f"{k} {v}".lower().split()})

    def text(i: int) -> str:
        return " ".join(words[(i * 7 + j * 13) % len(words)] for j in range(6))

    apply_migrations(url, embedding_dimensions=256)
    db = Database(url, max_size=2)
    store = PostgresMemoryStore(db)
    settings = Settings(max_memories_per_user=10 * rows + 10 * saves)
    flagging = MemoryService(store, embedder=WordLlamaEmbedder(), settings=settings)
    plain = MemoryService(store, embedder=NotFlagging(), settings=settings)
    alice = Caller(user_id="alice", team_id="acme")
    try:
        for i in range(rows):
            plain.save(alice, SaveMemory(key=f"fact {i}", value=text(i)))
        timings = timed_interleaved(
            {
                "flagging": lambda i: flagging.save_flagged(
                    alice, SaveMemory(key=f"flagged {i}", value=text(rows + i))
                ),
                "not flagging": lambda i: plain.save_flagged(
                    alice, SaveMemory(key=f"plain {i}", value=text(rows + i))
                ),
            },
            saves,
        )
    finally:
        db.close()
    on, off = timings["flagging"], timings["not flagging"]
    return {
        "ownerRows": rows,
        "flagging": on,
        "notFlagging": off,
        "p50Ratio": round(on["p50_ms"] / off["p50_ms"], 3),
        "p99Ratio": round(on["p99_ms"] / off["p99_ms"], 3),
    }


def save_cost(owner_rows: list[int], saves: int) -> list[dict[str, Any]]:
    import tempfile

    import psycopg

    from bench.bench_recall import start_server

    server = start_server(Path(tempfile.mkdtemp(prefix="engram-bench-dups-")))
    out = []
    try:
        for rows in owner_rows:
            name = f"bench_dups_{rows}"
            with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                conn.execute(f'CREATE DATABASE "{name}"')
            out.append(_timed_saves(server.get_uri(name), rows, saves))
    finally:
        server.cleanup()
    return out


def run(results_dir: Path) -> dict[str, Any]:
    import os

    rows = [int(n) for n in os.environ.get("ENGRAM_BENCH_DUPLICATES_ROWS", "1000,5000").split(",")]
    saves = int(os.environ.get("ENGRAM_BENCH_DUPLICATES_SAVES", "300"))
    return {
        "minPrecision": MIN_PRECISION,
        "embedders": [measure(e) for e in embedders()],
        "saveCost": save_cost(rows, saves),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(Path("bench/results")), indent=2))
