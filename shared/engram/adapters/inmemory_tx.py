"""``InMemoryTx``: one unit of work on the tables of an ``InMemoryMemoryStore`` (which holds
its lock meanwhile). Every write is journalled, and undone in reverse when the block raises."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from engram.adapters import inmemory_versions as histories
from engram.adapters.inmemory_changes import ChangeMethods
from engram.adapters.inmemory_merges import MergeMethods
from engram.adapters.inmemory_rows import (
    MISSING,
    DedupKey,
    ErasureRecords,
    SuppressionKey,
    audit_after_erasure,
    key_of,
    matches,
    page_of,
    recalled,
    suppression_key,
    suppression_user,
)
from engram.errors import Conflict
from engram.events.models import Cause, MemoryEventType
from engram.memories.changes import ChangeProposal
from engram.memories.keys import canonical_key
from engram.memories.lifecycle import QuotaSubject, counts_toward, subject_user
from engram.memories.models import (
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
    KeyRow,
    MemoryChange,
    MemoryTx,
    Switches,
)
from engram.memories.privacy import can_see, can_write, memory_visible
from engram.memories.recall import rank_in_memory
from engram.memories.versions import (
    MAINTENANCE,
    MemoryVersion,
    VersionPage,
    bumps,
    version_of,
)


class MemoryTables:
    """What the in-memory store holds, table by table (its units of work write them)."""

    def __init__(self, erasures: ErasureRecords | None = None) -> None:
        #: an erasure log consulted and written beside the erasures recorded here
        self.erasures = erasures
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
        #: change proposals by id (pending and decided), beside their memories
        self.changes: dict[str, ChangeProposal] = {}


class InMemoryTx(ChangeMethods, MergeMethods, MemoryTx):
    """One unit of work on a store's ``MemoryTables`` (the store holds its lock meanwhile)."""

    _s: MemoryTables

    def __init__(self, store: MemoryTables, ctx: AccessContext, now: datetime) -> None:
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
        """``table[key] = value`` (``MISSING``: deleted), undone if the block raises."""
        old = table.get(key, MISSING)

        def undo() -> None:
            if old is MISSING:
                table.pop(key, None)
            else:
                table[key] = old

        self._journal.append(undo)
        if value is MISSING:
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
            self._assign(self._s.by_key, key_of(old), MISSING)
        self._assign(self._s.rows, row.id, row)
        self._assign(self._s.by_key, key_of(row), row.id)

    def _embed(self, memory_id: str, model: str | None, vector: list[float] | None) -> None:
        """Like PostgreSQL: a new text without an embedding drops the stale one."""
        value = MISSING if model is None and vector is None else (model, vector)
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
        self._assign(self._s.edited, row.id, MISSING)
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
        self._assign(self._s.rows, memory_id, MISSING)
        self._assign(self._s.by_key, key_of(row), MISSING)
        self._assign(self._s.embeddings, memory_id, MISSING)
        self._assign(self._s.edited, memory_id, MISSING)
        self._drop_changes(lambda c: c.memory_id != memory_id)
        return row

    def revive(self, memory: Memory) -> Memory:
        if not self._writable(memory) or key_of(memory) in self._s.by_key:
            raise Conflict("a memory with this key already exists in this scope")
        row = memory.model_copy(update={"updated_at": self._now})
        self._put(row)
        return row

    def forget_versions(self, memory_id: str) -> None:
        self._assign(self._s.versions, memory_id, MISSING)

    def record_version(self, version: MemoryVersion) -> None:
        history = histories.recorded(self._s.versions.get(version.memory_id, []), version)
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
        return histories.numbered(self._history(memory_id), number)

    def versions(self, memory_id: str, *, after: int, limit: int) -> VersionPage:
        return histories.page(self._history(memory_id), after, limit)

    def version_at(self, memory_id: str, at: datetime) -> MemoryVersion | None:
        return histories.current_at(self._history(memory_id), at)

    def versions_current_at(self, request: RecallRequest, at: datetime) -> list[MemoryVersion]:
        found = (histories.recalled_at(self._history(m), request, at) for m in self._s.versions)
        return [v for v in found if v is not None]

    def publish(
        self,
        event_type: MemoryEventType,
        memory: Memory,
        *,
        actor_id: str,
        cause: Cause,
        deleted: bool = False,
        into: str | None = None,
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
            self._assign(self._s.rows, r.id, MISSING)
            self._assign(self._s.by_key, key_of(r), MISSING)
            self._assign(self._s.embeddings, r.id, MISSING)
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
            self._assign(self._s.suppressions, k, MISSING)
        changes = self._drop_changes(lambda c: c.team_id != team or c.source_user_id != user_id)
        self._drop_changes(lambda c: c.memory_id not in erased)  # go with their memory
        forgotten = 0
        for memory_id, history in list(self._s.versions.items()):
            if history[-1].team_id != team:
                continue
            left = histories.after_erasure(history, user_id, memory_erased=memory_id in erased)
            forgotten += len(history) - len(left)
            if left != history:
                self._assign(self._s.versions, memory_id, left or MISSING)
        return {
            **counts,
            "review_actions": audit,
            "suppressions": len(gone),
            "versions": forgotten,
            "changes": changes,
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


__all__ = ["InMemoryTx", "MemoryTables"]
