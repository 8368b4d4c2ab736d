"""Drive Engram through its public surfaces and log what each session saw.

Two ports keep the simulator independent of how Engram is reached:

- ``Engram``: ``start_session(user_id) -> SessionView`` (what ``POST /v1/sessions`` answers:
  facts, tool affinities, the prompt) and ``record_events(user_id, events, key)`` (a
  ``POST /v1/events`` body and its ``Idempotency-Key``). ``UseCaseEngram`` calls the use cases
  behind those routes (``SessionService.start``, ``IngestService.accept_events``) from the
  composition root, on the real Redis store and a fake clock; the ingest queue hands each
  batch to ``BehaviourService.record`` as the ingest consumer does.
- ``ToolRanker``: ``rank(user_id, session, scores) -> [tool, ...]``. ``BoostRanker`` ranks by
  ``score + factor × affinity`` from the session's ``toolAffinities`` (the
  ``engram.behaviour.affinity`` helpers); a ranker calling ``POST /v1/tools/rank`` fits the
  same port.

The assistant in the loop (per task, at most ``MAX_CALLS`` tool calls): it first calls the tool
ranked first; until the tool the user wants has succeeded, the user steers it to that tool with
probability ``FOLLOW`` (else it calls the next-ranked tool it has not tried). Every call is a
tool event with an outcome drawn from the tool's true success probability for the user; each
task also sends its query, each entity lookup a successful lookup whose result names the
entity. Random outcomes are keyed by (seed, user, session, task, attempt), so every
configuration sees the same luck at the same point.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from bench.behaviour.world import (
    ENTITY_TOOLS,
    RELIABLE_P,
    Session,
    Task,
    Truth,
    User,
    entity_id,
    entity_name,
    is_flaky,
    relevant_tools,
    tools_of,
    uniform,
)
from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.api.models import EventsRequest
from engram.api.presenters import session_response
from engram.behaviour.affinity import BOOST_FACTOR, rank_tools
from engram.behaviour.models import Fact, Observation
from engram.behaviour.prompt import format_memory_section
from engram.bootstrap import Container
from engram.clock import MS_PER_DAY, FakeClock
from engram.identity import Caller
from engram.memories.service import MemoryService
from engram.settings import Settings
from engram.use_cases.ingest_messages import decode_message

MAX_CALLS = 3
FOLLOW = 0.8
PROMPT_BUDGET: int = Settings.model_fields["prompt_token_budget"].default


def by_confidence(facts: Sequence[Fact]) -> list[Fact]:
    """The prompt ranking compared with the shipped one (confidence × reinforcements): current
    confidence alone."""
    return sorted(facts, key=lambda f: (-f.confidence, f.subject))


PROMPT_RANKINGS: dict[str, Callable[[Sequence[Fact]], list[Fact]]] = {
    "confidence": by_confidence,
}


# --- ports -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionView:
    """The behavioural part of a session start, read from its JSON (camelCase) shape."""

    facts: dict[str, dict[str, Any]]  # subject → fact JSON
    tool_affinities: dict[str, float]
    prompt_subjects: tuple[str, ...]  # facts shown in the prompt's facts section, in order
    degraded: tuple[str, ...]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> SessionView:
        facts = {f["subject"]: dict(f) for f in body["facts"]}
        by_content = {f["content"]: f["subject"] for f in body["facts"]}
        section = body.get("sections", {}).get("facts", "")
        return cls(
            facts=facts,
            tool_affinities={k: float(v) for k, v in body["toolAffinities"].items()},
            prompt_subjects=prompt_subjects(section, by_content),
            degraded=tuple(body.get("degraded", ())),
        )


def prompt_subjects(section: str, by_content: Mapping[str, str]) -> tuple[str, ...]:
    """The subjects of the fact lines (``- <content> (confidence 0.xx)``) of a facts section."""
    out = []
    for line in section.splitlines():
        if not line.startswith("- "):
            continue
        content = line[2:].rsplit(" (confidence ", 1)[0]
        subject = by_content.get(content)
        if subject is None:
            raise ValueError(f"prompt line matches no fact: {line!r}")
        out.append(subject)
    return tuple(out)


class Engram(Protocol):
    def set_time(self, at_ms: int) -> None: ...

    def start_session(self, user_id: str) -> SessionView: ...

    def record_events(
        self, user_id: str, events: list[dict[str, Any]], idempotency_key: str
    ) -> int:
        """Send one request's events; returns how many observations were accepted."""
        ...


class ToolRanker(Protocol):
    def rank(self, user_id: str, session: SessionView, scores: Mapping[str, float]) -> list[str]:
        """Tool names, best first."""
        ...


@dataclass(frozen=True)
class BoostRanker:
    """``score + factor × affinity`` over the session's tool affinities."""

    factor: float = BOOST_FACTOR

    def rank(self, user_id: str, session: SessionView, scores: Mapping[str, float]) -> list[str]:
        return rank_tools(scores, session.tool_affinities, factor=self.factor)


def catalogue_ranking(scores: Mapping[str, float]) -> list[str]:
    """The same ranking without memory (no affinities)."""
    return rank_tools(scores, {})


# --- the Engram surface of the use cases -----------------------------------------------------
class _ConsumerQueue:
    """The ingest queue: hands every batch to ``BehaviourService.record`` (as the ingest
    consumer does, grouped per identity)."""

    def __init__(self) -> None:
        self.record: Callable[[str, list[Any]], int] | None = None
        self.stored = 0

    def send(self, bodies: Sequence[str]) -> int:
        assert self.record is not None
        groups: dict[str, list[Observation]] = defaultdict(list)
        for body in bodies:
            identity, observations = decode_message(body)
            groups[identity].extend(observations)
        for identity, observations in groups.items():
            self.stored += self.record(identity, observations)
        return len(bodies)


class UseCaseEngram:
    """Engram's session and events use cases, built by ``engram.bootstrap.Container`` on a
    Redis at ``redis_url`` (keys under ``prefix``) with a fake clock."""

    TEAM = "sim"

    def __init__(self, redis_url: str, *, prefix: str, decay: str) -> None:
        settings = Settings(
            redis_url=redis_url,
            redis_key_prefix=prefix,
            decay=decay,
            # a session must never degrade on a busy machine: that would change the numbers
            consolidation_budget_ms=30_000,
            redis_socket_timeout_ms=10_000,
            redis_connect_timeout_ms=10_000,
        )
        self.clock = FakeClock()
        self.queue = _ConsumerQueue()
        memories = InMemoryMemoryStore(self.clock)
        self.client = redis.Redis.from_url(redis_url, socket_timeout=10)
        self.container = Container(
            settings,
            clock=self.clock,
            redis=self.client,
            ingest_queue=self.queue,
            extraction_queue=None,
            memories=MemoryService(memories, settings=settings, clock=self.clock),
        )
        self.queue.record = self.container.behaviour.record
        self._callers: dict[str, Caller] = {}

    def _caller(self, user_id: str) -> Caller:
        caller = self._callers.get(user_id)
        if caller is None:
            caller = self._callers[user_id] = Caller(user_id=user_id, team_id=self.TEAM)
        return caller

    def set_time(self, at_ms: int) -> None:
        self.clock.set(at_ms)

    def start_session(self, user_id: str) -> SessionView:
        context = self.container.sessions.start(self._caller(user_id))
        response = session_response(context)  # the body POST /v1/sessions answers
        return SessionView.from_json(response.model_dump(by_alias=True, mode="json"))

    def record_events(
        self, user_id: str, events: list[dict[str, Any]], idempotency_key: str
    ) -> int:
        command = EventsRequest.model_validate({"events": events}).command()
        accepted = self.container.ingest.accept_events(
            self._caller(user_id), command, idempotency_key=idempotency_key
        )
        return accepted.accepted

    def close(self) -> None:
        self.container.close()
        self.client.close()


# --- what each session saw -------------------------------------------------------------------
@dataclass(frozen=True)
class TaskRecord:
    gains: tuple[int, ...]  # graded relevance of the memory ranking's top 5 (2 = wanted tool)
    base_gains: tuple[int, ...]  # the same for the catalogue ranking without memory
    ideal: tuple[int, ...]  # every candidate's gain, best first
    calls: int


@dataclass(frozen=True)
class PromptRecord:
    labels: tuple[str, ...]  # truth label of each fact shown ("core", "false", "incidental")
    core_shown: int


@dataclass(frozen=True)
class SessionRecord:
    user: int
    index: int
    at_ms: int
    day: int
    days_in: float  # days since the user's first session
    after_change: bool
    tasks: tuple[TaskRecord, ...]
    #: "seed": the prompt the session returned; other keys: the same facts ranked otherwise
    prompts: dict[str, PromptRecord]
    core_size: int
    core_known: int  # core facts Engram holds at all (in the prompt or not)
    #: switch/break users: the tool recommended first for the changed task (expected scores)
    change_top: str | None
    #: move users: (old domain in prompt, new domain in prompt)
    move_prompt: tuple[bool, bool] | None
    #: flaky tools of the user's current domains → their net affinity (None: no fact)
    flaky: dict[str, float | None] = field(default_factory=dict)


def gain(tool: str, task: Task, wanted: str, p: Callable[[str], float]) -> int:
    if tool == wanted:
        return 2
    if tool in relevant_tools(task.domain, task.task) and p(tool) >= RELIABLE_P:
        return 1
    return 0


def _lookup_event(etype: str, index: int, at: str) -> dict[str, Any]:
    eid, name = entity_id(etype, index), entity_name(etype, index)
    result: dict[str, Any]
    if etype == "account":
        result = {"id": eid, "name": name}
    elif etype == "product":
        result = {"products": [{"isrc": eid, "title": name}]}
    else:
        result = {"tables": [{"fullName": eid, "name": name}]}
    duration = int(20 + 200 * uniform(at, "lookup"))
    return {
        "kind": "tool",
        "toolName": ENTITY_TOOLS[etype],
        "ok": True,
        "durationMs": duration,
        "result": result,
    }


@dataclass
class Simulation:
    """One run of a world against one Engram and one ranker."""

    engram: Engram
    ranker: ToolRanker
    seed: int
    #: other prompt rankings to evaluate on each session's facts (offline, same budget)
    prompt_rankings: Mapping[str, Callable[[Sequence[Fact]], list[Fact]]] = field(
        default_factory=dict
    )
    prompt_budget: int = PROMPT_BUDGET
    records: list[SessionRecord] = field(default_factory=list)
    degraded: int = 0
    events: int = 0
    accepted: int = 0  # observations the events became (what ingest accepted)
    seconds: float = 0.0
    _truths: dict[tuple[int, bool], Truth] = field(default_factory=dict)

    def truth(self, user: User, at_ms: int) -> Truth:
        key = (user.index, user.changed_by(at_ms))
        if key not in self._truths:
            self._truths[key] = user.truth_at(at_ms)
        return self._truths[key]

    def run(self, users: Sequence[User]) -> list[SessionRecord]:
        started = time.perf_counter()
        first = {u.index: u.sessions[0].at_ms for u in users}
        by_index = {u.index: u for u in users}
        timeline = sorted((s for u in users for s in u.sessions), key=lambda s: (s.at_ms, s.user))
        for session in timeline:
            self.records.append(self._session(by_index[session.user], session, first))
        self.seconds = time.perf_counter() - started
        return self.records

    def _session(self, user: User, session: Session, first: Mapping[int, int]) -> SessionRecord:
        at = session.at_ms
        self.engram.set_time(at)
        view = self.engram.start_session(user.user_id)
        if any(d.startswith("behaviour:") for d in view.degraded):
            self.degraded += 1
        profile = user.profile_at(at)
        truth = self.truth(user, at)
        events: list[dict[str, Any]] = []
        key = (self.seed, user.index, session.index)
        for n, (etype, index) in enumerate(session.lookups):
            events.append(_lookup_event(etype, index, repr((*key, "lookup", n))))
        tasks = []
        for t, task in enumerate(session.tasks):
            scores = task.scores()
            ranking = self.ranker.rank(user.user_id, view, scores)
            base = catalogue_ranking(scores)
            wanted = profile.habits[(task.domain, task.task)]
            gains = {tool: gain(tool, task, wanted, profile.p) for tool in scores}
            events.append({"kind": "query", "text": task.query})
            calls = self._calls(ranking, wanted, profile.p, (*key, t), events)
            tasks.append(
                TaskRecord(
                    gains=tuple(gains[tool] for tool in ranking[:5]),
                    base_gains=tuple(gains[tool] for tool in base[:5]),
                    ideal=tuple(sorted(gains.values(), reverse=True)),
                    calls=calls,
                )
            )
        prompts = {"seed": self._prompt(view.prompt_subjects, truth)}
        if self.prompt_rankings:
            facts = [Fact.model_validate(f) for f in view.facts.values()]
            by_content = {f.content: f.subject for f in facts}
            for name, rank in self.prompt_rankings.items():
                text = format_memory_section(facts, token_budget=self.prompt_budget, rank=rank)
                prompts[name] = self._prompt(prompt_subjects(text, by_content), truth)
        record = SessionRecord(
            user=user.index,
            index=session.index,
            at_ms=at,
            day=session.day,
            days_in=(at - first[user.index]) / MS_PER_DAY,
            after_change=user.changed_by(at),
            tasks=tuple(tasks),
            prompts=prompts,
            core_size=len(truth.core),
            core_known=sum(1 for s in truth.core if s in view.facts),
            change_top=self._change_top(user, view),
            move_prompt=self._move_prompt(user, view),
            flaky={
                tool: view.tool_affinities.get(tool)
                for domain in profile.domains
                for tool in tools_of(domain)
                if is_flaky(profile.p(tool))
            },
        )
        self.events += len(events)
        idempotency_key = f"sim:{user.user_id}:{session.index}"  # one per request
        self.accepted += self.engram.record_events(user.user_id, events, idempotency_key)
        return record

    @staticmethod
    def _prompt(subjects: Sequence[str], truth: Truth) -> PromptRecord:
        return PromptRecord(
            labels=tuple(truth.label(s) for s in subjects),
            core_shown=sum(1 for s in subjects if s in truth.core),
        )

    def _calls(
        self,
        ranking: list[str],
        wanted: str,
        p: Callable[[str], float],
        key: tuple[object, ...],
        events: list[dict[str, Any]],
    ) -> int:
        called: list[str] = []
        for attempt in range(MAX_CALLS):
            if attempt == 0:
                tool = ranking[0]
            elif wanted not in called and uniform(*key, attempt, "follow") < FOLLOW:
                tool = wanted
            else:
                tool = next(t for t in ranking if t not in called)
            ok = uniform(*key, attempt, "ok") < p(tool)
            duration = int(50 + 950 * uniform(*key, attempt, "ms"))
            event: dict[str, Any] = {
                "kind": "tool",
                "toolName": tool,
                "ok": ok,
                "durationMs": duration,
            }
            if not ok:
                event["error"] = "tool error"
            events.append(event)
            called.append(tool)
            if ok and tool == wanted:
                break
        return len(called)

    def _change_top(self, user: User, view: SessionView) -> str | None:
        change = user.change
        if change is None or change.kind == "move":
            return None
        task = Task(domain=change.domain, task=change.task, noise=(), query="")
        return self.ranker.rank(user.user_id, view, task.expected_scores())[0]

    @staticmethod
    def _move_prompt(user: User, view: SessionView) -> tuple[bool, bool] | None:
        change = user.change
        if change is None or change.kind != "move":
            return None
        shown = set(view.prompt_subjects)
        return (
            f"domain_preference:{change.domain}" in shown,
            f"domain_preference:{change.new_domain}" in shown,
        )
