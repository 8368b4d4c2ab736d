"""The behaviour section of ``bench/REPORT.md``: its text summary, markdown and figures, all
read from ``bench/results/behaviour.json``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def _ci(x: dict[str, Any], digits: int = 3, scale: float = 1.0) -> str:
    if not x.get("n"):
        return "–"
    m, lo, hi = (x[k] * scale for k in ("mean", "lo", "hi"))
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _pts(x: dict[str, Any]) -> str:
    """A difference of shares in percentage points with its interval."""
    return _ci(x, digits=1, scale=100.0)


def _dist(x: dict[str, Any]) -> str:
    if not x.get("n"):
        return "–"
    median = "never" if x.get("median") is None else f"{x['median']:g}"
    p90 = "never" if x.get("p90") is None else f"{x['p90']:g}"
    return f"{median} / {p90} ({100 * x['adapted']:.0f} %)"


def reference_row(result: dict[str, Any]) -> dict[str, Any]:
    ref = result["reference"]
    return next(
        r for r in result["configs"] if (r["decay"], r["boost"]) == (ref["decay"], ref["boost"])
    )


def summary_text(result: dict[str, Any]) -> str:
    lines = []
    for row in result["configs"]:
        week = row["afterWeek"]
        switch = row["adaptation"]["switch"]["abandonedStopsSessions"]
        brk = row["adaptation"]["break"]["abandonedStopsSessions"]
        lines.append(
            f"{row['label']:<16} top-1 {week['top1']['memory']['mean']:.3f} "
            f"(none {week['top1']['none']['mean']:.3f}, margin {_pts(week['top1']['margin'])} "
            f"pts); NDCG@5 {week['ndcg5']['memory']['mean']:.3f}; prompt P/R "
            f"{week['promptPrecision']['mean']:.3f}/{week['promptRecall']['mean']:.3f}; "
            f"old tool dropped (median/p90 sessions): break {_dist(brk)}, switch {_dist(switch)}"
        )
    return "\n".join(lines)


# --- figures ---------------------------------------------------------------------------------
def _by_label(result: dict[str, Any]) -> dict[tuple[str, float], dict[str, Any]]:
    return {(r["decay"], r["boost"]): r for r in result["configs"]}


def fig_learning(result: dict[str, Any], out: Path, plt: Any) -> str:
    rows = _by_label(result)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ref = reference_row(result)
    curve = ref["bySession"]
    xs = [p["bucket"] + 1 for p in curve]
    ax.plot(xs, [p["top1None"] for p in curve], "k:", label="no memory")
    for boost in sorted({b for _, b in rows}):
        row = rows.get(("exponential", boost))
        if row is None:
            continue
        style = "-" if row is ref else "--"
        width = 2.2 if row is ref else 1.0
        ax.plot(
            xs,
            [p["top1Memory"] for p in row["bySession"]],
            style,
            linewidth=width,
            label=f"memory, boost ×{boost:g}",
        )
    ax.set_xlabel("the user's n-th session")
    ax.set_ylabel("top-1 accuracy (pooled over tasks)")
    ax.set_title("Tool choice vs sessions of use (ExponentialDecay)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out / "behaviour_learning.png", plt)


def fig_days(result: dict[str, Any], out: Path, plt: Any) -> str:
    ref = reference_row(result)
    curve = ref["byDay"]
    xs = [p["bucket"] for p in curve]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(xs, [p["top1Memory"] for p in curve], "-", label=f"memory ({ref['label']})")
    left.plot(xs, [p["top1None"] for p in curve], "k:", label="no memory")
    left.plot(xs, [p["ndcg5Memory"] for p in curve], "-", alpha=0.6, label="NDCG@5 memory")
    left.plot(xs, [p["ndcg5None"] for p in curve], "k--", alpha=0.6, label="NDCG@5 no memory")
    right.plot(xs, [p["promptPrecision"] for p in curve], "-", label="precision")
    right.plot(xs, [p["promptRecall"] for p in curve], "-", label="recall")
    change = result["world"]["changeDay"]
    left.set_ylim(0.0, 1.0)
    right.set_ylim(0.0, 1.05)
    for ax, title in ((left, "Tool ranking per day"), (right, "Prompt facts vs true profile")):
        ax.axvline(change, color="red", linestyle="--", linewidth=0.8, label="habits change")
        ax.set_xlabel("simulated day")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    return _save(fig, out / "behaviour_days.png", plt)


def fig_configs(result: dict[str, Any], out: Path, plt: Any) -> str:
    rows = _by_label(result)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, metric, title in (
        (axes[0], "top1", "Top-1 accuracy after a week (95 % CI)"),
        (axes[1], "ndcg5", "NDCG@5 after a week (95 % CI)"),
    ):
        for offset, decay in ((-0.06, "exponential"), (0.06, "adaptive")):
            chosen = sorted((b, r) for (d, b), r in rows.items() if d == decay)
            if not chosen:
                continue
            xs = [b + offset for b, _ in chosen]
            values = [r["afterWeek"][metric]["memory"] for _, r in chosen]
            ax.errorbar(
                xs,
                [v["mean"] for v in values],
                yerr=[
                    [v["mean"] - v["lo"] for v in values],
                    [v["hi"] - v["mean"] for v in values],
                ],
                fmt="o-",
                capsize=3,
                label=decay,
            )
        none = reference_row(result)["afterWeek"][metric]["none"]["mean"]
        ax.axhline(none, color="black", linestyle=":", label="no memory")
        ax.set_xlabel("boost factor (score + factor × affinity)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, out / "behaviour_configs.png", plt)


def _save(fig: Any, path: Path, plt: Any) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def figures(result: dict[str, Any], out: Path, plt: Any) -> dict[str, str]:
    makers: dict[str, Callable[[dict[str, Any], Path, Any], str]] = {
        "behaviour_learning": fig_learning,
        "behaviour_days": fig_days,
        "behaviour_configs": fig_configs,
    }
    return {name: make(result, out, plt) for name, make in makers.items()}


# --- markdown --------------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def section(result: dict[str, Any], figures: dict[str, str | None], source: str) -> list[str]:
    world = result["world"]
    ref = reference_row(result)
    week = ref["afterWeek"]
    md = [
        "## Does behavioural memory learn? (simulated users)",
        "",
        source,
        "",
        f"{world['users']} simulated users (seed {world['seed']}: "
        + ", ".join(f"{n} {k}" for k, n in world["archetypes"].items())
        + f"), {world['days']} days, {world['sessions']:,} sessions, {world['tasks']:,} tool "
        f"choices; on day {world['changeDay']} "
        + ", ".join(f"{n} users {k}" for k, n in world["changes"].items())
        + ". Each configuration lives through the same world on a fresh Engram (session start "
        "and events use cases, real Redis, fake clock). Intervals are 95 % bootstrap intervals "
        "over users; *after a week* = sessions at least 7 days after the user's first. The "
        "model and the decision it supports: docs/behaviour.md.",
        "",
        f"**Reference ({ref['label']}) after a week:** top-1 accuracy "
        f"{_ci(week['top1']['memory'])} with memory vs {_ci(week['top1']['none'])} without, "
        f"margin **{_pts(week['top1']['margin'])} points**; NDCG@5 "
        f"{_ci(week['ndcg5']['memory'])} vs {_ci(week['ndcg5']['none'])}; prompt precision "
        f"{_ci(week['promptPrecision'])}, recall {_ci(week['promptRecall'])} (Engram holds "
        f"{_ci(week['coreKnown'])} of the core facts; the token budget shows the recall's "
        "share).",
        "",
    ]
    rows = []
    for row in result["configs"]:
        w = row["afterWeek"]
        rows.append(
            [
                row["label"],
                _ci(w["top1"]["memory"]),
                _pts(w["top1"]["margin"]),
                _ci(w["ndcg5"]["memory"]),
                _pts(w["ndcg5"]["margin"]),
                _ci(w["promptPrecision"]),
                _ci(w["promptRecall"]),
                f"{row['msPerSession']:g}",
            ]
        )
    md += _table(
        [
            "decay × boost",
            "top-1",
            "top-1 margin (pts)",
            "NDCG@5",
            "NDCG@5 margin (pts)",
            "prompt precision",
            "prompt recall",
            "ms/session",
        ],
        rows,
    )
    md += [
        "",
        "Paired differences to the reference (same users, percentage points):",
        "",
    ]
    md += _table(
        ["decay × boost", "top-1", "NDCG@5", "prompt precision", "prompt recall"],
        [
            [
                c["label"],
                _pts(c["top1MemoryVsReference"]),
                _pts(c["ndcg5MemoryVsReference"]),
                _pts(c["promptPrecisionVsReference"]),
                _pts(c["promptRecallVsReference"]),
            ]
            for c in result["comparisons"]
        ],
    )
    md += [
        "",
        "Adaptation, median / p90 sessions after the change (share of users adapted within "
        "the run; *never* = not within the run). *Break*: the user's tool stopped working; "
        "*switch*: the user moved to the other tool while the old one still works; *move*: the "
        "user moved to a new domain. Flaky tools: how long a tool that fails 30-65 % of the "
        "time stays boosted (positive net affinity).",
        "",
    ]
    arows = []
    for row in result["configs"]:
        a = row["adaptation"]
        arows.append(
            [
                row["label"],
                _dist(a["break"]["abandonedStopsSessions"]),
                _dist(a["break"]["adoptedStartsSessions"]),
                _dist(a["switch"]["abandonedStopsSessions"]),
                _dist(a["switch"]["adoptedStartsSessions"]),
                _dist(a["move"]["newDomainInPromptSessions"]),
                _dist(a["move"]["oldDomainLeavesPromptDays"]),
                _dist(row["flaky"]["days"]),
            ]
        )
    md += _table(
        [
            "decay × boost",
            "break: old tool dropped",
            "break: new tool first",
            "switch: old tool dropped",
            "switch: new tool first",
            "move: new domain in prompt",
            "move: old domain leaves prompt (days)",
            "flaky tool boosted (days)",
        ],
        arows,
    )
    rankings = week.get("promptRankings") or {}
    if rankings:
        md += [
            "",
            "Prompt ranking, on the reference's sessions after a week (vs the shipped "
            "confidence × reinforcementCount, paired, points):",
            "",
        ]
        md += _table(
            ["ranking", "precision", "Δ precision", "recall", "Δ recall", "false facts shown"],
            [
                [
                    name,
                    _ci(v["promptPrecision"]["value"]),
                    _pts(v["promptPrecision"]["vsSeed"]),
                    _ci(v["promptRecall"]["value"]),
                    _pts(v["promptRecall"]["vsSeed"]),
                    _ci(v["falseInPrompt"]["value"], digits=2),
                ]
                for name, v in rankings.items()
            ],
        )
    md.append("")
    for name in ("behaviour_learning", "behaviour_days", "behaviour_configs"):
        if figures.get(name):
            md += [f"![{name}]({figures[name]})", ""]
    return md
