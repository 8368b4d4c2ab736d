"""In-memory memory store (a ``UnitOfWork``): the store the conformance suite runs beside
PostgreSQL. A unit of work holds the store's lock for its whole block (so transactions are
serial) and journals every write, undone in reverse when the block raises. It enforces the
visibility of row-level security (``engram.memories.privacy``) and one row per key; what a
write should do is ``engram.memories.rules``, applied by ``engram.memories.writes``."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from engram.adapters.inmemory_rows import (
    DedupKey,
    ErasureRecords,
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
from engram.errors import Conflict
from engram.events.models import Cause, MemoryEventType
from engram.memories.keys import canonical_key
from engram.memories.lifecycle import QuotaSubject, counts_toward, subject_user
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
)
from engram.memories.ports import (
    AccessContext,
    EmbeddingTask,
    HistoryRetention,
    KeyRow,
    MemoryChange,
    MemoryTx,
    Switches,
    UnitOfWork,
)
from engram.memories.privacy import can_see, can_write, memory_visible
from engram.memories.recall import rank_in_memory
from engram.memories.versions import (
    DELETED,
    MAINTENANCE,
    MemoryVersion,
    VersionPage,
    bumps,
    version_of,
)

_MISSING: Any = object()


class InMemoryMemoryStore(UnitOfWork, HistoryRetention):
    """``erasures``: an erasure log consulted and written beside the erasures this store
    records itself. ``transactions`` counts the units of work begun."""

    def __init__(
        self, clock: Clock | None = None, *, erasures: ErasureRecords | None = None
    ) -> None:
        self._clock = clock or SystemClock()
        self.erasures = erasures
        self._lock = threading.RLock()
        self.rows: dict[str, Memory] = {}
        self.by_key: dict[DedupKey, str] = {}
        #: id -> (embedding model, vector or None when the model gave none)
        self.embeddings: dict[str, tuple[str | None, list[float] | None]] = {}
        #: rows whose key or value a person edited (PostgreSQL's ``edited_at``)
        self.edited: dict[str, bool] = {}
        self.personas: dict[tuple[str, str], Persona] = {}
        self.teams: dict[str, TeamSettings] = {}
        self.actions: list[ReviewAction] = []
        #: suppressions (deletions, archives, rejections) -> the persona row's source user
        self.suppressions: dict[SuppressionKey, str | None] = {}
        self.erased_at: dict[tuple[str, str], datetime] = {}
        #: memory id -> its recorded versions, oldest first (kept after the row is deleted)
        self.versions: dict[str, list[MemoryVersion]] = {}
        self.transactions = 0
        self._last = datetime.fromtimestamp(0, UTC)

    def _now(self) -> datetime:
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        # strictly increasing within the store, like a database clock per transaction
        self._last = max(now, self._last)
        return self._last

    @contextmanager
    def __call__(self, ctx: AccessContext) -> Iterator[MemoryTx]:
        with self._lock:
            self.transactions += 1
            tx = InMemoryTx(self, ctx, self._now())
            try:
                yield tx
            except BaseException:
                tx.undo_to(0)
                raise

    # --- EmbeddingBacklog -----------------------------------------------------------------
    def unembedded(self, model_id: str, limit: int) -> list[EmbeddingTask]:
        with self._lock:
            rows = sorted(
                (
                    r
                    for r in self.rows.values()
                    if self.embeddings.get(r.id, (None, None))[0] != model_id
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
                row = self.rows.get(task.memory_id)
                if row is not None and (row.key, row.value) == (task.key, task.value):
                    self.embeddings[row.id] = (model_id, vector)
                    stored += 1
        return stored

    # --- HistoryRetention -----------------------------------------------------------------
    def purge_history(self, before: datetime, limit: int) -> int:
        purged = 0
        with self._lock:
            for memory_id, history in list(self.versions.items()):
                gone = history[-1].status == DELETED and history[-1].valid_from < before
                doomed = [v for v in history if gone or (v.valid_to and v.valid_to < before)]
                doomed = doomed[: max(limit - purged, 0)]
                if doomed:
                    purged += len(doomed)
                    kept = [v for v in history if v not in doomed]
                    self.versions[memory_id] = kept
                    if not kept:
                        del self.versions[memory_id]
        return purged


class InMemoryTx(MemoryTx):
    """One unit of work on an ``InMemoryMemoryStore`` (which holds its lock meanwhile)."""

    def __init__(self, store: InMemoryMemoryStore, ctx: AccessContext, now: datetime) -> None:
        self._s = store
        self._ctx = ctx
        self._now = now
        self._journal: list[Callable[[], None]] = []

    @property
    def ctx(self) -> AccessContext:
        return self._ctx

    @property
    def now(self) -> datetime:
        return self._now

    # --- the journal ----------------------------------------------------------------------
    def _assign(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        """``table[key] = value`` (``_MISSING``: deleted), undone if the block raises."""
        old = table.get(key, _MISSING)

        def undo() -> None:
            if old is _MISSING:
                table.pop(key, None)
            else:
                table[key] = old

        self._journal.append(undo)
        if value is _MISSING:
            table.pop(key, None)
        else:
            table[key] = value

    def _replace_actions(self, actions: list[ReviewAction]) -> None:
        old = self._s.actions
        self._journal.append(lambda: setattr(self._s, "actions", old))
        self._s.actions = actions

    def undo_to(self, mark: int) -> None:
        while len(self._journal) > mark:
            self._journal.pop()()

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        mark = len(self._journal)
        try:
            yield
        except BaseException:
            self.undo_to(mark)
            raise

    def _put(self, row: Memory) -> None:
        old = self._s.rows.get(row.id)
        if old is not None and key_of(old) != key_of(row):
            self._assign(self._s.by_key, key_of(old), _MISSING)
        self._assign(self._s.rows, row.id, row)
        self._assign(self._s.by_key, key_of(row), row.id)

    def _embed(self, memory_id: str, model: str | None, vector: list[float] | None) -> None:
        """Like PostgreSQL: a new text without an embedding drops the stale one."""
        value = _MISSING if model is None and vector is None else (model, vector)
        self._assign(self._s.embeddings, memory_id, value)

    def _writable(self, row: Memory) -> bool:
        return can_write(self._ctx, row.team_id, row.scope, row.owner_id, row.user_id)

    def _check_write(self, memory: NewMemory) -> None:
        if not can_write(self._ctx, memory.team_id, memory.scope, memory.owner_id, memory.user_id):
            raise PermissionError("row-level security: write outside the caller's rows")

    # --- settings -------------------------------------------------------------------------
    def switches(self, persona_id: str | None) -> Switches:
        team = self._ctx.team_id
        persona = self._s.personas.get((team, persona_id)) if persona_id else None
        return Switches(team=self._s.teams.get(team), persona=persona)

    def personas(self) -> list[Persona]:
        found = [p for (team, _), p in self._s.personas.items() if team == self._ctx.team_id]
        return sorted(found, key=lambda p: p.persona_id)

    def put_persona(self, persona: Persona) -> Persona:
        if persona.team_id != self._ctx.team_id or not self._ctx.elevated:
            raise PermissionError("row-level security: personas are written by team admins")
        stored = persona.model_copy(update={"updated_at": self._now})
        self._assign(self._s.personas, (persona.team_id, persona.persona_id), stored)
        return stored

    def put_team_settings(self, settings: TeamSettings) -> TeamSettings:
        if settings.team_id != self._ctx.team_id or not self._ctx.elevated:
            raise PermissionError("row-level security: team settings are written by team admins")
        stored = settings.model_copy(update={"updated_at": self._now})
        self._assign(self._s.teams, settings.team_id, stored)
        return stored

    # --- reads ----------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory | None:
        row = self._s.rows.get(memory_id)
        return row if row is not None and memory_visible(self._ctx, row) else None

    def lock(self, memory_id: str) -> Memory | None:
        return self.get(memory_id)  # the store's lock is held for the whole unit of work

    def lock_key(self, scope: Scope, owner_id: str, user_id: str | None, key: str) -> KeyRow | None:
        found = (self._ctx.team_id, scope, owner_id, user_id or "", canonical_key(key))
        memory_id = self._s.by_key.get(found)
        row = self.get(memory_id) if memory_id else None
        return None if row is None else KeyRow(row, self._s.edited.get(row.id, False))

    def list_memories(self, flt: MemoryFilter) -> MemoryPage:
        rows = [r for r in self._s.rows.values() if memory_visible(self._ctx, r)]
        return page_of([r for r in rows if matches(r, flt)], flt)

    def recall(self, request: RecallRequest) -> list[Memory]:
        candidates = [
            r
            for r in self._s.rows.values()
            if recalled(r, request) and memory_visible(self._ctx, r)
        ]
        embeddings = {
            mid: vector
            for mid, (model, vector) in self._s.embeddings.items()
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

    def count_by_owner(self, scope: Scope, owner_id: str) -> int:
        return sum(
            1
            for r in self._s.rows.values()
            if r.scope is scope and r.owner_id == owner_id and memory_visible(self._ctx, r)
        )

    def list_actions(self, memory_id: str) -> list[ReviewAction]:
        if not self._ctx.elevated:
            return []
        team = self._ctx.team_id
        return [a for a in self._s.actions if a.team_id == team and a.memory_id == memory_id]

    def usage(self, subjects: list[QuotaSubject]) -> dict[str, int]:
        team_rows = [r for r in self._s.rows.values() if r.team_id == self._ctx.team_id]
        return {
            f"{s.kind}/{s.subject}": sum(1 for r in team_rows if counts_toward(r, s))
            for s in subjects
        }

    def suppressed(self, memory: NewMemory) -> bool:
        return suppression_key(memory) in self._s.suppressions

    def erased_since(self, user_id: str, since_ms: int) -> bool:
        team = self._ctx.team_id
        erased = self._s.erased_at.get((team, user_id))
        if erased is not None and erased >= datetime.fromtimestamp(since_ms / 1000, UTC):
            return True
        log = self._s.erasures
        return log is not None and log.erased_since(team, user_id, since_ms)

    # --- writes ---------------------------------------------------------------------------
    def _fields(self, memory: NewMemory) -> dict[str, Any]:
        fields = memory.model_dump(exclude={"embedding", "embedding_model"})
        return {**fields, "source_user_id": memory.source_user_id}  # not part of its dump

    def save(self, memory: NewMemory) -> tuple[Memory, bool, bool] | None:
        self._check_write(memory)
        current = self._s.by_key.get(key_of(memory))
        if current is None:
            row = self.insert(memory)
            assert row is not None
            return row, True, True
        existing = self._s.rows[current]
        if existing.status is Status.REJECTED:
            return None
        if (existing.value, existing.status) == (memory.value, memory.status):
            return existing, False, False
        return self._written(existing, memory), False, True

    def _written(self, existing: Memory, memory: NewMemory) -> Memory:
        """``existing`` (locked) takes ``memory``'s fields but its key as first written."""
        moves = bumps(existing, existing.key, memory.value, memory.status, memory.confidence)
        row = Memory(
            **{**self._fields(memory), "key": existing.key},
            id=existing.id,
            created_at=existing.created_at,
            updated_at=max(self._now, existing.updated_at),
            version=existing.version + int(moves),
        )
        self._put(row)
        self._embed(row.id, memory.embedding_model, memory.embedding)
        return row

    def insert(self, memory: NewMemory) -> Memory | None:
        self._check_write(memory)
        if key_of(memory) in self._s.by_key:
            return None
        now = self._now
        row = Memory(**self._fields(memory), id=str(uuid.uuid4()), created_at=now, updated_at=now)
        self._put(row)
        self._embed(row.id, memory.embedding_model, memory.embedding)
        return row

    def overwrite(self, row: Memory, memory: NewMemory) -> Memory:
        """The key as first written stays, like every write of a key's row."""
        self._check_write(memory)
        self._assign(self._s.edited, row.id, _MISSING)
        return self._written(row, memory)

    def change(self, row: Memory, change: MemoryChange, *, edited: bool = False) -> Memory | None:
        current = self._s.rows.get(row.id)
        if current is None or not self._writable(current):
            return None
        new = Memory.model_validate(
            {
                **current.internal_fields(),
                **change.fields(),
                "updated_at": max(self._now, current.updated_at),
            }
        )
        moves = bumps(current, new.key, new.value, new.status, new.confidence)
        new = new.model_copy(update={"version": current.version + int(moves)})
        holder = self._s.by_key.get(key_of(new))
        if holder is not None and holder != new.id:
            raise Conflict(f"a memory with key {new.key!r} already exists in this scope")
        self._put(new)
        if edited:
            self._assign(self._s.edited, new.id, True)
        if change.new_text:
            # a new text: its embedding is what the caller gives (none: embedded later)
            self._embed(new.id, change.embedding_model, change.embedding)
        return new

    def remove(self, memory_id: str) -> Memory | None:
        row = self._s.rows.get(memory_id)
        if row is None or not self._writable(row):
            return None
        self._assign(self._s.rows, memory_id, _MISSING)
        self._assign(self._s.by_key, key_of(row), _MISSING)
        self._assign(self._s.embeddings, memory_id, _MISSING)
        self._assign(self._s.edited, memory_id, _MISSING)
        return row

    def revive(self, memory: Memory) -> Memory:
        if not self._writable(memory) or key_of(memory) in self._s.by_key:
            raise Conflict("a memory with this key already exists in this scope")
        row = memory.model_copy(update={"updated_at": self._now})
        self._put(row)
        return row

    def forget_versions(self, memory_id: str) -> None:
        self._assign(self._s.versions, memory_id, _MISSING)

    def record_version(self, version: MemoryVersion) -> None:
        history = list(self._s.versions.get(version.memory_id, []))
        if history and history[-1].valid_to is None:
            history[-1] = history[-1].model_copy(update={"valid_to": version.valid_from})
        history.append(version)
        self._assign(self._s.versions, version.memory_id, history)

    # --- versions -------------------------------------------------------------------------
    def _history(self, memory_id: str) -> list[MemoryVersion]:
        history = self._s.versions.get(memory_id, [])
        if not history:
            return []
        last = history[-1]
        if not can_see(self._ctx, last.team_id, last.scope, last.owner_id, last.user_id):
            return []
        return history

    def version(self, memory_id: str, number: int | None) -> MemoryVersion | None:
        history = self._history(memory_id)
        if number is None:
            return history[-1] if history else None
        return next((v for v in history if v.version == number), None)

    def versions(self, memory_id: str, *, after: int, limit: int) -> VersionPage:
        history = self._history(memory_id)
        later = [v for v in history if v.version > after]
        page = later[:limit]
        more = len(later) > limit
        return VersionPage(
            versions=page,
            recorded_from=history[0].version if history else None,
            next_after=page[-1].version if more else None,
        )

    def version_at(self, memory_id: str, at: datetime) -> MemoryVersion | None:
        return next((v for v in self._history(memory_id) if _current_at(v, at)), None)

    def versions_current_at(self, request: RecallRequest, at: datetime) -> list[MemoryVersion]:
        found = []
        for memory_id in self._s.versions:
            v = self.version_at(memory_id, at)
            if v is not None and v.status != DELETED:
                as_active = v.as_memory().model_copy(update={"status": Status.ACTIVE})
                if recalled(as_active, request):
                    found.append(v)
        return found

    def publish(
        self,
        event_type: MemoryEventType,
        memory: Memory,
        *,
        actor_id: str,
        cause: Cause,
        deleted: bool = False,
    ) -> None:
        """The in-memory store keeps no outbox (nothing relays its events)."""

    def audit(self, action: ReviewAction) -> None:
        self._s.actions.append(action)
        self._journal.append(lambda: self._s.actions.remove(action))

    def suppress(self, memory: Memory) -> None:
        key = suppression_key(memory)
        if key not in self._s.suppressions:
            source = memory.source_user_id if memory.scope is Scope.PERSONA else None
            self._assign(self._s.suppressions, key, source)

    # --- bulk -----------------------------------------------------------------------------
    def record_erasure(self, user_id: str, at_ms: int) -> None:
        at = datetime.fromtimestamp(at_ms / 1000, UTC)
        self._assign(self._s.erased_at, (self._ctx.team_id, user_id), at)
        if self._s.erasures is not None:  # a log outside the journal: recorded once, kept
            self._s.erasures.record(self._ctx.team_id, user_id, at_ms)

    def erase_user(self, user_id: str) -> dict[str, int]:
        """As PostgreSQL's erasure: the user's rows, the persona rows learnt from them, the
        audit about any of those, their suppressions; their actor id off the rest."""
        team = self._ctx.team_id
        counts = {s.value: 0 for s in Scope}
        erased: set[str] = set()
        for r in list(self._s.rows.values()):
            if r.team_id != team or subject_user(r) != user_id:
                continue
            if r.scope is not Scope.PERSONA and not self._writable(r):
                continue
            self._assign(self._s.rows, r.id, _MISSING)
            self._assign(self._s.by_key, key_of(r), _MISSING)
            self._assign(self._s.embeddings, r.id, _MISSING)
            counts[r.scope.value] += 1
            erased.add(r.id)
        kept, audit = audit_after_erasure(self._s.actions, team, user_id, erased)
        self._replace_actions(kept)
        gone = [
            k
            for k, source in self._s.suppressions.items()
            if k[0] == team and user_id in (source, suppression_user(k))
        ]
        for k in gone:
            self._assign(self._s.suppressions, k, _MISSING)
        versions = 0
        for memory_id, history in list(self._s.versions.items()):
            if not history or history[-1].team_id != team:
                continue
            left = [
                v.model_copy(update={"actor_id": ERASED_ACTOR}) if v.actor_id == user_id else v
                for v in history
                if memory_id not in erased and not _about(v, user_id)
            ]
            versions += len(history) - len(left)
            if left != history:
                self._assign(self._s.versions, memory_id, left or _MISSING)
        return {
            **counts,
            "review_actions": audit,
            "suppressions": len(gone),
            "versions": versions,
        }

    def apply_retention(
        self, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        archived = deleted = 0
        for r in list(self._s.rows.values()):
            idle = r.status is Status.ARCHIVED and r.updated_at < delete_archived_before
            if idle and self._writable(r) and self.remove(r.id):
                self.record_version(version_of(r, MAINTENANCE, self._now, deleted=True))
                deleted += 1
        for r in list(self._s.rows.values()):
            if self._writable(r) and r.status is Status.ACTIVE and r.updated_at < archive_before:
                after = r.model_copy(
                    update={
                        "status": Status.ARCHIVED,
                        "updated_at": self._now,
                        "version": r.version + 1,
                    }
                )
                self._put(after)
                self.record_version(version_of(after, MAINTENANCE, self._now))
                archived += 1
        return {"archived": archived, "deleted": deleted}


def _about(v: MemoryVersion, user_id: str) -> bool:
    """As PostgreSQL's erasure judges a version: of the user's own rows, or learnt from them."""
    mine = (
        v.owner_id
        if v.scope is Scope.USER
        else v.user_id
        if v.scope is Scope.PERSONA_USER
        else None
    )
    return user_id in (mine, v.source_user_id)


def _current_at(v: MemoryVersion, at: datetime) -> bool:
    return v.valid_from <= at and (v.valid_to is None or at < v.valid_to)


__all__ = [
    "ErasureRecords",
    "InMemoryMemoryStore",
    "InMemoryTx",
    "can_see",
    "decode_cursor",
    "encode_cursor",
]
