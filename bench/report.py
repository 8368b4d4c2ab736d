"""``write_report(results_dir)``: ``bench/REPORT.md``, its PNG figures and
``bench/results/latest.json`` from the ``bench/results/*.json`` a ``python -m bench`` run wrote.

Called by ``bench/__main__.py`` at the end of every run; also ``python -m bench.report`` to
regenerate from the files present. Every number in the report is read from those files; each
section names the file and when it ran, and a section whose file is older than the rest of
the run (a benchmark not re-run this time) says so. Figures (matplotlib, Agg backend):

- session start (``POST /v1/sessions`` through the local service) against pending
  observations, with consolidation alone and the server's HTTP floor; and against facts;
- ingest throughput against redis-benchmark's pipelined ZADD (ratios);
- recall latency against corpus size, with the bare-SQL floor and LangGraph's PostgresStore;
- handler cold-import times against the 300 ms target;
- behavioural memory on simulated users (``bench/behaviour/report.py``): top-1 accuracy by
  session of use, per simulated day, and per decay × boost configuration.

Each figure shows medians and p99s over the repeated runs; the machine is described at the
top (CPU model, cores, memory, load average, Python, Redis and PostgreSQL versions).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.quality.report import section as quality_section

HERE = Path(__file__).resolve().parent
STALE_AFTER = dt.timedelta(hours=2)
NAGLE_SUSPECT_MS = 20.0


# --- inputs ----------------------------------------------------------------------------------
def load_results(results_dir: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(results_dir.glob("*.json")):
        if path.name == "latest.json":
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[path.stem] = data
    return out


def _ran_at(data: dict[str, Any]) -> dt.datetime | None:
    value = data.get("ranAt")
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _first_line(path: str, pattern: str) -> str | None:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1).strip() if match else None


def _redis_version() -> str | None:
    exe = shutil.which("redis-server")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"v=(\S+)", out.stdout)
    return match.group(1) if match else None


def describe_machine(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    mem_kb = _first_line("/proc/meminfo", r"^MemTotal:\s+(\d+)")
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    postgres = None
    for name in ("recall", "recall_curve"):
        postgres = postgres or results.get(name, {}).get("postgres")
    redis_version = None
    for name in ("consolidation", "ingest"):
        redis_version = redis_version or (results.get(name, {}).get("redis") or {}).get("version")
    return {
        "cpuModel": _first_line("/proc/cpuinfo", r"^model name\s*:\s*(.+)$")
        or platform.processor(),
        "cores": os.cpu_count(),
        "memoryGiB": round(int(mem_kb) / 1024 / 1024, 1) if mem_kb else None,
        "loadAverage1m5m15m": load,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "redis": redis_version or _redis_version(),
        "postgres": postgres,
    }


# --- figures ---------------------------------------------------------------------------------
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path.name


def fig_session_pending(results: dict[str, Any], out: Path) -> str | None:
    curve = results.get("session_curve", {}).get("byPending")
    cons = results.get("consolidation", {}).get("rows")
    if not curve and not cons:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if curve:
        xs = [r["pendingObservations"] for r in curve]
        ax.plot(xs, [r["sessionMs"]["p50"] for r in curve], "o-", label="session start p50 (HTTP)")
        ax.plot(xs, [r["sessionMs"]["p99"] for r in curve], "o--", label="session start p99 (HTTP)")
    if cons:
        xs = [r["pendingObservations"] for r in cons]
        ax.plot(xs, [r["consolidationMs"]["p50"] for r in cons], "s-", label="consolidation p50")
        ax.plot(xs, [r["consolidationMs"]["p99"] for r in cons], "s--", label="consolidation p99")
        ax.plot(xs, [r["floorMs"]["p50"] for r in cons], "x:", label="Redis read floor p50")
    floor = results.get("session_curve", {}).get("httpFloorMs")
    if floor:
        ax.axhline(
            floor["p50"], color="grey", linestyle=":", label="HTTP floor p50 (GET /v1/tools)"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pending observations (200 facts)")
    ax.set_ylabel("ms")
    ax.set_title("Session start vs pending observations")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out / "session_vs_pending.png")


def fig_session_facts(results: dict[str, Any], out: Path) -> str | None:
    curve = results.get("session_curve", {}).get("byFacts")
    if not curve:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [r["facts"] for r in curve]
    ax.plot(xs, [r["sessionMs"]["p50"] for r in curve], "o-", label="p50")
    ax.plot(xs, [r["sessionMs"]["p99"] for r in curve], "o--", label="p99")
    ax.set_xscale("log")
    ax.set_xlabel("facts (100 pending observations)")
    ax.set_ylabel("ms")
    ax.set_title("Session start vs facts")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, out / "session_vs_facts.png")


def fig_ingest(results: dict[str, Any], out: Path) -> str | None:
    ingest = results.get("ingest")
    if not ingest:
        return None
    plt = _plt()
    labels, med, worst = [], [], []
    for key, label in (
        ("append", "store append\n(batches of 10)"),
        ("consumer", "consumer handler\n(SQS batches of 10)"),
        ("http", "HTTP ingest\n(local service)"),
    ):
        part = ingest.get(key)
        if part:
            labels.append(label)
            med.append(part["observationsPerSecond"]["median"])
            worst.append(part["observationsPerSecond"]["worst"])
    zadd = ingest.get("redisBenchmarkZadd")
    if zadd:
        labels.append("redis-benchmark\nZADD -P 16")
        med.append(zadd["zaddPerSecond"]["median"])
        worst.append(zadd["zaddPerSecond"]["worst"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ys = range(len(labels))
    ax.barh(list(ys), med, color="tab:blue", label="median of runs")
    ax.scatter(worst, list(ys), color="black", marker="|", s=200, label="worst run", zorder=3)
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(right=max(med) * 8)
    ax.set_xlabel("per second (observations; ZADDs for the floor)")
    ax.set_title("Ingest throughput vs pipelined ZADD")
    if zadd:
        floor = zadd["zaddPerSecond"]["median"]
        for y, value in zip(ys, med, strict=True):
            ax.text(value, y, f"  {value:,.0f} ({value / floor:.3f}x)", va="center", fontsize=7)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out / "ingest_throughput.png")


def recall_points(results: dict[str, Any]) -> list[dict[str, Any]]:
    by_size: dict[int, dict[str, Any]] = {}
    for name in ("recall_curve", "recall"):  # recall wins for sizes both measured
        for run in results.get(name, {}).get("runs", []):
            by_size[int(run["size"])] = {**run, "_source": name}
    return [by_size[s] for s in sorted(by_size)]


def fig_recall(results: dict[str, Any], out: Path) -> str | None:
    points = recall_points(results)
    if not points:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p["size"] for p in points]
    for key, label, style in (
        ("engram_keyword", "Engram recall", "o"),
        ("floor_bare_sql_fts", "bare SQL floor", "x"),
        ("peer_langgraph_search", "LangGraph PostgresStore", "s"),
    ):
        ax.plot(xs, [p[key]["p50_ms"] for p in points], f"{style}-", label=f"{label} p50")
        ax.plot(xs, [p[key]["p99_ms"] for p in points], f"{style}--", label=f"{label} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories in the table")
    ax.set_ylabel("ms per recall")
    ax.set_title("Recall latency vs corpus size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out / "recall_vs_corpus.png")


def fig_imports(results: dict[str, Any], out: Path) -> str | None:
    handlers = results.get("handlers", {}).get("imports", {}).get("handlers")
    if not handlers:
        return None
    plt = _plt()
    names = list(handlers)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = range(len(names))
    ax.bar(
        [x - 0.2 for x in xs], [handlers[n]["importMsMedian"] for n in names], 0.4, label="median"
    )
    ax.bar(
        [x + 0.2 for x in xs], [handlers[n]["importMsMax"] for n in names], 0.4, label="max of runs"
    )
    target = results["handlers"]["imports"].get("targetMs")
    if target:
        ax.axhline(target, color="red", linestyle="--", label=f"target {target:.0f} ms")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("ms (python -X importtime, fresh process)")
    ax.set_title("Handler cold-import time")
    ax.legend(fontsize=8)
    return _save(fig, out / "handler_imports.png")


# --- markdown --------------------------------------------------------------------------------
def _source(name: str, data: dict[str, Any], newest: dt.datetime | None) -> str:
    ran = _ran_at(data)
    text = f"_Source: `results/{name}.json`, ran {data.get('ranAt', '?')}"
    if data.get("seconds") is not None:
        text += f" ({data['seconds']} s)"
    if data.get("quick"):
        text += ", **quick mode** (ENGRAM_BENCH_QUICK=1: fewer, smaller repetitions)"
    if ran and newest and newest - ran > STALE_AFTER:
        text += ", **not re-run in this run** (older than the rest)"
    return text + "._"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return lines


def render(
    results: dict[str, dict[str, Any]], machine: dict[str, Any], figures: dict[str, str | None]
) -> str:
    stamps = [t for t in (_ran_at(d) for d in results.values()) if t is not None]
    newest = max(stamps) if stamps else None
    md: list[str] = [
        "# Engram benchmark report",
        "",
        "Generated by `make bench` (`python -m bench`) from the files in `bench/results/`; every "
        "number below comes from those files. Ratios to floors measured on the same machine in "
        "the same run carry the claims, not absolute times.",
        "",
        "## Machine",
        "",
        *_table(
            ["CPU", "cores", "memory", "load avg (1/5/15 min)", "Python", "Redis", "PostgreSQL"],
            [
                [
                    machine.get("cpuModel"),
                    machine.get("cores"),
                    f"{machine.get('memoryGiB')} GiB",
                    " / ".join(str(x) for x in machine.get("loadAverage1m5m15m") or []),
                    machine.get("python"),
                    machine.get("redis"),
                    machine.get("postgres"),
                ]
            ],
        ),
        "",
        f"Platform: `{machine.get('platform')}`. The load average is read when the report is "
        "written (after the benchmarks).",
        "",
    ]

    # session start
    md += ["## Session start vs pending observations and facts", ""]
    curve = results.get("session_curve")
    cons = results.get("consolidation")
    if curve:
        md.append(_source("session_curve", curve, newest))
        md.append("")
        rows = [
            [
                r["pendingObservations"],
                r["facts"],
                r["sessionMs"]["p50"],
                r["sessionMs"]["p99"],
                r["sessionMs"]["n"],
                r["degradedResponses"],
            ]
            for r in [*curve.get("byPending", []), *curve.get("byFacts", [])]
        ]
        md += _table(
            ["pending", "facts", "session p50 ms", "session p99 ms", "requests", "degraded"], rows
        )
        floor = curve.get("httpFloorMs") or {}
        md += [
            "",
            f"HTTP floor of the same server (`GET /v1/tools`): p50 {floor.get('p50')} ms, "
            f"p99 {floor.get('p99')} ms.",
        ]
        if floor.get("p50", 0) > NAGLE_SUSPECT_MS:
            md += [
                "",
                f"**Note:** the HTTP floor is above {NAGLE_SUSPECT_MS:.0f} ms for a route that "
                "touches no store: the local server writes the response headers and body in two "
                "sends without `TCP_NODELAY`, so small keep-alive responses wait for the "
                "client's delayed ACK (~40 ms). This inflates local HTTP latencies, not the "
                "handlers; see the stress-suite report.",
            ]
        md.append("")
    if cons:
        md.append(_source("consolidation", cons, newest))
        md.append("")
        md += _table(
            [
                "pending",
                "consolidation p50 ms",
                "p99 ms",
                "Redis floor p50",
                "ratio p50",
                "round trips",
            ],
            [
                [
                    r["pendingObservations"],
                    r["consolidationMs"]["p50"],
                    r["consolidationMs"]["p99"],
                    r["floorMs"]["p50"],
                    r["ratioToFloor"]["p50"],
                    ",".join(str(x) for x in r["roundTrips"]),
                ]
                for r in cons.get("rows", [])
            ],
        )
        md.append("")
    for key in ("session_pending", "session_facts"):
        if figures.get(key):
            md += [f"![{key}]({figures[key]})", ""]
    if not curve and not cons:
        md += ["_Not measured in this run._", ""]

    # ingest
    md += ["## Ingest throughput vs redis-benchmark's pipelined ZADD", ""]
    ingest = results.get("ingest")
    if ingest:
        md.append(_source("ingest", ingest, newest))
        md.append("")
        zadd = ingest.get("redisBenchmarkZadd") or {}
        floor = (zadd.get("zaddPerSecond") or {}).get("median")
        rows = []
        for key, label, lat in (
            ("append", "store append (10/batch)", "batchMs"),
            ("consumer", "consumer handler (SQS batch of 10)", "batchMs"),
            ("http", "HTTP POST /v1/observations (100/request, 4 clients)", "requestMs"),
        ):
            part = ingest.get(key)
            if not part:
                continue
            rate = part["observationsPerSecond"]
            rows.append(
                [
                    label,
                    rate["median"],
                    rate["worst"],
                    part[lat]["p50"],
                    part[lat]["p99"],
                    round(rate["median"] / floor, 4) if floor else "n/a",
                ]
            )
        md += _table(
            [
                "path",
                "obs/s median",
                "obs/s worst run",
                "batch/request p50 ms",
                "p99 ms",
                "ratio to ZADD/s",
            ],
            rows,
        )
        if zadd:
            md += [
                "",
                f"Floor: `{zadd.get('command')}`: median {floor:,.0f} ZADD/s over "
                f"{zadd.get('runs')} runs (worst {zadd['zaddPerSecond']['worst']:,.0f}). An "
                "observation is more than a ZADD: the append script writes the log, the id "
                "index, the time index, the pending aggregate and the state hash atomically, "
                "and the floor uses 50 pipelining clients where the Engram paths use one (four "
                "for HTTP).",
            ]
        md.append("")
        if figures.get("ingest"):
            md += [f"![ingest]({figures['ingest']})", ""]
    else:
        md += ["_Not measured in this run._", ""]

    # load
    md += ["## Load with reconciliation", ""]
    load = (ingest or {}).get("load") or results.get("load")
    if load:
        rec = load.get("reconciliation", {})
        md += [
            f"{load['clients']} concurrent clients x {load['iterations']} iterations (events, "
            "sessions, memory writes) against the local service on loopback: "
            f"{load['requests']} requests in {load['seconds']} s = {load['requestsPerSecond']} "
            f"req/s, {load['observationsPerSecond']} accepted observations/s, "
            f"**{load['errorCount']} errors** ({json.dumps(load.get('errors', {}))}).",
            "",
            f"Reconciliation: every observation that got a 202 is in Redis exactly once "
            f"({rec.get('observationsConsolidated')} consolidated, "
            f"{rec.get('observationsPending')} still pending); every memory write that got a "
            f"2xx is in PostgreSQL ({rec.get('memoriesFound')}); dead letters: "
            f"{rec.get('deadLetters')}. Result: {'ok' if rec.get('ok') else 'FAILED'}.",
            "",
        ]
        lat = load.get("latencyMs", {})
        md += _table(
            ["request", "n", "p50 ms", "p99 ms", "max ms"],
            [[k, v["n"], v["p50"], v["p99"], v["max"]] for k, v in lat.items()],
        )
        md.append("")
    else:
        md += ["_Not measured in this run._", ""]

    # recall
    md += ["## Recall latency vs corpus size", ""]
    points = recall_points(results)
    if points:
        for name in ("recall", "recall_curve"):
            if name in results:
                md.append(_source(name, results[name], newest))
        md.append("")
        md += _table(
            [
                "memories",
                "Engram p50 ms",
                "p99 ms",
                "floor p50",
                "floor p99",
                "ratio p99",
                "LangGraph p50",
                "LangGraph p99",
                "ratio to LangGraph p99",
            ],
            [
                [
                    p["size"],
                    p["engram_keyword"]["p50_ms"],
                    p["engram_keyword"]["p99_ms"],
                    p["floor_bare_sql_fts"]["p50_ms"],
                    p["floor_bare_sql_fts"]["p99_ms"],
                    p["ratio_keyword_p99_to_floor_p99"],
                    p["peer_langgraph_search"]["p50_ms"],
                    p["peer_langgraph_search"]["p99_ms"],
                    p["ratio_keyword_p99_to_peer_p99"],
                ]
                for p in points
            ],
        )
        md += [
            "",
            "Engram recall = pool + tenant settings + row-level security + scope resolution + "
            "full-text match + rank fusion; the floor is one bare full-text SQL statement on "
            "the same rows; LangGraph's `PostgresStore.search` filters by namespace (it ignores "
            "the query text without an index config).",
            "",
        ]
        if figures.get("recall"):
            md += [f"![recall]({figures['recall']})", ""]
    else:
        md += ["_Not measured in this run._", ""]

    quality = results.get("quality")
    md += quality_section(quality, _source("quality", quality, newest) if quality else "", _table)

    # imports
    md += ["## Handler cold-import times", ""]
    handlers = results.get("handlers")
    imports = (handlers or {}).get("imports", {}).get("handlers")
    if handlers and imports:
        md.append(_source("handlers", handlers, newest))
        md.append("")
        md += _table(
            [
                "handler",
                "import median ms",
                "import max ms",
                "process wall median ms",
                "under target",
            ],
            [
                [
                    n,
                    v["importMsMedian"],
                    v["importMsMax"],
                    v["processWallMsMedian"],
                    v["underTarget"],
                ]
                for n, v in imports.items()
            ],
        )
        md.append("")
        if figures.get("imports"):
            md += [f"![imports]({figures['imports']})", ""]
    else:
        md += ["_Not measured in this run._", ""]

    behaviour = results.get("behaviour")
    if behaviour:
        from bench.behaviour.report import section

        md += section(behaviour, figures, _source("behaviour", behaviour, newest))

    md += ["## Summaries as printed", ""]
    for name, data in results.items():
        if data.get("summary"):
            md += [f"`{name}`:", "", "```", str(data["summary"]).rstrip(), "```", ""]
    return "\n".join(md).rstrip() + "\n"


def write_report(results_dir: Path = HERE / "results", report_dir: Path | None = None) -> Path:
    """Write REPORT.md (+ PNGs) next to ``results_dir`` and ``results_dir/latest.json``."""
    results_dir = Path(results_dir)
    report_dir = Path(report_dir) if report_dir is not None else results_dir.parent
    results = load_results(results_dir)
    machine = describe_machine(results)
    figures_dir = report_dir / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        "session_pending": fig_session_pending(results, figures_dir),
        "session_facts": fig_session_facts(results, figures_dir),
        "ingest": fig_ingest(results, figures_dir),
        "recall": fig_recall(results, figures_dir),
        "imports": fig_imports(results, figures_dir),
    }
    if results.get("behaviour"):
        from bench.behaviour.report import figures as behaviour_figures

        figures.update(behaviour_figures(results["behaviour"], figures_dir, _plt()))
    figures = {k: (f"figures/{v}" if v else None) for k, v in figures.items()}
    report = report_dir / "REPORT.md"
    report.write_text(render(results, machine, figures))
    latest = {
        "generatedAt": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "figures": {k: v for k, v in figures.items() if v},
        "results": results,
    }
    tmp = results_dir / "latest.json.tmp"
    tmp.write_text(json.dumps(latest, indent=2) + "\n")
    tmp.replace(results_dir / "latest.json")
    return report


if __name__ == "__main__":
    print(write_report())
