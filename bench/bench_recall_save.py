"""A save at 1M rows beside its floor, with the data directory on disk or in memory.

The store's part of a hybrid save (``PostgresMemoryStore.upsert`` with a vector computed
before the clock starts: full text, dedup, the vector index, the event) and the whole
``MemoryService.save`` (team switch, quotas) are timed call by call with their floor: the
same row in one bare ``INSERT`` and its commit on an autocommit connection. Whatever a
commit's WAL flush costs on the medium falls on both sides of the ratio.

It runs on a kept database of ``bench_recall`` (``ENGRAM_BENCH_RECALL_DATA_DIR``, required,
built there by ``python -m bench.bench_recall`` or reused); point it at a folder on a tmpfs
(``/dev/shm``) to take the disk out of the measurement, or at a copy of the same folder on
disk to put it back. The medium (the filesystem type the folder is on) is recorded with the
numbers, in ``bench/results/recall_save.json`` under ``ENGRAM_BENCH_SAVE_LABEL`` (default:
the filesystem type). ``ENGRAM_BENCH_RECALL_SIZES`` (1000000), ``ENGRAM_BENCH_RECALL_QUERIES``
(1000), ``ENGRAM_BENCH_RECALL_POSTGRES`` as for ``bench_recall``.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import recall_data
from bench.bench_recall import (
    FLOOR_INSERT_SQL,
    TARGET_SAVE_P99_MS,
    prepare,
    start_server,
    store_save_with_vector,
    timed_interleaved,
    vocabulary,
)
from bench.recall_data import PER_USER, TEAMS
from engram.adapters.local_embedder import WordLlamaEmbedder
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.rows import vector_literal as _vec
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.identity import Caller
from engram.memories.commands import SaveMemory
from engram.memories.service import MemoryService
from engram.settings import Settings


def filesystem(folder: Path) -> str:
    """The type of the filesystem ``folder`` is on (``tmpfs``, ``ext4`` …), from the mounts."""
    target, best, kind = str(folder.resolve()), "", "unknown"
    for line in Path("/proc/mounts").read_text().splitlines():
        _, point, fstype, *_ = line.split()
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def bench_saves(url: str, size: int, queries: int, embedder: Any) -> dict[str, Any]:
    users = max(size // PER_USER, 1)
    words = vocabulary()
    rng = random.Random(size + 1)
    picks = []
    for _ in range(queries + 50):
        u = rng.randrange(users)
        text = " ".join(rng.choice(words) for _ in range(3))
        picks.append((f"t{u % TEAMS}", f"u{u}", text, embedder.embed([text])[0]))
    model = embedder.model_id
    db = Database(url, max_size=2, statement_timeout_ms=10_000)
    store = PostgresMemoryStore(db)
    svc = MemoryService(store, settings=Settings())

    def save_with_vector(i: int) -> object:
        return store_save_with_vector(store, model, picks[i], i)

    def service_save(i: int) -> object:
        team, user, text, _ = picks[i]
        return svc.save(
            Caller(user_id=user, team_id=team),
            SaveMemory(key=f"bench s {i} {time.time_ns()}", value=f"saved: {text}"),
        )

    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:

        def floor_insert(i: int) -> object:
            team, user, text, e = picks[i]
            key = f"bench f {i} {time.time_ns()}"
            return conn.execute(
                FLOOR_INSERT_SQL, (team, user, key, f"saved: {text}", _vec(e), model, _vec(e))
            )

        out = timed_interleaved(
            {
                "engram_save_with_vector": save_with_vector,
                "engram_save": service_save,
                "floor_bare_insert": floor_insert,
            },
            queries,
        )
    db.close()
    floor = out["floor_bare_insert"]
    for name in ("engram_save_with_vector", "engram_save"):
        for q in ("p50", "p99"):
            out[f"ratio_{name}_{q}_to_floor"] = round(out[name][f"{q}_ms"] / floor[f"{q}_ms"], 2)
    return out


def run() -> dict[str, Any]:
    kept_dir = os.environ.get("ENGRAM_BENCH_RECALL_DATA_DIR")
    if not kept_dir:
        raise SystemExit("ENGRAM_BENCH_RECALL_DATA_DIR: the folder of a kept bench_recall database")
    size = int(os.environ.get("ENGRAM_BENCH_RECALL_SIZES", "1000000").split(",")[-1])
    queries = int(os.environ.get("ENGRAM_BENCH_RECALL_QUERIES", "1000"))
    root = Path(kept_dir)
    medium = filesystem(root)
    embedder = WordLlamaEmbedder()
    server = start_server(root)
    try:
        url, prepared = prepare(server, size, embedder, 0, keep=True)
        with psycopg.connect(url, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            sync = conn.execute("SHOW synchronous_commit").fetchone()
            buffers = conn.execute("SHOW shared_buffers").fetchone()
        result = bench_saves(url, size, queries, embedder)
        with psycopg.connect(url, autocommit=True) as conn:
            recall_data.forget_saves(conn)
    finally:
        server.cleanup()
    return {
        "size": size,
        "data_dir_filesystem": medium,
        "postgres": version[0] if version else None,
        "synchronous_commit": sync[0] if sync else None,
        "shared_buffers": buffers[0] if buffers else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "prepared": prepared,
        **result,
        "target_save_with_vector_p99_under_5ms": (
            result["engram_save_with_vector"]["p99_ms"] < TARGET_SAVE_P99_MS
        ),
    }


if __name__ == "__main__":
    out = run()
    path = Path(__file__).resolve().parent / "results" / "recall_save.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[os.environ.get("ENGRAM_BENCH_SAVE_LABEL", out["data_dir_filesystem"])] = out
    path.write_text(json.dumps(runs, indent=2) + "\n")
    print(json.dumps(out, indent=2))
