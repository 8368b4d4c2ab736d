"""Run one world against every configuration (decay × boost) and summarise.

Each configuration is a fresh Engram (its own Redis key prefix) living through the same world
with the same luck, so configurations are compared user by user (paired bootstrap). The
reference is the shipped default: ``ExponentialDecay`` and a boost of 2.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import json
import multiprocessing
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import Any

from bench.behaviour import metrics
from bench.behaviour.engine import (
    PROMPT_RANKINGS,
    BoostRanker,
    SessionRecord,
    Simulation,
    UseCaseEngram,
)
from bench.behaviour.world import WorldConfig, build_world
from engram.behaviour.affinity import BOOST_FACTOR
from engram.settings import Settings

DECAYS: tuple[str, ...] = ("exponential", "adaptive")
BOOSTS: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0)
#: the shipped defaults (``Settings.decay`` and ``BOOST_FACTOR``): every comparison is to them
REFERENCE: tuple[str, float] = (Settings.model_fields["decay"].default, BOOST_FACTOR)
SESSION_CURVE = 40  # sessions per user shown in the learning curve


@dataclasses.dataclass(frozen=True)
class Config:
    decay: str
    boost: float

    @property
    def label(self) -> str:
        return f"{self.decay} ×{self.boost:g}"


def grid(decays: Sequence[str] = DECAYS, boosts: Sequence[float] = BOOSTS) -> list[Config]:
    return [Config(d, b) for d in decays for b in boosts]


def records_digest(records: Sequence[SessionRecord]) -> str:
    """A digest of everything a run logged: equal digests mean identical runs."""
    h = hashlib.sha256()
    for record in records:
        h.update(json.dumps(dataclasses.asdict(record), sort_keys=True).encode())
    return h.hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Run:
    records: list[SessionRecord]
    degraded: int
    events: int
    accepted: int  # observations ingest accepted
    stored: int  # observations the store kept as new (equal: nothing lost, nothing doubled)
    seconds: float


def simulate(redis_url: str, world: WorldConfig, config: Config, prefix: str) -> Run:
    """One configuration on a fresh Engram (keys under ``prefix``); runs in a worker process."""
    users = build_world(world)
    engram = UseCaseEngram(redis_url, prefix=prefix, decay=config.decay)
    try:
        simulation = Simulation(
            engram, BoostRanker(config.boost), seed=world.seed, prompt_rankings=PROMPT_RANKINGS
        )
        records = simulation.run(users)
    finally:
        engram.close()
    return Run(
        records=records,
        degraded=simulation.degraded,
        events=simulation.events,
        accepted=simulation.accepted,
        stored=engram.queue.stored,
        seconds=simulation.seconds,
    )


def describe(world: WorldConfig, users: Sequence[Any]) -> dict[str, Any]:
    sessions = [s for u in users for s in u.sessions]
    return {
        "seed": world.seed,
        "users": world.users,
        "days": world.days,
        "changeDay": world.change_day,
        "changeShare": world.change_share,
        "sessions": len(sessions),
        "tasks": sum(len(s.tasks) for s in sessions),
        "archetypes": dict(sorted(Counter(u.archetype for u in users).items())),
        "changes": dict(
            sorted(Counter(u.change.kind for u in users if u.change is not None).items())
        ),
    }


def changes_of(users: Sequence[Any]) -> dict[int, dict[str, Any]]:
    return {
        u.index: {
            "kind": u.change.kind,
            "atMs": u.change.at_ms,
            "abandoned": u.change.abandoned,
            "adopted": u.change.adopted,
        }
        for u in users
        if u.change is not None
    }


def _runs(
    redis_url: str, world: WorldConfig, configs: Sequence[Config], *, prefix: str, workers: int
) -> Iterator[Run]:
    """The runs of ``configs`` in order, ``workers`` processes at a time."""
    prefixes = [f"{prefix}{n}" for n in range(len(configs))]
    if workers <= 1:
        for config, key_prefix in zip(configs, prefixes, strict=True):
            yield simulate(redis_url, world, config, key_prefix)
        return
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(min(workers, len(configs)), mp_context=context) as pool:
        yield from pool.map(simulate, repeat(redis_url), repeat(world), configs, prefixes)


def run_experiment(
    redis_url: str,
    world: WorldConfig,
    configs: Sequence[Config] | None = None,
    *,
    prefix: str = "sim",
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every configuration on ``world``; the JSON-able result ``bench/results/behaviour.json``
    holds."""
    configs = list(configs or grid())
    users = build_world(world)
    changes = changes_of(users)
    seed = world.seed
    rows: list[dict[str, Any]] = []
    means: dict[Config, dict[str, dict[int, float]]] = {}
    runs = _runs(redis_url, world, configs, prefix=prefix, workers=workers)
    for config, simulation in zip(configs, runs, strict=True):
        records = simulation.records
        if simulation.degraded:
            raise RuntimeError(f"{config.label}: {simulation.degraded} session(s) degraded")
        if simulation.stored != simulation.accepted:
            raise RuntimeError(
                f"{config.label}: {simulation.accepted} observations accepted, "
                f"{simulation.stored} stored"
            )
        means[config] = metrics.user_means(records, min_days_in=metrics.WEEK_DAYS)
        first_week = [r for r in records if r.days_in < metrics.WEEK_DAYS]
        rows.append(
            {
                "decay": config.decay,
                "boost": config.boost,
                "label": config.label,
                "seconds": round(simulation.seconds, 1),
                "msPerSession": round(1000 * simulation.seconds / max(1, len(records)), 2),
                "sessions": len(records),
                "events": simulation.events,
                "observations": simulation.stored,
                "recordsDigest": records_digest(records),
                "afterWeek": metrics.summary(records, seed=seed, min_days_in=metrics.WEEK_DAYS),
                "firstWeek": metrics.summary(first_week, seed=seed, min_days_in=0.0),
                "overall": metrics.summary(records, seed=seed, min_days_in=0.0),
                "adaptation": metrics.adaptation(records, changes),
                "flaky": metrics.flaky_episodes(records),
                "byDay": metrics.curve(records, lambda r: r.day, world.days),
                "bySession": metrics.curve(records, lambda r: r.index, SESSION_CURVE),
            }
        )
        if progress:
            top = rows[-1]["afterWeek"]["top1"]
            progress(
                f"   {config.label:<16} {len(records)} sessions in {simulation.seconds:.1f} s; "
                f"top-1 after a week {top['memory']['mean']:.3f} vs {top['none']['mean']:.3f} "
                f"without memory"
            )
    reference = next((c for c in configs if (c.decay, c.boost) == REFERENCE), configs[0])
    comparisons = [
        {
            "label": c.label,
            "decay": c.decay,
            "boost": c.boost,
            **{
                f"{name}VsReference": metrics.paired(
                    means[c][name], means[reference][name], seed=seed
                )
                for name in (
                    "top1Memory",
                    "ndcg5Memory",
                    "promptPrecision",
                    "promptRecall",
                )
            },
        }
        for c in configs
        if c != reference
    ]
    return {
        "world": describe(world, users),
        "reference": {"decay": reference.decay, "boost": reference.boost},
        "configs": rows,
        "comparisons": comparisons,
    }
