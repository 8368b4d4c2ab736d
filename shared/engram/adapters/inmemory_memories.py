"""In-memory ``MemoryStore`` + ``PersonaStore``: the reference the conformance suite checks
the PostgreSQL adapter against. Thread-safe; enforces the same visibility rules as RLS."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

from engram.adapters.inmemory_rows import (
    DedupKey,
    ErasedSince,
    SuppressionKey,
    audit_after_erasure,
    decode_cursor,
    encode_cursor,
    key_of,
    matches,
    page_of,
    recalled,
    suppression_key,
    suppression_user,
)
from engram.clock import Clock, SystemClock
from engram.errors import Conflict, QuotaExceeded
from engram.memories.lifecycle import (
    AuditStamp,
    Quotas,
    audit_row,
    check_version,
    counts_toward,
    subject_user,
)
from engram.memories.models import (
    LIVE_STATUSES,
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
)
from engram.memories.ports import AccessContext, EmbeddingTask, MemoryChange, MemoryStore
from engram.memories.privacy import can_see, can_write, memory_visible
from engram.memories.recall import rank_in_memory


class InMemoryMemoryStore(MemoryStore):
    """``erasures``: an erasure log that ``propose`` consults besides the erasures this store
    has done itself (``erase_user``)."""

    def __init__(self, clock: Clock | None = None, *, erasures: ErasedSince | None = None) -> None:
        self._clock = clock or SystemClock()
        self._erasures = erasures
        self._erased_at: dict[tuple[str, str], datetime] = {}
        self._lock = threading.RLock()
        self._rows: dict[str, Memory] = {}
        self._by_key: dict[DedupKey, str] = {}
        #: id -> (embedding model, vector or None when the model gave none)
        self._embeddings: dict[str, tuple[str | None, list[float] | None]] = {}
        self._personas: dict[tuple[str, str], Persona] = {}
        self._teams: dict[str, TeamSettings] = {}
        self._actions: list[ReviewAction] = []
        #: suppressions (deletions, archives, rejections) -> the persona row's source user
        self._suppressions: dict[SuppressionKey, str | None] = {}
        #: rows whose key or value a person edited (PostgreSQL's ``edited_at``)
        self._edited: set[str] = set()
        self._last = datetime.fromtimestamp(0, UTC)

    def _now(self) -> datetime:
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        # strictly increasing within the store, like a database clock per transaction
        self._last = max(now, self._last)
        return self._last

    # --- MemoryStore ------------------------------------------------------------------------
    def upsert(
        self, ctx: AccessContext, memory: NewMemory, *, quotas: Quotas | None = None
    ) -> tuple[Memory, bool]:
        if not can_write(ctx, memory.team_id, memory.scope, memory.owner_id, memory.user_id):
            raise PermissionError("row-level security: write outside the caller's rows")
        with self._lock:
            existing = self._live_row(memory)
            if existing is None:
                self._refuse_past_limits(memory, quotas)
            self._drop_rejected(key_of(memory))
            return self._write(memory, existing)

    def _drop_rejected(self, key: DedupKey) -> None:
        """As PostgreSQL's one row per key: a write that gives a key a new row first drops
        its rejected row (the rejected value stays refused by its suppression)."""
        for row in [r for r in self._rows.values() if r.status is Status.REJECTED]:
            if key_of(row) == key:
                del self._rows[row.id]
                self._embeddings.pop(row.id, None)

    def _live_row(self, memory: NewMemory) -> Memory | None:
        if memory.status not in LIVE_STATUSES:
            return None  # a rejected row never takes a key's place
        existing_id = self._by_key.get(key_of(memory))
        return self._rows[existing_id] if existing_id is not None else None

    def _refuse_past_limits(self, memory: NewMemory, quotas: Quotas | None) -> None:
        if quotas is None or memory.status not in LIVE_STATUSES:
            return
        team_rows = [r for r in self._rows.values() if r.team_id == memory.team_id]
        for subject in quotas.subjects(memory):
            if sum(1 for r in team_rows if counts_toward(r, subject)) >= subject.limit:
                raise subject.exceeded()

    def _write(self, memory: NewMemory, existing: Memory | None) -> tuple[Memory, bool]:
        now = self._now()
        fields = {
            **memory.model_dump(exclude={"embedding", "embedding_model"}),
            "source_user_id": memory.source_user_id,
        }
        if existing is not None:
            row = Memory(
                **{
                    **fields,
                    "id": existing.id,
                    "created_at": existing.created_at,
                    "updated_at": now,
                    "version": existing.version + 1,
                }
            )
        else:
            row = Memory(**fields, id=str(uuid.uuid4()), created_at=now, updated_at=now)
        self._rows[row.id] = row
        if row.status in LIVE_STATUSES:
            self._by_key[key_of(row)] = row.id
        # like PostgreSQL: a new value without an embedding drops the stale one
        self._set_embedding(row.id, memory.embedding_model, memory.embedding)
        return row, existing is None

    def _set_embedding(self, memory_id: str, model: str | None, vector: list[float] | None) -> None:
        if model is None and vector is None:
            self._embeddings.pop(memory_id, None)
        else:
            self._embeddings[memory_id] = (model, None if vector is None else list(vector))

    def propose(
        self,
        ctx: AccessContext,
        memory: NewMemory,
        *,
        quotas: Quotas | None = None,
        not_erased_since_ms: int | None = None,
    ) -> tuple[Memory, bool] | None:
        """As PostgreSQL's one statement, under the store's lock: nothing when the source user
        was erased at or after ``not_erased_since_ms`` (here or in the erasure log), when a
        rejected row or a suppression holds the same key and value, when the key's live row
        is active, or when a quota is full; else created, refreshed or revived."""
        with self._lock:
            if not_erased_since_ms is not None and self._erased(
                ctx.team_id, memory.source_user_id or "", not_erased_since_ms
            ):
                return None
            if self._suppressed(memory):
                return None
            if not can_write(ctx, memory.team_id, memory.scope, memory.owner_id, memory.user_id):
                raise PermissionError("row-level security: write outside the caller's rows")
            existing = self._live_row(memory)
            if existing is not None and existing.status is Status.ACTIVE:
                return None
            if (
                existing is not None
                and existing.status is Status.PENDING_REVIEW
                and existing.id in self._edited
            ):
                return None  # a person's edit of the proposal holds until it is reviewed
            if existing is None:
                try:
                    self._refuse_past_limits(memory, quotas)
                except QuotaExceeded:
                    return None
            self._drop_rejected(key_of(memory))  # of another value: an equal one suppresses
            if existing is not None:
                self._edited.discard(existing.id)
            return self._write(memory, existing)

    def _erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        erased = self._erased_at.get((team_id, user_id))
        if erased is not None and erased >= datetime.fromtimestamp(since_ms / 1000, UTC):
            return True
        return self._erasures is not None and self._erasures.erased_since(
            team_id, user_id, since_ms
        )

    def _suppress(self, memory: Memory) -> None:
        source = memory.source_user_id if memory.scope is Scope.PERSONA else None
        self._suppressions.setdefault(suppression_key(memory), source)

    def _suppressed(self, memory: NewMemory) -> bool:
        if suppression_key(memory) in self._suppressions:
            return True
        return any(
            r.status is Status.REJECTED and key_of(r) == key_of(memory) and r.value == memory.value
            for r in self._rows.values()
        )

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
        return page_of([r for r in rows if matches(r, flt)], flt)

    def update(
        self,
        ctx: AccessContext,
        memory_id: str,
        change: MemoryChange,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> Memory | None:
        with self._lock:
            row = self._writable(ctx, memory_id)
            if row is None:
                return None
            check_version(row, if_versions)
            if row.status is Status.REJECTED:
                raise Conflict("a rejected proposal cannot be edited; delete it instead")
            new = self._change(row, change)
            if decided is not None:
                if change.key is not None or change.value is not None:
                    self._edited.add(new.id)
                self._actions.append(audit_row(decided, new.id, row, new))
                if new.status is Status.ARCHIVED and row.status is not Status.ARCHIVED:
                    self._suppress(new)
            return new

    def review(
        self, ctx: AccessContext, memory_id: str, change: MemoryChange, *, decided: AuditStamp
    ) -> Memory | None:
        with self._lock:
            row = self._writable(ctx, memory_id)
            if row is None:
                return None
            if row.status is not Status.PENDING_REVIEW:
                raise Conflict(f"this memory was already reviewed (it is {row.status.value})")
            new = self._change(row, change)
            self._actions.append(audit_row(decided, new.id, row, new))
            if new.status is Status.REJECTED:
                self._suppress(new)  # stays refused once a new value replaces the row
            return new

    def _writable(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        row = self._rows.get(memory_id)
        if row is None or not memory_visible(ctx, row):
            return None
        if not can_write(ctx, row.team_id, row.scope, row.owner_id, row.user_id):
            return None
        return row

    def _change(self, row: Memory, change: MemoryChange) -> Memory:
        """``row`` with ``change`` applied; a rejected row of its new key gives way to it."""
        if change.key is not None and change.key != row.key:
            self._drop_rejected(
                (row.team_id, row.scope, row.owner_id, row.user_id or "", change.key)
            )
        new = Memory.model_validate(
            {
                **row.internal_fields(),
                **change.fields(),
                "updated_at": self._now(),
                "version": row.version + 1,
            }
        )
        was_live, live = row.status in LIVE_STATUSES, new.status in LIVE_STATUSES
        if live and (not was_live or key_of(new) != key_of(row)) and key_of(new) in self._by_key:
            raise Conflict(f"a memory with key {new.key!r} already exists in this scope")
        if was_live:
            del self._by_key[key_of(row)]
        if live:
            self._by_key[key_of(new)] = new.id
        self._rows[new.id] = new
        if change.new_text:
            # a new text: its embedding is what the caller gives (none: embedded later)
            self._set_embedding(new.id, change.embedding_model, change.embedding)
        return new

    def delete(
        self,
        ctx: AccessContext,
        memory_id: str,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> bool:
        with self._lock:
            row = self._rows.get(memory_id)
            if row is None or not can_write(ctx, row.team_id, row.scope, row.owner_id, row.user_id):
                return False
            check_version(row, if_versions)
            del self._rows[memory_id]
            if row.status in LIVE_STATUSES:
                self._by_key.pop(key_of(row), None)
            self._embeddings.pop(memory_id, None)
            if decided is not None:
                self._actions.append(audit_row(decided, row.id, row, None))
                self._suppress(row)
            return True

    def recall(self, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
        with self._lock:
            candidates = [
                r for r in self._rows.values() if recalled(r, request) and memory_visible(ctx, r)
            ]
            embeddings = {
                mid: vector
                for mid, (model, vector) in self._embeddings.items()
                if vector is not None and model is not None and model == request.embedding_model
            }
        return rank_in_memory(
            candidates,
            request.query,
            request.limit,
            query_embedding=request.embedding,
            embeddings=embeddings if request.embedding is not None else None,
            tuning=request.tuning,
        )

    # --- EmbeddingBacklog -----------------------------------------------------------------
    def unembedded(self, model_id: str, limit: int) -> list[EmbeddingTask]:
        with self._lock:
            rows = sorted(
                (
                    r
                    for r in self._rows.values()
                    if self._embeddings.get(r.id, (None, None))[0] != model_id
                ),
                key=lambda r: r.id,
            )[:limit]
            return [EmbeddingTask(r.id, r.team_id, r.key, r.value) for r in rows]

    def set_embeddings(
        self, model_id: str, done: list[tuple[EmbeddingTask, list[float] | None]]
    ) -> int:
        stored = 0
        with self._lock:
            for task, vector in done:
                row = self._rows.get(task.memory_id)
                if row is not None and (row.key, row.value) == (task.key, task.value):
                    self._set_embedding(row.id, model_id, vector)
                    stored += 1
        return stored

    def count_by_owner(self, ctx: AccessContext, scope: Scope, owner_id: str) -> int:
        with self._lock:
            return sum(
                1
                for r in self._rows.values()
                if r.scope is scope and r.owner_id == owner_id and memory_visible(ctx, r)
            )

    def erase_user(self, ctx: AccessContext, user_id: str) -> dict[str, int]:
        """As PostgreSQL's erasure: the user's rows, the persona rows learnt from them, the
        audit about any of those, their suppressions; their actor id off the rest."""
        counts = {s.value: 0 for s in Scope}
        system = AccessContext(ctx.team_id, ctx.user_id, elevated=True)
        with self._lock:
            self._erased_at[(ctx.team_id, user_id)] = self._now()
            erased: set[str] = set()
            for r in list(self._rows.values()):
                if r.team_id != ctx.team_id or subject_user(r) != user_id:
                    continue
                if self.delete(system if r.scope is Scope.PERSONA else ctx, r.id):
                    counts[r.scope.value] += 1
                    erased.add(r.id)
            self._actions, audit = audit_after_erasure(self._actions, ctx.team_id, user_id, erased)
            gone = [
                k
                for k, source in self._suppressions.items()
                if k[0] == ctx.team_id and user_id in (source, suppression_user(k))
            ]
            for k in gone:
                del self._suppressions[k]
        return {**counts, "review_actions": audit, "suppressions": len(gone)}

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
                        update={
                            "status": Status.ARCHIVED,
                            "updated_at": self._now(),
                            "version": r.version + 1,
                        }
                    )
                    archived += 1
        return {"archived": archived, "deleted": deleted}

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

    def list_personas(self, ctx: AccessContext) -> list[Persona]:
        with self._lock:
            found = [p for (team, _), p in self._personas.items() if team == ctx.team_id]
        return sorted(found, key=lambda p: p.persona_id)

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


__all__ = [
    "ErasedSince",
    "InMemoryMemoryStore",
    "can_see",
    "decode_cursor",
    "encode_cursor",
]
