"""``POST /v1/sessions``: behavioural consolidation and memory recall, run concurrently.

Both halves have the session budget (``Settings.consolidation_budget_ms``): consolidation
degrades inside ``BehaviourService.load_memory`` (``behaviour:timeout`` /
``behaviour:unavailable``); recall runs on a worker thread and degrades to
``memories:timeout`` when it does not answer in time, or ``memories:unavailable`` when
PostgreSQL (or anything under it) fails. A session start never fails because a store is down.

The prompt is the facts section (within ``Settings.prompt_token_budget`` tokens) followed by
the memory hint (within ``Settings.memory_hint_max_chars`` characters), separated by a blank
line; each section is also returned on its own under ``sections``.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from engram.api.models import SessionResponse, SessionSections
from engram.behaviour.service import BehaviourService, MemoryLoad
from engram.identity import Caller
from engram.memories.hint import DEFAULT_MAX_CHARS, build_memory_hint
from engram.memories.inputs import MemoryRecallQuery
from engram.memories.models import Memory
from engram.memories.service import MemoryService
from engram.use_cases.convert import fact_out, memory_out

log = logging.getLogger(__name__)

DEGRADED_MEMORIES_TIMEOUT = "memories:timeout"
DEGRADED_MEMORIES_UNAVAILABLE = "memories:unavailable"
HINT_RECALL_LIMIT = 100
SESSION_MEMORIES = 20


@dataclass(frozen=True)
class Recalled:
    memories: list[Memory]
    hint: str


class SessionService:
    def __init__(
        self,
        behaviour: BehaviourService,
        memories: MemoryService | Callable[[], MemoryService] | None,
        *,
        budget_ms: int = 500,
        hint_max_chars: int = DEFAULT_MAX_CHARS,
        workers: int = 4,
    ) -> None:
        self.behaviour = behaviour
        self.memories = memories
        self.budget_s = budget_ms / 1000
        self.hint_max_chars = min(hint_max_chars, DEFAULT_MAX_CHARS)
        self._workers = workers
        self._pool: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = cf.ThreadPoolExecutor(self._workers, "engram-recall")
            return self._pool

    def _memories(self) -> MemoryService:
        """The memory service (a provider is called each time, so a failure to build it —
        e.g. the database secret unreadable — is retried at the next session)."""
        memories = self.memories
        if memories is None:
            raise RuntimeError("no memory service")
        return memories if isinstance(memories, MemoryService) else memories()

    def _recall(self, caller: Caller, persona_id: str | None, query: str | None) -> Recalled:
        service = self._memories()
        top = service.recall(
            caller, MemoryRecallQuery(max_results=HINT_RECALL_LIMIT, persona_id=persona_id)
        )
        hint = build_memory_hint(top, self.hint_max_chars)
        if query:
            found = service.recall(
                caller,
                MemoryRecallQuery(query=query, max_results=SESSION_MEMORIES, persona_id=persona_id),
            )
        else:
            found = top[:SESSION_MEMORIES]
        return Recalled(memories=found, hint=hint)

    def start(
        self, caller: Caller, *, persona_id: str | None = None, query: str | None = None
    ) -> tuple[SessionResponse, MemoryLoad]:
        """The session context, and the behavioural part as loaded (for metrics)."""
        started = time.monotonic()
        future: cf.Future[Recalled] | None = None
        degraded: list[str] = []
        if self.memories is None:
            degraded.append(DEGRADED_MEMORIES_UNAVAILABLE)
        else:
            try:
                future = self._executor().submit(self._recall, caller, persona_id, query)
            except RuntimeError:
                degraded.append(DEGRADED_MEMORIES_UNAVAILABLE)
        load = self.behaviour.load_memory(caller.identity_id)
        recalled = Recalled(memories=[], hint="")
        if future is not None:
            remaining = max(0.0, self.budget_s - (time.monotonic() - started))
            try:
                recalled = future.result(timeout=remaining)
            except cf.TimeoutError:
                future.cancel()
                log.warning("recall exceeded the session budget of %.0f ms", self.budget_s * 1000)
                degraded.append(DEGRADED_MEMORIES_TIMEOUT)
            except Exception as exc:
                log.warning("recall failed: %s", type(exc).__name__)
                degraded.append(DEGRADED_MEMORIES_UNAVAILABLE)
        facts_section = load.prompt_section
        prompt = "\n\n".join(part for part in (facts_section, recalled.hint) if part)
        response = SessionResponse(
            identity_id=caller.identity_id,
            persona_id=persona_id,
            facts=[fact_out(f) for f in load.facts],
            tool_affinities=dict(load.tool_affinities),
            memories=[memory_out(m) for m in recalled.memories],
            prompt=prompt,
            sections=SessionSections(facts=facts_section, memories=recalled.hint),
            degraded=[*load.degraded, *degraded],
        )
        return response, load

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
