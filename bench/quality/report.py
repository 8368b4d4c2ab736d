"""The report's "Recall quality" section, from ``results/quality.json``.

``section(quality, source, table)`` returns the markdown lines: the data used, one row per
served configuration and one for the plain-SQL baseline (R@5/R@10/R@20/MRR, the ratio to the
baseline, index and query times), R@10 per category and per conversation, the settings of the
served instances and the targets. ``source`` is the section's source line and ``table`` the
report's table renderer, so every section of the report looks alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.quality.locomo import CATEGORIES

Table = Callable[[list[str], list[list[Any]]], list[str]]


def _rows(quality: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [*quality.get("configs", {}).items(), ("baseline (plain SQL)", quality["baseline"])]


def section(quality: dict[str, Any] | None, source: str, table: Table) -> list[str]:
    md = ["## Recall quality (LoCoMo turn retrieval)", ""]
    if not quality:
        return [*md, "_Not measured in this run._", ""]
    data = quality["data"]
    rows = _rows(quality)
    md += [
        source,
        "",
        f"Data: `{data['path']}`: {len(data['conversations'])} conversations "
        f"({', '.join(data['conversations'])}), {data['memories']} memories (one per turn), "
        f"{data['questions']} questions of categories 1-4 ({data['skippedQuestions']} skipped: "
        "no usable evidence). Each configuration is `engram serve` indexed with "
        "`POST /v1/memories` and queried with `GET /v1/memories?query=&maxResults=20`, one "
        "user per conversation; the baseline is one SQL statement on the same rows: the OR of "
        "the question's lexemes ranked by `ts_rank_cd`.",
        "",
    ]
    md += table(
        [
            "configuration",
            "R@5",
            "R@10",
            "R@20",
            "MRR",
            "R@10 / baseline",
            "MRR / baseline",
            "index s",
            "query p50 ms",
            "query p99 ms",
        ],
        [
            [
                name,
                r["overall"]["R@5"],
                r["overall"]["R@10"],
                r["overall"]["R@20"],
                r["overall"]["MRR"],
                (r.get("ratioToBaseline") or {}).get("R@10", "-"),
                (r.get("ratioToBaseline") or {}).get("MRR", "-"),
                (r.get("index") or {}).get("seconds", "-"),
                r["queryMs"]["p50"],
                r["queryMs"]["p99"],
            ]
            for name, r in rows
        ],
    )
    md += [
        "",
        "Query times of the configurations are per request over HTTP as the harness sees them "
        "(sequential); the baseline's are one SQL statement on a direct connection.",
        "",
        "R@10 per category:",
        "",
    ]
    categories = sorted({c for _, r in rows for c in r["byCategory"]}, key=int)
    md += table(
        ["category", "questions", *(name for name, _ in rows)],
        [
            [
                f"{c} {CATEGORIES.get(int(c), '')}".strip(),
                rows[0][1]["byCategory"][c]["n"],
                *(r["byCategory"].get(c, {}).get("R@10", "-") for _, r in rows),
            ]
            for c in categories
        ],
    )
    md += ["", "R@10 / MRR per conversation:", ""]
    md += table(
        ["conversation", *(name for name, _ in rows)],
        [
            [
                conv,
                *(
                    f"{r['perConversation'][conv]['R@10']} / {r['perConversation'][conv]['MRR']}"
                    for _, r in rows
                ),
            ]
            for conv in data["conversations"]
        ],
    )
    md.append("")
    for name, r in quality.get("configs", {}).items():
        settings = ", ".join(f"`{k}={v}`" for k, v in r.get("settings", {}).items())
        md.append(
            f"Served settings of `{name}`: {settings}; 429s met: {r['throttled']['responses']}."
        )
    if quality.get("targets"):
        md += ["", "Targets: " + ", ".join(f"{k} = {v}" for k, v in quality["targets"].items())]
    return [*md, ""]
