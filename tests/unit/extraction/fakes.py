"""Fakes for the extraction unit tests: an in-memory proposal sink with the store's dedup rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from engram.extraction import Proposal, SinkOutcome, TranscriptJob


def make_job(
    *messages: tuple[str, str] | str,
    job_id: str = "job-1",
    conversation_id: str = "conv-1",
    team_id: str = "team-a",
    user_id: str = "user-1",
    persona_id: str | None = None,
    queued_at: int = 1_767_225_600_000,
) -> TranscriptJob:
    """A job from ("role", "content") pairs; a bare string is a user message."""
    msgs: list[dict[str, Any]] = []
    for m in messages:
        role, content = ("user", m) if isinstance(m, str) else m
        msgs.append({"role": role, "content": content})
    return TranscriptJob.model_validate(
        {
            "jobId": job_id,
            "conversationId": conversation_id,
            "teamId": team_id,
            "userId": user_id,
            "personaId": persona_id,
            "messages": msgs,
            "queuedAt": queued_at,
        }
    )


@dataclass
class StoredMemory:
    key: str
    value: str
    status: str  # pending_review | active | archived
    source_channel_id: str
    refreshed: int = 0


@dataclass
class FakeSink:
    """Behaves like MemoryService.propose + the erasure log, in memory.

    Dedup: an active key is dropped, a pending one refreshed, an archived one never
    resurrected. ``fail_with`` makes ``propose`` raise (e.g. Unavailable) for the next N calls.
    """

    memories: dict[tuple[str, str, str | None, str, str], StoredMemory] = field(
        default_factory=dict
    )
    erasures: dict[tuple[str, str], int] = field(default_factory=dict)
    calls: list[tuple[str, Proposal]] = field(default_factory=list)
    fail_with: Exception | None = None
    fail_times: int = 0
    propose_hook: Callable[[TranscriptJob, Proposal], None] | None = None

    @staticmethod
    def slot(job: TranscriptJob, p: Proposal) -> tuple[str, str, str | None, str, str]:
        owner = job.user_id if p.scope.value == "user" else (job.persona_id or "")
        user = job.user_id if p.scope.value == "persona_user" else None
        return (job.team_id, p.scope.value, user, owner, p.key)

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        if self.propose_hook is not None:
            self.propose_hook(job, proposal)
        if self.fail_with is not None and self.fail_times > 0:
            self.fail_times -= 1
            raise self.fail_with
        self.calls.append((job.job_id, proposal))
        slot = self.slot(job, proposal)
        existing = self.memories.get(slot)
        if existing is None:
            self.memories[slot] = StoredMemory(
                proposal.key, proposal.value, "pending_review", proposal.source_channel_id
            )
            return "created"
        if existing.status == "pending_review":
            existing.value = proposal.value
            existing.refreshed += 1
            return "refreshed"
        return "dropped"

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        erased_at = self.erasures.get((team_id, user_id))
        return erased_at is not None and erased_at >= since_ms

    def erase(self, team_id: str, user_id: str, at_ms: int) -> None:
        self.erasures[(team_id, user_id)] = at_ms
        for slot in [s for s in self.memories if s[0] == team_id and user_id in (s[2], s[3])]:
            del self.memories[slot]

    def set_status(self, key: str, status: str) -> None:
        for memory in self.memories.values():
            if memory.key == key:
                memory.status = status

    def by_key(self) -> dict[str, StoredMemory]:
        return {m.key: m for m in self.memories.values()}


def keys(proposals: Iterable[Proposal]) -> dict[str, str]:
    return {p.key: p.value for p in proposals}
