"""In-memory fakes of the maintenance ports, with a ``tick`` that spends fake time per call."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.clock import MS_PER_DAY
from engram.extraction import Proposal, SinkOutcome, TranscriptJob
from engram.maintenance import ErasureRecord, QueueMessage, RetentionPolicy

DAY = MS_PER_DAY


def _noop() -> None:
    return None


class FakeState:
    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self.value = copy.deepcopy(initial)
        self.writes = 0

    def get(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.value)

    def set(self, state: dict[str, Any]) -> None:
        self.value = copy.deepcopy(state)
        self.writes += 1


@dataclass
class Ident:
    last_active: int
    observations: list[int] = field(default_factory=list)  # createdAt of each observation
    facts: dict[str, int] = field(default_factory=dict)  # fact id -> when it expires (ms)


class FakeBehaviour:
    """An identity index ordered by last activity (offset paging, like the real stores)."""

    def __init__(self, tick: Callable[[], None] = _noop) -> None:
        self.ids: dict[str, Ident] = {}
        self.tick = tick
        self.pruned: list[str] = []  # identities prune() was called for, in order
        self.swept: list[str] = []
        self.fail_prune: set[str] = set()

    def add(
        self,
        ident: str,
        *,
        last_active: int,
        observations: Sequence[int] = (),
        facts: dict[str, int] | None = None,
    ) -> None:
        self.ids[ident] = Ident(last_active, list(observations), dict(facts or {}))

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy({k: vars(v) for k, v in self.ids.items()})

    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int = 0, limit: int = 100
    ) -> tuple[list[str], int]:
        self.tick()
        ordered = [
            k
            for k, v in sorted(self.ids.items(), key=lambda kv: (kv[1].last_active, kv[0]))
            if active_before_ms is None or v.last_active < active_before_ms
        ]
        page = ordered[cursor : cursor + limit]
        return page, (cursor + len(page) if len(page) == limit else 0)

    def prune(self, identity_id: str, before_ms: int) -> int:
        self.tick()
        if identity_id in self.fail_prune:
            raise ConnectionError(f"store down for {identity_id}")
        self.pruned.append(identity_id)
        ident = self.ids[identity_id]
        kept = [t for t in ident.observations if t >= before_ms]
        n = len(ident.observations) - len(kept)
        ident.observations = kept
        return n

    def sweep_expired(self, identity_id: str, now_ms: int) -> int:
        self.tick()
        self.swept.append(identity_id)
        ident = self.ids[identity_id]
        expired = [f for f, t in ident.facts.items() if t <= now_ms]
        for f in expired:
            del ident.facts[f]
        return len(expired)

    def remove_if_empty(self, identity_id: str) -> bool:
        ident = self.ids.get(identity_id)
        if ident is None or ident.facts or ident.observations:
            return False
        del self.ids[identity_id]
        return True

    def purge_leftovers(self, identity_id: str, erased_at_ms: int) -> int:
        ident = self.ids.get(identity_id)
        if ident is None:
            return 0
        if any(t > erased_at_ms for t in ident.observations):
            kept = [t for t in ident.observations if t > erased_at_ms]
            n = len(ident.observations) - len(kept)
            ident.observations = kept
            return n
        del self.ids[identity_id]
        return len(ident.observations) + len(ident.facts)


@dataclass
class Row:
    team_id: str
    user_id: str
    persona_id: str | None
    status: str  # active | archived
    created_at: int
    updated_at: int


class FakeMemories:
    """Team retention and the erasure backstop over a list of rows."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy({k: vars(v) for k, v in self.rows.items()})

    def _retain(
        self, keep: Callable[[Row], bool], policy: RetentionPolicy, now: int
    ) -> dict[str, int]:
        archive_days, delete_days = policy.archive_after_days, policy.delete_archived_after_days
        archived = deleted = 0
        for rid, r in list(self.rows.items()):
            if not keep(r):
                continue
            if delete_days and r.status == "archived" and r.updated_at < now - delete_days * DAY:
                del self.rows[rid]
                deleted += 1
            elif archive_days and r.status == "active" and r.updated_at < now - archive_days * DAY:
                r.status, r.updated_at = "archived", now
                archived += 1
        return {"archived": archived, "deleted": deleted}

    def apply_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        return self._retain(lambda r: r.team_id == policy.team_id, policy, now)

    def purge_user_before(self, team_id: str, user_id: str, before_ms: int) -> int:
        doomed = [
            k
            for k, r in self.rows.items()
            if r.team_id == team_id and r.user_id == user_id and r.created_at <= before_ms
        ]
        for k in doomed:
            del self.rows[k]
        return len(doomed)


class FakePersonaMemories(FakeMemories):
    def apply_persona_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        return self._retain(
            lambda r: r.team_id == policy.team_id and r.persona_id == policy.persona_id,
            policy,
            now,
        )


class FakePolicies:
    def __init__(self, policies: Sequence[RetentionPolicy]) -> None:
        self.policies = sorted(policies, key=lambda p: p.key)

    def list_policies(self, *, after: str | None, limit: int) -> list[RetentionPolicy]:
        return [p for p in self.policies if after is None or p.key > after][:limit]


class FakeErasureLog:
    def __init__(self) -> None:
        self.records: dict[tuple[str, str, int], bool] = {}  # (team, user, at) -> purged

    def snapshot(self) -> dict[tuple[str, str, int], bool]:
        return dict(self.records)

    def record(self, team_id: str, user_id: str, at_ms: int) -> None:
        self.records[(team_id, user_id, at_ms)] = False

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool:
        return any(t == team_id and u == user_id and at >= since_ms for t, u, at in self.records)

    def pending_purges(
        self, *, after: tuple[int, str, str] | None, limit: int
    ) -> list[ErasureRecord]:
        pending = sorted(
            (
                ErasureRecord(team_id=t, user_id=u, erased_at_ms=at)
                for (t, u, at), purged in self.records.items()
                if not purged
            ),
            key=lambda r: r.key,
        )
        return [r for r in pending if after is None or r.key > tuple(after)][:limit]

    def mark_purged(self, team_id: str, user_id: str, at_ms: int) -> None:
        self.records[(team_id, user_id, at_ms)] = True


@dataclass
class Msg:
    message_id: str
    body: str
    receive_count: int = 0
    visible_at: int = 0
    receipt: str = ""


class FakeQueue:
    """An SQS-like queue on the fake clock: receive hides a message until released/timed out."""

    def __init__(self, now: Callable[[], int], visibility_s: int = 300) -> None:
        self.now = now
        self.visibility_ms = visibility_s * 1000
        self.messages: dict[str, Msg] = {}
        self.dead: list[tuple[str, str]] = []  # (message id, reason)
        self.releases: list[tuple[str, int]] = []  # (message id, delay_s)
        self._n = 0

    def send(self, body: str) -> str:
        self._n += 1
        mid = f"m{self._n}"
        self.messages[mid] = Msg(mid, body)
        return mid

    def receive(self, max_messages: int) -> list[QueueMessage]:
        out: list[QueueMessage] = []
        for m in self.messages.values():
            if len(out) >= max_messages:
                break
            if m.visible_at <= self.now():
                m.receive_count += 1
                m.visible_at = self.now() + self.visibility_ms
                m.receipt = f"{m.message_id}#{m.receive_count}"
                out.append(QueueMessage(m.message_id, m.receipt, m.receive_count, m.body))
        return out

    def _by_receipt(self, receipt: str) -> Msg:
        return next(m for m in self.messages.values() if m.receipt == receipt)

    def delete(self, receipt: str) -> None:
        del self.messages[self._by_receipt(receipt).message_id]

    def release(self, receipt: str, delay_s: int) -> None:
        m = self._by_receipt(receipt)
        m.visible_at = self.now() + delay_s * 1000
        self.releases.append((m.message_id, delay_s))

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        self.dead.append((message.message_id, reason))


@dataclass
class FakeSink:
    """Proposals by (team, user, key); the erasure check answers from ``erased`` only."""

    created: dict[tuple[str, str, str], str] = field(default_factory=dict)
    erased: dict[tuple[str, str], int] = field(default_factory=dict)

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        k = (job.team_id, job.user_id, proposal.key)
        if k in self.created:
            return "refreshed"
        self.created[k] = proposal.value
        return "created"

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        at = self.erased.get((team_id, user_id))
        return at is not None and at >= since_ms


class FakeLease:
    """An in-memory ``MaintenanceLease``; ``down`` makes every call raise."""

    def __init__(self) -> None:
        self.holder: str | None = None
        self.ttls: list[int] = []
        self.pending: set[str] = set()
        self.released: list[str] = []
        self.down = False
        self._next = 0

    def _check(self) -> None:
        if self.down:
            raise ConnectionError("lease store down")

    def acquire(self, ttl_ms: int) -> str | None:
        self._check()
        if self.holder is not None:
            return None
        self._next += 1
        self.holder = f"token-{self._next}"
        self.ttls.append(ttl_ms)
        return self.holder

    def release(self, token: str) -> None:
        self._check()
        self.released.append(token)
        if self.holder == token:
            self.holder = None

    def add_pending(self, schedule: str) -> None:
        self._check()
        self.pending.add(schedule)

    def take_pending(self) -> set[str]:
        self._check()
        taken, self.pending = self.pending, set()
        return taken
