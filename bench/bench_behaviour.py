"""Does behavioural memory learn? A seeded population of simulated users lives through 60 days
of sessions against Engram (session start and events use cases, real Redis, fake clock), once
per configuration: ``ExponentialDecay`` and ``AdaptiveDecay`` × boost factors 0.5-4.

The world, the assistant loop and the metrics are described in ``bench/behaviour/``; the
decision they support is in docs/behaviour.md. Sizes: ``ENGRAM_BENCH_BEHAVIOUR_USERS`` (200),
``ENGRAM_BENCH_BEHAVIOUR_DAYS`` (60), ``ENGRAM_BENCH_BEHAVIOUR_SEED`` (25); quick mode runs 40
users. Configurations run ``ENGRAM_BENCH_BEHAVIOUR_WORKERS`` (2, or 1 on one core) at a time in
worker processes, each on its own Redis key prefix. The same seed and sizes give the same
numbers, whatever the number of workers (``recordsDigest`` per configuration). Uses
``REDIS_URL`` when set, else a private ``redis-server``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.behaviour.experiment import run_experiment
from bench.behaviour.report import summary_text
from bench.behaviour.world import WorldConfig
from bench.bench_consolidation import redis_url


def world_from_env() -> WorldConfig:
    return WorldConfig(
        seed=int(os.environ.get("ENGRAM_BENCH_BEHAVIOUR_SEED", "25")),
        users=int(os.environ.get("ENGRAM_BENCH_BEHAVIOUR_USERS", "200")),
        days=int(os.environ.get("ENGRAM_BENCH_BEHAVIOUR_DAYS", "60")),
    )


def run(results_dir: Path) -> dict[str, Any]:
    world = world_from_env()
    workers = int(
        os.environ.get("ENGRAM_BENCH_BEHAVIOUR_WORKERS", str(min(2, os.cpu_count() or 1)))
    )
    with redis_url() as url:
        result = run_experiment(
            url, world, workers=workers, progress=lambda line: print(line, flush=True)
        )
    result["workers"] = workers
    result["summary"] = summary_text(result)
    return result
