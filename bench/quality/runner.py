"""Run the LoCoMo turn-retrieval evaluation through the real HTTP API of ``engram serve``.

One embedded PostgreSQL serves the whole run. For every configuration (``configs.py``) a fresh
database is created on it and ``engram serve`` is started on that database (its ``ENGRAM_*``
settings: ``EVAL_SETTINGS`` plus the configuration's own). Every conversation is one user of
one team: its turns are saved with ``POST /v1/memories`` (``{key, value}``), then each of its
questions is asked with ``GET /v1/memories?query=<question>&maxResults=20``; the keys returned,
in order, are the ranking that is scored (``metrics.py``).

The baseline runs in the same run on the same PostgreSQL, on the very rows the first
configuration stored: ``BASELINE_SQL``, the OR of the question's lexemes
(``plainto_tsquery('english', question)`` with ``&`` turned into ``|``) matched against the
stored ``tsv`` column and ranked by ``ts_rank_cd``, ties by key.

Times: index seconds per configuration (the saves, four HTTP clients at once), and per-query
latency (one client, sequential) as the harness sees it over HTTP; the baseline's per-query
latency is one SQL statement from a direct connection (no HTTP, no auth, no RLS).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.quality.configs import EVAL_SETTINGS, EvalConfig
from bench.quality.locomo import Conversation, Question, load
from bench.quality.metrics import DEPTH, Outcome, first_rank, summarise

TEAM = "engram-eval"
INDEX_CLIENTS = 4
MAX_THROTTLED_WAITS = 50

BASELINE_SQL = (
    "WITH q AS (SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')::tsquery"
    " AS q) SELECT m.key FROM memories m, q WHERE m.team_id = %(team)s AND m.scope = 'user'"
    " AND m.owner_id = %(user)s AND m.status = 'active' AND m.tsv @@ q.q"
    " ORDER BY ts_rank_cd(m.tsv, q.q) DESC, m.key LIMIT %(depth)s"
)


def user_of(conv: Conversation) -> str:
    return f"locomo-{conv.sample_id}"


def latency(samples_ms: Sequence[float]) -> dict[str, float]:
    if not samples_ms:
        return {"p50": 0.0, "p99": 0.0, "n": 0}
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else None
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(q[98] if q else ordered[0], 3),
        "n": len(ordered),
    }


@dataclass
class Throttle:
    """429s met (each honoured by waiting its ``Retry-After``)."""

    count: int = 0
    waited_s: float = 0.0


def call(
    client: httpx.Client, throttle: Throttle, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """One request; a 429 is waited out (``Retry-After``) and retried, anything else non-2xx
    raises with the service's answer."""
    for _ in range(MAX_THROTTLED_WAITS):
        response = client.request(method, url, **kwargs)
        if response.status_code != 429:
            if response.is_error:
                raise RuntimeError(f"{method} {url}: {response.status_code} {response.text[:500]}")
            return response
        wait = float(response.headers.get("Retry-After") or 1)
        throttle.count += 1
        throttle.waited_s += wait
        time.sleep(wait)
    raise RuntimeError(f"{method} {url}: still throttled after {MAX_THROTTLED_WAITS} waits")


@dataclass
class ConfigRun:
    config: EvalConfig
    ranks: dict[tuple[str, int], int | None] = field(default_factory=dict)
    """(conversation, question index) -> rank of the first evidence turn."""
    index_s: float = 0.0
    query_ms: list[float] = field(default_factory=list)
    throttle: Throttle = field(default_factory=Throttle)
    saved: int = 0
    updated: int = 0


def index_conversation(
    base_url: str, token: str, conv: Conversation, run: ConfigRun, clients: int = INDEX_CLIENTS
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    chunks = [conv.memories[i::clients] for i in range(clients)]

    def save(chunk: Sequence[Any]) -> tuple[int, int]:
        created = updated = 0
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
            for m in chunk:
                r = call(
                    http,
                    run.throttle,
                    "POST",
                    "/v1/memories",
                    json={"key": m.key, "value": m.value},
                )
                if r.status_code == 201:
                    created += 1
                else:
                    updated += 1
        return created, updated

    with ThreadPoolExecutor(max_workers=clients) as pool:
        for created, updated in pool.map(save, chunks):
            run.saved += created
            run.updated += updated


def ask(http: httpx.Client, run: ConfigRun, question: Question) -> list[str]:
    started = time.perf_counter()
    r = call(
        http,
        run.throttle,
        "GET",
        "/v1/memories",
        params={"query": question.text, "maxResults": DEPTH},
    )
    run.query_ms.append((time.perf_counter() - started) * 1000)
    return [m["key"] for m in r.json()["memories"]]


def _scored(
    conversations: Sequence[Conversation], ranks: dict[tuple[str, int], int | None]
) -> dict[str, Any]:
    outcomes = [
        Outcome(q.category, ranks[(c.sample_id, i)])
        for c in conversations
        for i, q in enumerate(c.questions)
    ]
    return summarise(outcomes)


def per_conversation(
    conversations: Sequence[Conversation], ranks: dict[tuple[str, int], int | None]
) -> dict[str, Any]:
    return {c.sample_id: _scored([c], ranks)["overall"] for c in conversations}


@contextmanager
def embedded_postgres() -> Iterator[Callable[[str], str]]:
    """An embedded PostgreSQL for the run; yields ``fresh(name) -> url`` (a new database)."""
    from engram.adapters.embedded import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="engram-eval-pg-") as root:
        pg = EmbeddedPostgres(Path(root))
        try:

            def fresh(name: str) -> str:
                with psycopg.connect(pg.url(), autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                return pg.ensure_database(name)

            yield fresh
        finally:
            pg.stop()


def run_config(
    config: EvalConfig,
    database_url: str,
    conversations: Sequence[Conversation],
    log: Callable[[str], None],
) -> ConfigRun:
    from tests.e2e.harness import run_local_service

    run = ConfigRun(config)
    env = {**EVAL_SETTINGS, **config.env}
    with run_local_service(None, extra_env=env, database_url=database_url) as svc:
        tokens = {c.sample_id: svc.token(user_of(c), TEAM) for c in conversations}
        started = time.perf_counter()
        for conv in conversations:
            index_conversation(svc.url, tokens[conv.sample_id], conv, run)
        run.index_s = time.perf_counter() - started
        log(f"   {config.name}: indexed {run.saved} memories in {run.index_s:.1f} s")
        for conv in conversations:
            headers = {"Authorization": f"Bearer {tokens[conv.sample_id]}"}
            with httpx.Client(base_url=svc.url, headers=headers, timeout=60) as http:
                for i, q in enumerate(conv.questions):
                    run.ranks[(conv.sample_id, i)] = first_rank(ask(http, run, q), q.evidence)
        log(f"   {config.name}: {len(run.query_ms)} queries, p50 {latency(run.query_ms)['p50']} ms")
    return run


def run_baseline(
    database_url: str, conversations: Sequence[Conversation]
) -> tuple[dict[tuple[str, int], int | None], list[float]]:
    ranks: dict[tuple[str, int], int | None] = {}
    times: list[float] = []
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SET client_min_messages = warning")  # stop-word-only questions NOTICE
        for conv in conversations:
            for i, q in enumerate(conv.questions):
                params = {"q": q.text, "team": TEAM, "user": user_of(conv), "depth": DEPTH}
                started = time.perf_counter()
                keys = [r[0] for r in conn.execute(BASELINE_SQL, params).fetchall()]
                times.append((time.perf_counter() - started) * 1000)
                ranks[(conv.sample_id, i)] = first_rank(keys, q.evidence)
    return ranks, times


def evaluate(
    data: Path,
    configs: Sequence[EvalConfig],
    *,
    limit: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole evaluation (the first ``limit`` conversations only, when given); a JSON-able
    result (``report.py`` shows it)."""
    conversations = load(data)[:limit]
    questions = sum(len(c.questions) for c in conversations)
    log(
        f"   {len(conversations)} conversations, {sum(len(c.memories) for c in conversations)} "
        f"memories, {questions} questions"
    )
    runs: list[ConfigRun] = []
    with embedded_postgres() as fresh:
        baseline_url = ""
        for config in configs:
            url = fresh(f"eval_{config.name}")
            baseline_url = baseline_url or url
            runs.append(run_config(config, url, conversations, log))
        base_ranks, base_ms = run_baseline(baseline_url, conversations)
        with psycopg.connect(baseline_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            postgres = row[0] if row else None
    baseline = _scored(conversations, base_ranks)
    out_configs: dict[str, Any] = {}
    for run in runs:
        scored = _scored(conversations, run.ranks)
        overall, base = scored["overall"], baseline["overall"]
        out_configs[run.config.name] = {
            "description": run.config.description,
            "settings": {**EVAL_SETTINGS, **run.config.env},
            **scored,
            "ratioToBaseline": {
                k: round(overall[k] / base[k], 3) if base[k] else None
                for k in ("R@5", "R@10", "R@20", "MRR")
            },
            "perConversation": per_conversation(conversations, run.ranks),
            "index": {
                "seconds": round(run.index_s, 2),
                "memoriesPerSecond": round(run.saved / run.index_s, 1) if run.index_s else None,
                "created": run.saved,
                "updated": run.updated,
                "clients": INDEX_CLIENTS,
            },
            "queryMs": latency(run.query_ms),
            "throttled": {"responses": run.throttle.count, "waitedSeconds": run.throttle.waited_s},
        }
    return {
        "data": {
            "path": str(data),
            "conversations": [c.sample_id for c in conversations],
            "memories": sum(len(c.memories) for c in conversations),
            "questions": questions,
            "skippedQuestions": sum(c.skipped_questions for c in conversations),
            "droppedEvidence": {
                c.sample_id: c.dropped_evidence for c in conversations if c.dropped_evidence
            },
        },
        "postgres": postgres,
        "configs": out_configs,
        "baseline": {
            "sql": BASELINE_SQL,
            **baseline,
            "perConversation": per_conversation(conversations, base_ranks),
            "queryMs": latency(base_ms),
        },
        "details": {
            "ranks": {
                "baseline": _rank_table(conversations, base_ranks),
                **{r.config.name: _rank_table(conversations, r.ranks) for r in runs},
            }
        },
    }


def _rank_table(
    conversations: Sequence[Conversation], ranks: dict[tuple[str, int], int | None]
) -> dict[str, str]:
    """Per conversation, the rank of each question's first evidence turn in question order
    (``-`` when not in the top ``DEPTH``), space-separated: a compact record to diff runs by."""
    return {
        c.sample_id: " ".join(
            str(r) if (r := ranks[(c.sample_id, i)]) is not None else "-"
            for i in range(len(c.questions))
        )
        for c in conversations
    }
