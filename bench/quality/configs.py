"""The configurations of the served instance the quality harness compares, side by side.

Each configuration is a set of ``ENGRAM_*`` settings of ``engram serve``, applied on top of
``EVAL_SETTINGS`` (which every configuration shares). Every configuration gets a database of
its own on the same embedded PostgreSQL, is indexed and queried the same way, and is reported
next to the others and the plain-SQL baseline. Add a configuration here (for example one with
an embedder, for hybrid recall) and pick it with ``--configs`` or
``ENGRAM_BENCH_QUALITY_CONFIGS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EvalConfig:
    name: str
    description: str
    env: dict[str, str] = field(default_factory=dict)


#: Settings of every served instance of the evaluation:
#: - the user quota is raised far above the largest conversation (LoCoMo's have < 1,000
#:   turns; the default quota is 5,000), and the team quota (every conversation is a user of
#:   one team; unlimited by default) set far above all ten, so no quota, today's or a later
#:   default, can truncate an index;
#: - the maintenance timer is pushed out of the run, so retention or sweeps never touch
#:   the rows being measured;
#: - warnings only in the served log.
#: Saves are not otherwise rate-limited today; the harness still honours any 429 it gets
#: (waits ``Retry-After`` and retries) and reports how many it met.
EVAL_SETTINGS: dict[str, str] = {
    "ENGRAM_MAX_MEMORIES_PER_USER": "100000",
    "ENGRAM_MAX_MEMORIES_PER_TEAM": "1000000",
    "ENGRAM_MAINTENANCE_INTERVAL_S": "86400",
    "ENGRAM_LOG_LEVEL": "WARNING",
}

CONFIGS: dict[str, EvalConfig] = {
    "keyword": EvalConfig(
        "keyword", "keyword recall: no embedder (the default)", {"ENGRAM_EMBEDDER": "none"}
    ),
    "hybrid-local": EvalConfig(
        "hybrid-local",
        "hybrid recall: keywords + the local WordLlama embedder (offline)",
        {"ENGRAM_EMBEDDER": "local"},
    ),
    "hybrid-minilm": EvalConfig(
        "hybrid-minilm",
        "hybrid recall: keywords + all-MiniLM-L6-v2 run by numpy (offline)",
        {"ENGRAM_EMBEDDER": "minilm"},
    ),
}
DEFAULT_CONFIGS = ("keyword", "hybrid-local", "hybrid-minilm")


def pick(names: str | None) -> list[EvalConfig]:
    """The configurations named in a comma-separated list (default ``DEFAULT_CONFIGS``)."""
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()] or list(DEFAULT_CONFIGS)
    unknown = [n for n in wanted if n not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}; known: {sorted(CONFIGS)}")
    return [CONFIGS[n] for n in dict.fromkeys(wanted)]
