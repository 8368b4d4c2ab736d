"""The recall benchmark's rows: generated, embedded by the real local embedder, and loaded
with one binary ``COPY``; optionally kept between runs.

Row ``g`` (1-based) belongs to user ``u = g % users`` of team ``t{u % TEAMS}``; its key is
``k<g> <word>`` and its value six words of the vocabulary and ``value of memory <g>``; every
50th row is archived. Each row's vector is the embedder's own vector of its text (``key:
value``, as the service embeds a save), so no two rows share one. The generator is seeded:
the same size gives the same rows in every run.

``ENGRAM_BENCH_RECALL_DATA_DIR`` keeps the embedded PostgreSQL's data there between runs: a
database per size is built once (``bench_rows_<size>``, its recipe recorded in
``bench_dataset``) and reused while the recipe is the same; the migrations added since are
applied to it and the rows a run saved are deleted after it. Unset, each run builds its rows
in a temporary folder and removes it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from engram.memories.ports import embedding_text

PER_USER = 2_000
TEAMS = 10
RECIPE = "v2: binary COPY, a vector per row's own text, seed 5"
"""Change it whenever the rows change: a kept database of another recipe is rebuilt."""
BATCH = 20_000
"""Rows generated, embedded and copied at a time."""
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_BASE = datetime(2026, 1, 1, tzinfo=UTC)
_COLUMNS = (
    "id, team_id, scope, owner_id, key, value, source_channel_id, confidence, status,"
    " embedding, embedding_model, embedding_dims, created_at, updated_at"
)


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("!i", len(data)) + data


def batches(
    size: int, words: list[str], embedder: Any, seed: int = 5
) -> Iterator[tuple[list[tuple[str, str, str, str, float, str]], Any]]:
    """``(rows, vectors)`` of ``BATCH`` rows at a time: (team, owner, key, value, confidence,
    status) and the float32 array of their vectors."""
    rng = np.random.default_rng(seed)
    users = max(size // PER_USER, 1)
    for start in range(1, size + 1, BATCH):
        g = np.arange(start, min(start + BATCH, size + 1))
        picks = rng.integers(0, len(words), size=(len(g), 6))
        confidence = np.round(0.3 + rng.random(len(g)) * 0.7, 2)
        rows = []
        for i, n in enumerate(g.tolist()):
            u = n % users
            rows.append(
                (
                    f"t{u % TEAMS}",
                    f"u{u}",
                    f"k{n} {words[(n * 7) % len(words)]}",
                    " ".join(words[w] for w in picks[i]) + f" value of memory {n}",
                    float(confidence[i]),
                    "archived" if n % 50 == 0 else "active",
                )
            )
        vectors = embedder.embed_array([embedding_text(r[2], r[3]) for r in rows])
        yield rows, vectors


def copy_rows(conn: psycopg.Connection[Any], size: int, words: list[str], embedder: Any) -> None:
    """Every row in one ``COPY ... (FORMAT BINARY)``; the vectors in pgvector's binary form."""
    model = embedder.model_id.encode()
    dims = embedder.dimensions
    vector_head = struct.pack("!ihh", 4 + 4 * dims, dims, 0)
    dims_field = struct.pack("!ii", 4, dims)
    header = struct.pack("!h", 14)
    uuids = np.random.default_rng(17)
    with conn.cursor().copy(f"COPY memories ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0))
        n = 0
        for rows, vectors in batches(size, words, embedder):
            big_endian = vectors.astype(">f4")
            ids = uuids.bytes(16 * len(rows))
            out = []
            for i, (team, owner, key, value, confidence, status) in enumerate(rows):
                n += 1
                at = struct.pack("!iq", 8, _micros(n))
                out.append(
                    header
                    + struct.pack("!i", 16)
                    + ids[16 * i : 16 * i + 16]
                    + _text(team)
                    + _text("user")
                    + _text(owner)
                    + _text(key)
                    + _text(value)
                    + _text(f"conv-{n % 997}")
                    + struct.pack("!id", 8, confidence)
                    + _text(status)
                    + vector_head
                    + big_endian[i].tobytes()
                    + struct.pack("!i", len(model))
                    + model
                    + dims_field
                    + at
                    + at
                )
            copy.write(b"".join(out))
        copy.write(struct.pack("!h", -1))


def _micros(n: int) -> int:
    """Row ``n`` was written ``n`` seconds before a fixed moment (microseconds since 2000)."""
    return int((_BASE - _EPOCH).total_seconds() - n) * 1_000_000


def load(conn: psycopg.Connection[Any], size: int, words: list[str], embedder: Any) -> float:
    """Bulk-load ``size`` rows into a migrated, empty ``memories``. The migrations' secondary
    indexes are dropped for the load and rebuilt after it from their own definitions, so the
    measured table has exactly the indexes the service has."""
    started = time.monotonic()
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
        " AND indexname <> 'memories_pkey' ORDER BY indexname"
    ).fetchall()
    for index, _ in indexes:
        conn.execute(f"DROP INDEX IF EXISTS {index}")
    conn.execute("SET maintenance_work_mem = '512MB'")
    conn.execute("SET synchronous_commit = off")
    with conn.transaction():
        copy_rows(conn, size, words, embedder)
    for _, definition in indexes:
        conn.execute(definition)
    settle(conn)
    return time.monotonic() - started


def settle(conn: psycopg.Connection[Any]) -> None:
    """As autovacuum leaves a table between bursts of writes: statistics and the visibility
    map (index-only scans, of the keyword ranking's count and of a user's vectors, read the
    table only for pages not marked all-visible; a second pass marks what the first could
    not yet)."""
    conn.execute("VACUUM (ANALYZE) memories")
    conn.execute("VACUUM memories")


def kept(conn: psycopg.Connection[Any], size: int, model: str) -> bool:
    """Whether this database holds the rows of ``size`` by the current recipe and model."""
    exists = conn.execute("SELECT to_regclass('bench_dataset') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return False
    row = conn.execute("SELECT size, recipe, model FROM bench_dataset").fetchone()
    return row == (size, RECIPE, model)


def record(conn: psycopg.Connection[Any], size: int, model: str) -> None:
    conn.execute("CREATE TABLE bench_dataset (size integer, recipe text, model text)")
    conn.execute("INSERT INTO bench_dataset VALUES (%s, %s, %s)", (size, RECIPE, model))


def forget_saves(conn: psycopg.Connection[Any]) -> None:
    """Delete what a run saved (keys ``bench ...``), so a kept database is the same next time."""
    conn.execute("DELETE FROM memories WHERE key LIKE 'bench %'")
    settle(conn)
