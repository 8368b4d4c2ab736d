"""Concurrent saves of one team against the same saves spread over many teams: does the
team's usage counter (``memory_usage``) make one row every save of a team waits on?

``ENGRAM_BENCH_QUOTA_WRITERS`` threads (default 8), each its own user with its own pool
connection, save ``ENGRAM_BENCH_QUOTA_SAVES`` new keys each (default 150) through
``MemoryService.save`` on one embedded PostgreSQL. The floor is the same writers each in
their own team (nothing of a team is shared). Each shape runs with no quota and with the
per-team and per-user quotas set (far from full, so nothing is refused); shapes alternate,
twice, so the machine's load falls on all alike. Reported: saves per second per shape and
the ratio of one team's throughput to the floor's (1.0 = no contention).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.local import embedded_postgres
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.identity import Caller
from engram.memories.commands import SaveMemory
from engram.memories.service import MemoryService
from engram.settings import Settings

QUOTAS = {"max_memories_per_team": 10_000_000, "max_memories_per_user": 10_000_000}


def _round(db: Database, writers: int, saves: int, *, one_team: bool, quotas: bool) -> float:
    store = PostgresMemoryStore(db)
    svc = MemoryService(store, settings=Settings(**(QUOTAS if quotas else {})))
    run = uuid.uuid4().hex[:8]
    callers = [
        Caller(user_id=f"u{i}", team_id=f"t{run}" if one_team else f"t{run}-{i}")
        for i in range(writers)
    ]
    barrier = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def write(caller: Caller) -> None:
        barrier.wait()
        try:
            for n in range(saves):
                svc.save(caller, SaveMemory(key=f"k{n}", value=f"value {n}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(c,)) for c in callers]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return writers * saves / elapsed


def run(results_dir: Path) -> dict[str, Any]:
    writers = int(os.environ.get("ENGRAM_BENCH_QUOTA_WRITERS", "8"))
    saves = int(os.environ.get("ENGRAM_BENCH_QUOTA_SAVES", "150"))
    with embedded_postgres("engram-bench-quota-", embedding_dimensions=32) as (url, _):
        db = Database(url, max_size=writers + 2, connect_timeout_s=5, statement_timeout_ms=30_000)
        try:
            shapes = [(one, quotas) for quotas in (False, True) for one in (True, False)]
            rates: dict[tuple[bool, bool], list[float]] = {s: [] for s in shapes}
            _round(db, writers, 10, one_team=True, quotas=True)  # warm the pool and caches
            for _ in range(2):
                for one, quotas in shapes:
                    rates[(one, quotas)].append(
                        _round(db, writers, saves, one_team=one, quotas=quotas)
                    )
        finally:
            db.close()
    best = {s: max(r) for s, r in rates.items()}
    out: dict[str, Any] = {"writers": writers, "saves_per_writer": saves}
    lines = []
    for quotas in (False, True):
        label = "quotas" if quotas else "no_quota"
        one, many = best[(True, quotas)], best[(False, quotas)]
        out[label] = {
            "one_team_saves_per_s": round(one, 1),
            "many_teams_saves_per_s": round(many, 1),
            "ratio_one_team_to_floor": round(one / many, 3),
        }
        lines.append(
            f"   {label}: one team {one:.0f} saves/s, floor (a team per writer) {many:.0f}"
            f" saves/s, ratio {one / many:.2f}"
        )
    out["summary"] = "\n".join(lines)
    return out
