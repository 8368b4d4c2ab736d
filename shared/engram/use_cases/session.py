"""``POST /v1/sessions``: behavioural consolidation and memory recall, run concurrently.

Both halves run on one executor against one deadline: the session budget
(``Settings.consolidation_budget_ms``) from the moment the session starts. The results are
joined in one place (``SessionService.start``): a half that has not answered by the deadline
degrades to ``behaviour:timeout`` / ``memories:timeout``, one that failed to
``behaviour:unavailable`` / ``memories:unavailable`` (the executor shut down:
``behaviour:overloaded``). A session start never fails because a store is down.

The prompt is the facts section (within ``Settings.prompt_token_budget`` tokens) followed by
the memory hint (within ``Settings.memory_hint_max_chars`` characters), separated by a blank
line; each section is also returned on its own.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engram.behaviour.models import Fact
from engram.behaviour.service import BehaviourContext, BehaviourService
from engram.identity import Caller
from engram.memories.commands import Recall
from engram.memories.hint import DEFAULT_MAX_CHARS, build_memory_hint
from engram.memories.models import Memory
from engram.memories.service import HINT_RECALL_LIMIT, MemoryService

log = logging.getLogger(__name__)
T = TypeVar("T")

BEHAVIOUR_TIMEOUT = "behaviour:timeout"
BEHAVIOUR_UNAVAILABLE = "behaviour:unavailable"
BEHAVIOUR_OVERLOADED = "behaviour:overloaded"
MEMORIES_TIMEOUT = "memories:timeout"
MEMORIES_UNAVAILABLE = "memories:unavailable"
SESSION_MEMORIES = 20


@dataclass(frozen=True)
class Recalled:
    memories: list[Memory]
    hint: str


@dataclass(frozen=True)
class SessionContext:
    """What a session start gives the assistant, and why any part of it is missing."""

    identity_id: str
    persona_id: str | None
    facts: list[Fact] = field(default_factory=list)
    tool_affinities: dict[str, float] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)
    facts_section: str = ""
    memories_section: str = ""
    degraded: list[str] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        return "\n\n".join(part for part in (self.facts_section, self.memories_section) if part)

    @property
    def behaviour_degraded(self) -> bool:
        return any(reason.startswith("behaviour:") for reason in self.degraded)

    @property
    def memories_degraded(self) -> bool:
        return any(reason.startswith("memories:") for reason in self.degraded)


class SessionService:
    def __init__(
        self,
        behaviour: BehaviourService,
        memories: MemoryService | Callable[[], MemoryService] | None,
        *,
        budget_ms: int = 500,
        hint_max_chars: int = DEFAULT_MAX_CHARS,
        workers: int = 8,
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
                self._pool = cf.ThreadPoolExecutor(self._workers, "engram-session")
            return self._pool

    def _memories(self) -> MemoryService:
        """The memory service (a provider is called each time, so a failure to build it —
        e.g. the database secret unreadable — is retried at the next session)."""
        memories = self.memories
        if memories is None:
            raise RuntimeError("no memory service")
        return memories if isinstance(memories, MemoryService) else memories()

    def _recall(self, caller: Caller, persona_id: str | None, query: str | None) -> Recalled:
        """The hint's memories and, with a query, the query's: behind one access check."""
        top_query = Recall(max_results=HINT_RECALL_LIMIT, persona_id=persona_id)
        if not query:
            (top,) = self._memories().recall_each(caller, [top_query])
            return Recalled(memories=top[:SESSION_MEMORIES], hint=self._hint(top))
        top, found = self._memories().recall_each(
            caller,
            [
                top_query,
                Recall(query=query, max_results=SESSION_MEMORIES, persona_id=persona_id),
            ],
        )
        return Recalled(memories=found, hint=self._hint(top))

    def _hint(self, top: list[Memory]) -> str:
        return build_memory_hint(top, self.hint_max_chars)

    def start(
        self, caller: Caller, *, persona_id: str | None = None, query: str | None = None
    ) -> SessionContext:
        deadline = time.monotonic() + self.budget_s
        try:
            pool = self._executor()
            behaviour = pool.submit(self.behaviour.load, caller.identity_id)
            recall = (
                None
                if self.memories is None
                else pool.submit(self._recall, caller, persona_id, query)
            )
        except RuntimeError:  # shut down
            return SessionContext(
                caller.identity_id,
                persona_id,
                degraded=[BEHAVIOUR_OVERLOADED, MEMORIES_UNAVAILABLE],
            )
        pending: list[cf.Future[Any]] = [behaviour] if recall is None else [behaviour, recall]
        cf.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        degraded: list[str] = []
        loaded = self._outcome(behaviour, "behaviour", degraded) or BehaviourContext()
        if recall is None:
            degraded.append(MEMORIES_UNAVAILABLE)
            recalled = None
        else:
            recalled = self._outcome(recall, "memories", degraded)
        return SessionContext(
            identity_id=caller.identity_id,
            persona_id=persona_id,
            facts=loaded.facts,
            tool_affinities=dict(loaded.tool_affinities),
            memories=recalled.memories if recalled else [],
            facts_section=loaded.prompt_section,
            memories_section=recalled.hint if recalled else "",
            degraded=degraded,
        )

    def _outcome(self, future: cf.Future[T], half: str, degraded: list[str]) -> T | None:
        """The half's result, or ``None`` with the reason added to ``degraded``."""
        if not future.done():
            future.cancel()
            log.warning("%s exceeded the session budget of %.0f ms", half, self.budget_s * 1000)
            degraded.append(f"{half}:timeout")
            return None
        error = future.exception()
        if error is not None:
            log.warning("%s failed: %s", half, type(error).__name__)
            degraded.append(f"{half}:unavailable")
            return None
        return future.result()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
