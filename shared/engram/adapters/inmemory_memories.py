"""In-memory ``MemoryStore`` + ``PersonaStore``: the reference the conformance suite checks
the PostgreSQL adapter against. Thread-safe; enforces the same visibility rules as RLS."""

from __future__ import annotations

import base64
import threading
import uuid
from datetime import UTC, datetime
from typing import Protocol

from engram.clock import Clock, SystemClock
from engram.errors import Conflict, InvalidInput
from engram.memories.models import (
    ERASED_ACTOR,
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    Persona,
    RecallRequest,
    ReviewAction,
    Scope,
    Status,
    TeamSettings,
    audit_is_about,
)
from engram.memories.ports import AccessContext
from engram.memories.privacy import can_see, can_write, memory_visible
from engram.memories.recall import rank_in_memory

_DedupKey = tuple[str, Scope, str, str, str]


def _dedup(m: Memory | NewMemory) -> _DedupKey:
    return (m.team_id, m.scope, m.owner_id, m.user_id or "", m.key)


def encode_cursor(created_at: datetime, memory_id: str) -> str:
    raw = f"{created_at.isoformat()}|{memory_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, memory_id = raw.partition("|")
        when = datetime.fromisoformat(stamp)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor", "not a cursor this service issued") from None
    if not memory_id or when.tzinfo is None:
        raise InvalidInput("cursor", "not a cursor this service issued")
    return when, memory_id


class ErasedSince(Protocol):
    """The part of ``engram.maintenance.ports.ErasureLog`` the store consults."""

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool: ...


class InMemoryMemoryStore:
    """``erasures``: an erasure log that ``upsert_unless_erased`` consults besides the
    erasures this store has done itself (``erase_user``)."""

    def __init__(self, clock: Clock | None = None, *, erasures: ErasedSince | None = None) -> None:
        self._clock = clock or SystemClock()
        self._erasures = erasures
        self._erased_at: dict[tuple[str, str], datetime] = {}
        self._lock = threading.RLock()
        self._rows: dict[str, Memory] = {}
        self._by_key: dict[_DedupKey, str] = {}
        self._embeddings: dict[str, list[float]] = {}
        self._personas: dict[tuple[str, str], Persona] = {}
        self._teams: dict[str, TeamSettings] = {}
        self._actions: list[ReviewAction] = []
        self._last = datetime.fromtimestamp(0, UTC)

    def _now(self) -> datetime:
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        # strictly increasing within the store, like a database clock per transaction
        self._last = max(now, self._last)
        return self._last

    # --- MemoryStore ------------------------------------------------------------------------
    def upsert(self, ctx: AccessContext, memory: NewMemory) -> tuple[Memory, bool]:
        if not can_write(ctx, memory.team_id, memory.scope, memory.owner_id, memory.user_id):
            raise PermissionError("row-level security: write outside the caller's rows")
        with self._lock:
            now = self._now()
            existing_id = self._by_key.get(_dedup(memory))
            fields = memory.model_dump(exclude={"embedding"})
            if existing_id is not None:
                old = self._rows[existing_id]
                row = Memory(
                    **{**fields, "id": old.id, "created_at": old.created_at, "updated_at": now}
                )
                created = False
            else:
                row = Memory(**fields, id=str(uuid.uuid4()), created_at=now, updated_at=now)
                created = True
            self._rows[row.id] = row
            self._by_key[_dedup(row)] = row.id
            if memory.embedding is not None:
                self._embeddings[row.id] = list(memory.embedding)
            else:  # like PostgreSQL: a new value without an embedding drops the stale one
                self._embeddings.pop(row.id, None)
            return row, created

    def upsert_unless_erased(
        self, ctx: AccessContext, memory: NewMemory, *, user_id: str, since_ms: int
    ) -> tuple[Memory, bool] | None:
        """``upsert``, unless (``ctx.team_id``, ``user_id``) was erased at or after
        ``since_ms`` (by ``erase_user`` here, or in the erasure log): then ``None``, nothing
        written. Checked and written under the store's lock, like PostgreSQL's one
        statement."""
        since = datetime.fromtimestamp(since_ms / 1000, UTC)
        with self._lock:
            erased = self._erased_at.get((ctx.team_id, user_id))
            if erased is not None and erased >= since:
                return None
            if self._erasures is not None and self._erasures.erased_since(
                ctx.team_id, user_id, since_ms
            ):
                return None
            return self.upsert(ctx, memory)

    def get(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        with self._lock:
            row = self._rows.get(memory_id)
        return row if row is not None and memory_visible(ctx, row) else None

    def find_by_key(
        self, ctx: AccessContext, scope: Scope, owner_id: str, user_id: str | None, key: str
    ) -> Memory | None:
        with self._lock:
            memory_id = self._by_key.get((ctx.team_id, scope, owner_id, user_id or "", key))
            row = self._rows.get(memory_id) if memory_id else None
        return row if row is not None and memory_visible(ctx, row) else None

    def list_memories(self, ctx: AccessContext, flt: MemoryFilter) -> MemoryPage:
        with self._lock:
            rows = [r for r in self._rows.values() if memory_visible(ctx, r)]
        out = []
        for r in rows:
            if r.team_id != flt.team_id:
                continue
            if flt.scope is not None and r.scope is not flt.scope:
                continue
            if flt.owner_id is not None and r.owner_id != flt.owner_id:
                continue
            if flt.user_id is not None and r.user_id != flt.user_id:
                continue
            if flt.status is not None and r.status is not flt.status:
                continue
            if flt.persona_id is not None and not (
                r.scope in (Scope.PERSONA, Scope.PERSONA_USER) and r.owner_id == flt.persona_id
            ):
                continue
            if flt.updated_after is not None and r.updated_at <= flt.updated_after:
                continue
            if flt.updated_before is not None and r.updated_at >= flt.updated_before:
                continue
            out.append(r)
        out.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        if flt.cursor:
            when, after_id = decode_cursor(flt.cursor)
            out = [r for r in out if (r.created_at, r.id) < (when, after_id)]
        page = out[: flt.limit]
        nxt = (
            encode_cursor(page[-1].created_at, page[-1].id)
            if len(out) > flt.limit and page
            else None
        )
        return MemoryPage(memories=page, next_cursor=nxt)

    def update(
        self,
        ctx: AccessContext,
        memory_id: str,
        *,
        key: str | None = None,
        value: str | None = None,
        confidence: float | None = None,
        status: Status | None = None,
        embedding: list[float] | None = None,
    ) -> Memory | None:
        with self._lock:
            row = self._rows.get(memory_id)
            if row is None or not memory_visible(ctx, row):
                return None
            if not can_write(ctx, row.team_id, row.scope, row.owner_id, row.user_id):
                return None
            changes: dict[str, object] = {"updated_at": self._now()}
            if key is not None:
                changes["key"] = key
            if value is not None:
                changes["value"] = value
            if confidence is not None:
                changes["confidence"] = confidence
            if status is not None:
                changes["status"] = status
            new = Memory.model_validate({**row.model_dump(), "team_id": row.team_id, **changes})
            if _dedup(new) != _dedup(row):
                if _dedup(new) in self._by_key:
                    raise Conflict(f"a memory with key {new.key!r} already exists in this scope")
                del self._by_key[_dedup(row)]
                self._by_key[_dedup(new)] = new.id
            self._rows[new.id] = new
            if embedding is not None:
                self._embeddings[new.id] = list(embedding)
            return new

    def delete(self, ctx: AccessContext, memory_id: str) -> bool:
        with self._lock:
            row = self._rows.get(memory_id)
            if row is None or not can_write(ctx, row.team_id, row.scope, row.owner_id, row.user_id):
                return False
            del self._rows[memory_id]
            self._by_key.pop(_dedup(row), None)
            self._embeddings.pop(memory_id, None)
            return True

    def archive(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        return self.update(ctx, memory_id, status=Status.ARCHIVED)

    def recall(self, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
        def wanted(r: Memory) -> bool:
            if r.status is not Status.ACTIVE or r.team_id != request.team_id:
                return False
            if r.scope is Scope.USER:
                return r.owner_id == request.user_id
            if request.persona_id is None or r.owner_id != request.persona_id:
                return False
            return r.scope is Scope.PERSONA or r.user_id == request.user_id

        with self._lock:
            candidates = [r for r in self._rows.values() if wanted(r) and memory_visible(ctx, r)]
            embeddings = dict(self._embeddings)
        return rank_in_memory(
            candidates,
            request.query,
            request.limit,
            query_embedding=request.embedding,
            embeddings=embeddings if request.embedding is not None else None,
        )

    def count_by_owner(self, ctx: AccessContext, scope: Scope, owner_id: str) -> int:
        with self._lock:
            return sum(
                1
                for r in self._rows.values()
                if r.scope is scope and r.owner_id == owner_id and memory_visible(ctx, r)
            )

    def erase_user(self, ctx: AccessContext, user_id: str) -> dict[str, int]:
        counts = {Scope.USER.value: 0, Scope.PERSONA_USER.value: 0}
        with self._lock:
            self._erased_at[(ctx.team_id, user_id)] = self._now()
            erased: set[str] = set()
            for r in list(self._rows.values()):
                mine = (r.scope is Scope.USER and r.owner_id == user_id) or (
                    r.scope is Scope.PERSONA_USER and r.user_id == user_id
                )
                if mine and self.delete(ctx, r.id):
                    counts[r.scope.value] += 1
                    erased.add(r.id)
            # the audit: rows about the user's memories go; rows where they acted lose the actor
            team = [a for a in self._actions if a.team_id == ctx.team_id]
            erased |= {a.memory_id for a in team if audit_is_about(a, user_id)}
            kept: list[ReviewAction] = []
            for a in self._actions:
                if a.team_id != ctx.team_id:
                    kept.append(a)
                elif a.memory_id not in erased:
                    erase_actor = a.actor_id == user_id
                    kept.append(
                        a.model_copy(update={"actor_id": ERASED_ACTOR}) if erase_actor else a
                    )
            self._actions = kept
        return counts

    def apply_retention(
        self, ctx: AccessContext, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        archived = deleted = 0
        with self._lock:
            for r in list(self._rows.values()):
                if not can_write(ctx, r.team_id, r.scope, r.owner_id, r.user_id):
                    continue
                if r.status is Status.ARCHIVED and r.updated_at < delete_archived_before:
                    self.delete(ctx, r.id)
                    deleted += 1
            for r in list(self._rows.values()):
                if not can_write(ctx, r.team_id, r.scope, r.owner_id, r.user_id):
                    continue
                if r.status is Status.ACTIVE and r.updated_at < archive_before:
                    self._rows[r.id] = r.model_copy(
                        update={"status": Status.ARCHIVED, "updated_at": self._now()}
                    )
                    archived += 1
        return {"archived": archived, "deleted": deleted}

    def record_action(self, ctx: AccessContext, action: ReviewAction) -> None:
        if action.team_id != ctx.team_id:
            raise PermissionError("row-level security: another team")
        with self._lock:
            self._actions.append(action)

    def list_actions(self, ctx: AccessContext, memory_id: str) -> list[ReviewAction]:
        with self._lock:
            return [
                a
                for a in self._actions
                if a.team_id == ctx.team_id and a.memory_id == memory_id and ctx.elevated
            ]

    # --- PersonaStore -----------------------------------------------------------------------
    def get_persona(self, ctx: AccessContext, persona_id: str) -> Persona | None:
        with self._lock:
            return self._personas.get((ctx.team_id, persona_id))

    def put_persona(self, ctx: AccessContext, persona: Persona) -> Persona:
        if persona.team_id != ctx.team_id or not ctx.elevated:
            raise PermissionError("row-level security: personas are written by team admins")
        stored = persona.model_copy(update={"updated_at": self._now()})
        with self._lock:
            self._personas[(ctx.team_id, persona.persona_id)] = stored
        return stored

    def get_team_settings(self, ctx: AccessContext) -> TeamSettings | None:
        with self._lock:
            return self._teams.get(ctx.team_id)

    def put_team_settings(self, ctx: AccessContext, settings: TeamSettings) -> TeamSettings:
        if settings.team_id != ctx.team_id or not ctx.elevated:
            raise PermissionError("row-level security: team settings are written by team admins")
        stored = settings.model_copy(update={"updated_at": self._now()})
        with self._lock:
            self._teams[ctx.team_id] = stored
        return stored


__all__ = ["InMemoryMemoryStore", "can_see"]
