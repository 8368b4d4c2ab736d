"""Retrieval metrics of the LoCoMo turn-retrieval task.

For one query with ranked keys (best first, at most ``DEPTH``) and a set of relevant keys:

- ``rank``: the 1-based position of the first relevant key within the first ``DEPTH``, else
  ``None``;
- R@k: 1 when ``rank <= k`` (at least one relevant key in the top k), else 0;
- reciprocal rank: ``1 / rank``, 0 when ``rank`` is ``None`` (MRR truncated at ``DEPTH``).

``summarise`` averages them over queries, overall and per category.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEPTH = 20
CUTOFFS = (5, 10, 20)


def first_rank(ranked: Sequence[str], relevant: Iterable[str], depth: int = DEPTH) -> int | None:
    wanted = set(relevant)
    for position, key in enumerate(ranked[:depth], start=1):
        if key in wanted:
            return position
    return None


@dataclass(frozen=True)
class Outcome:
    """One query's result: its category and the rank of its first relevant key."""

    category: int
    rank: int | None


def _scores(outcomes: Sequence[Outcome]) -> dict[str, float | int]:
    n = len(outcomes)
    out: dict[str, float | int] = {"n": n}
    for k in CUTOFFS:
        hits = sum(1 for o in outcomes if o.rank is not None and o.rank <= k)
        out[f"R@{k}"] = round(hits / n, 4) if n else 0.0
    mrr = sum(1.0 / o.rank for o in outcomes if o.rank is not None)
    out["MRR"] = round(mrr / n, 4) if n else 0.0
    return out


def summarise(outcomes: Sequence[Outcome]) -> dict[str, object]:
    """``{"overall": {n, R@5, R@10, R@20, MRR}, "byCategory": {"<c>": {...}}}`` (rounded to
    four decimals)."""
    categories = sorted({o.category for o in outcomes})
    return {
        "overall": _scores(outcomes),
        "byCategory": {
            str(c): _scores([o for o in outcomes if o.category == c]) for c in categories
        },
    }
