"""Metrics over the session log of one simulation (pure functions, no Engram).

- **Tool choice** per task: top-1 accuracy (the tool ranked first is the one the user wants)
  and NDCG@5 with graded gains (2 = the wanted tool, 1 = another tool that can do the task and
  works for the user, 0 otherwise; DCG = Σ (2^gain − 1) / log2(rank + 1)), for the ranking with
  memory and for the same catalogue ranking without it.
- **The prompt** per session: precision = core facts shown / (core + false facts shown) and
  recall = core facts shown / core facts of the profile (incidental facts count for neither);
  ``coreKnown`` = core facts Engram holds at all (shown or not: what the budget leaves out).
- **Adaptation**: sessions and days after a change until the abandoned tool stops being
  recommended for the changed task (for good: it never comes back) and the adopted one starts;
  for users who moved domain, until the new domain is in the prompt and the old one is not.
- **Flaky tools**: episodes in which a flaky tool (success 35-70 %) has a positive net affinity
  (it is boosted): their length in sessions and days.

Users are the unit of every confidence interval: per-user means, then a percentile bootstrap
over users (``bootstrap``), paired when two configurations are compared on the same users.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from bench.behaviour.engine import SessionRecord, TaskRecord
from engram.clock import MS_PER_DAY

K = 5
WEEK_DAYS = 7.0
BOOTSTRAP_RESAMPLES = 2000
LEVEL = 0.95

#: a mean with its interval: {"mean", "lo", "hi"} (None when there is no value) and "n"
Estimate = dict[str, float | int | None]


# --- per task and per session ----------------------------------------------------------------
def dcg(gains: Sequence[int], k: int = K) -> float:
    return sum(float(2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains[:k]))


def ndcg(gains: Sequence[int], ideal: Sequence[int], k: int = K) -> float:
    best = dcg(sorted(ideal, reverse=True), k)
    return dcg(gains, k) / best if best > 0 else 0.0


def top1(gains: Sequence[int]) -> float:
    return 1.0 if gains and gains[0] == 2 else 0.0


def task_scores(task: TaskRecord) -> dict[str, float]:
    return {
        "top1Memory": top1(task.gains),
        "top1None": top1(task.base_gains),
        "ndcg5Memory": ndcg(task.gains, task.ideal),
        "ndcg5None": ndcg(task.base_gains, task.ideal),
    }


def prompt_precision(labels: Sequence[str]) -> float | None:
    counted = [label for label in labels if label != "incidental"]
    if not counted:
        return None
    return sum(1 for label in counted if label == "core") / len(counted)


def prompt_recall(record: SessionRecord, prompt: str = "seed") -> float | None:
    shown = record.prompts[prompt].core_shown
    return shown / record.core_size if record.core_size else None


# --- statistics ------------------------------------------------------------------------------
def bootstrap(
    values: Sequence[float], *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> Estimate:
    """Mean and percentile bootstrap interval (``LEVEL``) of ``values`` (one per user)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1 - LEVEL) / 2 * 100
    return {
        "mean": round(float(data.mean()), 4),
        "lo": round(float(np.percentile(means, tail)), 4),
        "hi": round(float(np.percentile(means, 100 - tail)), 4),
        "n": int(data.size),
    }


def _mean(values: Iterable[float]) -> float | None:
    data = list(values)
    return statistics.fmean(data) if data else None


def per_user(
    records: Sequence[SessionRecord], value: Callable[[SessionRecord], Iterable[float]]
) -> dict[int, float]:
    """Each user's mean of ``value`` over their sessions (users with no value left out)."""
    pooled: dict[int, list[float]] = defaultdict(list)
    for record in records:
        pooled[record.user].extend(value(record))
    return {user: statistics.fmean(v) for user, v in pooled.items() if v}


def _task_metric(name: str) -> Callable[[SessionRecord], list[float]]:
    return lambda r: [task_scores(t)[name] for t in r.tasks]


def _optional(x: float | None) -> list[float]:
    return [] if x is None else [x]


def user_means(
    records: Sequence[SessionRecord], *, min_days_in: float = 0.0
) -> dict[str, dict[int, float]]:
    """Per-user means of every metric over sessions at least ``min_days_in`` days after the
    user's first session."""
    chosen = [r for r in records if r.days_in >= min_days_in]
    out = {
        name: per_user(chosen, _task_metric(name))
        for name in ("top1Memory", "top1None", "ndcg5Memory", "ndcg5None")
    }
    out["coreKnown"] = per_user(
        chosen, lambda r: _optional(r.core_known / r.core_size if r.core_size else None)
    )
    for name in sorted({name for r in chosen for name in r.prompts}):
        suffix = "" if name == "seed" else f":{name}"
        for metric, value in _prompt_metrics(name).items():
            out[f"{metric}{suffix}"] = per_user(chosen, value)
    return out


def _prompt_metrics(name: str) -> dict[str, Callable[[SessionRecord], list[float]]]:
    def precision(r: SessionRecord) -> list[float]:
        return _optional(prompt_precision(r.prompts[name].labels))

    def recall(r: SessionRecord) -> list[float]:
        return _optional(prompt_recall(r, name))

    def false(r: SessionRecord) -> list[float]:
        return [float(sum(1 for x in r.prompts[name].labels if x == "false"))]

    return {"promptPrecision": precision, "promptRecall": recall, "falseInPrompt": false}


def paired(a: Mapping[int, float], b: Mapping[int, float], *, seed: int) -> Estimate:
    """Bootstrap of the per-user difference a − b over users present in both."""
    users = sorted(set(a) & set(b))
    return bootstrap([a[u] - b[u] for u in users], seed=seed)


def summary(records: Sequence[SessionRecord], *, seed: int, min_days_in: float) -> dict[str, Any]:
    means = user_means(records, min_days_in=min_days_in)
    out: dict[str, Any] = {}
    for metric in ("top1", "ndcg5"):
        memory, none = means[f"{metric}Memory"], means[f"{metric}None"]
        out[metric] = {
            "memory": bootstrap(list(memory.values()), seed=seed),
            "none": bootstrap(list(none.values()), seed=seed),
            "margin": paired(memory, none, seed=seed),
        }
    for name in ("promptPrecision", "promptRecall", "falseInPrompt", "coreKnown"):
        out[name] = bootstrap(list(means[name].values()), seed=seed)
    alternatives = sorted({n.split(":", 1)[1] for n in means if n.startswith("promptRecall:")})
    if alternatives:
        out["promptRankings"] = {
            alt: {
                name: {
                    "value": bootstrap(list(means[f"{name}:{alt}"].values()), seed=seed),
                    "vsSeed": paired(means[f"{name}:{alt}"], means[name], seed=seed),
                }
                for name in ("promptPrecision", "promptRecall", "falseInPrompt")
            }
            for alt in alternatives
        }
    return out


# --- curves ----------------------------------------------------------------------------------
def curve(
    records: Sequence[SessionRecord], key: Callable[[SessionRecord], int], limit: int
) -> list[dict[str, Any]]:
    """Pooled means per bucket (simulated day, or the user's session number)."""
    buckets: dict[int, list[SessionRecord]] = defaultdict(list)
    for record in records:
        bucket = key(record)
        if 0 <= bucket < limit:
            buckets[bucket].append(record)
    rows = []
    for bucket in sorted(buckets):
        chosen = buckets[bucket]
        tasks = [task_scores(t) for r in chosen for t in r.tasks]
        row: dict[str, Any] = {"bucket": bucket, "sessions": len(chosen), "tasks": len(tasks)}
        for name in ("top1Memory", "top1None", "ndcg5Memory", "ndcg5None"):
            row[name] = _round(_mean(t[name] for t in tasks))
        precisions = (prompt_precision(r.prompts["seed"].labels) for r in chosen)
        row["promptPrecision"] = _round(_mean(p for p in precisions if p is not None))
        row["promptRecall"] = _round(
            _mean(x for r in chosen if (x := prompt_recall(r)) is not None)
        )
        rows.append(row)
    return rows


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


# --- adaptation ------------------------------------------------------------------------------
def settle(flags: Sequence[bool]) -> int | None:
    """The first index from which every flag is true (None if the last one is false)."""
    if not flags or not flags[-1]:
        return None
    index = len(flags)
    while index > 0 and flags[index - 1]:
        index -= 1
    return index


def _distribution(values: Sequence[float | None]) -> dict[str, Any]:
    """Median and p90 with censored values (None: never within the run) counted as infinite."""
    n = len(values)
    done = sorted(v for v in values if v is not None)
    if n == 0:
        return {"n": 0}

    def quantile(q: float) -> float | None:
        rank = math.ceil(q * n) - 1
        return round(done[rank], 2) if rank < len(done) else None

    return {
        "n": n,
        "adapted": round(len(done) / n, 4),
        "median": quantile(0.5),
        "p90": quantile(0.9),
        "mean": round(statistics.fmean(done), 2) if done else None,
    }


def _timeline(records: Sequence[SessionRecord]) -> dict[int, list[SessionRecord]]:
    users: dict[int, list[SessionRecord]] = defaultdict(list)
    for record in records:
        users[record.user].append(record)
    return {u: sorted(rs, key=lambda r: r.index) for u, rs in users.items()}


def _settled(
    after: Sequence[SessionRecord], flags: Sequence[bool], change_ms: int
) -> tuple[float | None, float | None]:
    """(sessions, days) after the change until ``flags`` hold for good (None, None: never)."""
    at = settle(flags)
    if at is None:
        return None, None
    return float(at), (after[at].at_ms - change_ms) / MS_PER_DAY


def _measures(found: Mapping[str, list[tuple[float | None, float | None]]]) -> dict[str, Any]:
    out = {}
    for name, values in found.items():
        out[f"{name}Sessions"] = _distribution([s for s, _ in values])
        out[f"{name}Days"] = _distribution([d for _, d in values])
    return out


def adaptation(
    records: Sequence[SessionRecord], changes: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """Sessions and days after a change until memory follows it.

    ``changes``: user → ``{"kind", "atMs", "abandoned", "adopted"}``. Counts start at the
    first session after the change (0 = already adapted there); days are from the change.
    Switch and break users count only if the abandoned tool was recommended first when the
    change happened (else there was nothing to unlearn; their share is ``learned``).
    """
    timelines = _timeline(records)
    out: dict[str, Any] = {}
    for kind in ("switch", "break"):
        found: dict[str, list[tuple[float | None, float | None]]] = {
            "abandonedStops": [],
            "adoptedStarts": [],
        }
        eligible = 0
        for user, change in changes.items():
            after = [r for r in timelines.get(user, []) if r.after_change]
            if change["kind"] != kind or not after:
                continue
            eligible += 1
            if after[0].change_top != change["abandoned"]:
                continue
            at = change["atMs"]
            dropped = [r.change_top != change["abandoned"] for r in after]
            adopted = [r.change_top == change["adopted"] for r in after]
            found["abandonedStops"].append(_settled(after, dropped, at))
            found["adoptedStarts"].append(_settled(after, adopted, at))
        learned = len(found["abandonedStops"])
        out[kind] = {
            "users": eligible,
            "learned": round(learned / eligible, 4) if eligible else None,
            **_measures(found),
        }
    moves: dict[str, list[tuple[float | None, float | None]]] = {
        "oldDomainLeavesPrompt": [],
        "newDomainInPrompt": [],
    }
    for user, change in changes.items():
        pairs = [
            (r, r.move_prompt)
            for r in timelines.get(user, [])
            if r.after_change and r.move_prompt is not None
        ]
        if change["kind"] != "move" or not pairs:
            continue
        after = [r for r, _ in pairs]
        at = change["atMs"]
        moves["oldDomainLeavesPrompt"].append(_settled(after, [not p[0] for _, p in pairs], at))
        moves["newDomainInPrompt"].append(_settled(after, [p[1] for _, p in pairs], at))
    out["move"] = {"users": len(moves["newDomainInPrompt"]), **_measures(moves)}
    return out


def flaky_episodes(records: Sequence[SessionRecord]) -> dict[str, Any]:
    """Runs of consecutive session starts in which a flaky tool's net affinity is positive."""
    lengths_s: list[float | None] = []
    lengths_d: list[float | None] = []
    boosted = observed = 0
    for timeline in _timeline(records).values():
        tools = sorted({tool for r in timeline for tool in r.flaky})
        for tool in tools:
            start: SessionRecord | None = None
            count = 0
            for record in timeline:
                if tool not in record.flaky:
                    continue
                value = record.flaky[tool]
                if value is not None:
                    observed += 1
                positive = value is not None and value > 0
                boosted += positive
                if positive:
                    if start is None:
                        start, count = record, 0
                    count += 1
                elif start is not None:
                    lengths_s.append(float(count))
                    lengths_d.append((record.at_ms - start.at_ms) / MS_PER_DAY)
                    start = None
            if start is not None:  # still boosted at the end of the run: censored
                lengths_s.append(None)
                lengths_d.append(None)
    return {
        "episodes": len(lengths_s),
        "boostedShareOfKnown": round(boosted / observed, 4) if observed else None,
        "sessions": _distribution(lengths_s),
        "days": _distribution(lengths_d),
    }
