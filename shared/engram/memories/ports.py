"""Ports of the explicit-memory domain. Adapters live in ``engram.adapters``.

``AccessContext`` (``engram.memories.access``) is re-exported: every port method takes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from engram.memories.access import AccessContext
from engram.memories.lifecycle import AuditStamp, Quotas
from engram.memories.models import (
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    Persona,
    RecallRequest,
    RecallTuning,
    ReviewAction,
    Scope,
    Status,
    TeamSettings,
)


@dataclass(frozen=True, slots=True)
class MemoryChange:
    """The fields an edit gives one row; None leaves a field as it is. A new key or value also
    replaces the row's embedding with ``embedding`` and ``embedding_model`` (both None:
    embedded later by the backlog)."""

    key: str | None = None
    value: str | None = None
    confidence: float | None = None
    status: Status | None = None
    embedding: list[float] | None = None
    embedding_model: str | None = None

    @property
    def new_text(self) -> bool:
        """Whether the change gives a new key or value (and so a new embedding)."""
        return self.key is not None or self.value is not None

    def fields(self) -> dict[str, object]:
        """The row fields it changes (key, value, confidence, status), by name."""
        given = {
            "key": self.key,
            "value": self.value,
            "confidence": self.confidence,
            "status": self.status,
        }
        return {name: v for name, v in given.items() if v is not None}


class MemoryStore(Protocol):
    """Memory storage: save, propose, get, list, update, review, delete, recall, erase and
    retention, all within one team (``ctx.team_id``).

    Every method answers as if rows the context may not see did not exist.
    """

    def upsert(
        self, ctx: AccessContext, memory: NewMemory, *, quotas: Quotas | None = None
    ) -> tuple[Memory, bool]:
        """Create, or update the key's live row (same scope, owner, user, key; a rejected row
        of the key is replaced by a new row): value, confidence, status, provenance and
        ``updated_at`` change; id and ``created_at`` stay. Returns the row and whether it was
        created. With ``quotas``, a new row past a limit raises ``QuotaExceeded`` and nothing
        is written (checked inside the write, so concurrent writers cannot both pass)."""
        ...

    def propose(
        self,
        ctx: AccessContext,
        memory: NewMemory,
        *,
        quotas: Quotas | None = None,
        not_erased_since_ms: int | None = None,
    ) -> tuple[Memory, bool] | None:
        """A ``pending_review`` proposal in one atomic step. ``None``, nothing written, when
        ``memory.source_user_id`` was erased at or after ``not_erased_since_ms``, when a
        rejected row or a suppression holds the same key and value, when the key's live row is
        active, or when a quota has no room for a new row. Otherwise a new row (created; it
        replaces a rejected row of another value), or the key's pending row refreshed /
        archived row turned into this proposal. A pending row whose key or value a person
        edited (``update`` with ``decided``) is not refreshed: ``None``."""
        ...

    def get(self, ctx: AccessContext, memory_id: str) -> Memory | None: ...

    def find_by_key(
        self, ctx: AccessContext, scope: Scope, owner_id: str, user_id: str | None, key: str
    ) -> Memory | None:
        """The key's live row (any status but ``rejected``)."""
        ...

    def list_memories(self, ctx: AccessContext, flt: MemoryFilter) -> MemoryPage:
        """Newest first (``created_at`` then id, descending), cursor-paginated. The cursor is
        the (``created_at``, id) of the last row of a page, which never change: a row that
        exists throughout a listing appears exactly once, whatever is saved or deleted
        meanwhile."""
        ...

    def update(
        self,
        ctx: AccessContext,
        memory_id: str,
        change: MemoryChange,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> Memory | None:
        """Apply ``change`` to one row; raises ``Conflict`` when the new key is taken or the
        row is rejected (a rejection is never edited back into play). ``decided``: a person's
        change, audited in the same transaction; a person's archive is also suppressed.
        ``if_versions``: raise ``PreconditionFailed``, changing nothing, unless the row's
        ``version`` is one of them (checked on the locked row)."""
        ...

    def review(
        self, ctx: AccessContext, memory_id: str, change: MemoryChange, *, decided: AuditStamp
    ) -> Memory | None:
        """Decide a pending proposal: ``change.status`` is the decision (active or rejected),
        its key and value an optional edit. Conditional on ``pending_review`` in the same
        statement, audited in the same transaction. ``None`` when the row is not visible;
        ``Conflict`` when it is no longer pending (the loser of two concurrent decisions) or
        the new key is taken."""
        ...

    def delete(
        self,
        ctx: AccessContext,
        memory_id: str,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> bool:
        """Hard-delete one row. ``decided``: a person's deletion, audited and suppressed in the
        same transaction (retention and the erasure backstop pass none). ``if_versions`` as
        ``update``."""
        ...

    def archive(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        """``update`` to ``archived``, as the service's own change (not audited)."""
        return self.update(ctx, memory_id, MemoryChange(status=Status.ARCHIVED))

    def recall(self, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
        """Active rows of the visible scopes, shadowed by key, ranked (see ``recall.py``)."""
        ...

    def count_by_owner(self, ctx: AccessContext, scope: Scope, owner_id: str) -> int: ...

    def erase_user(self, ctx: AccessContext, user_id: str) -> dict[str, int]:
        """Hard-delete the user and persona_user rows of ``user_id``, the persona rows learnt
        from them, the audit rows about any of those and their suppressions; take their id off
        the audit rows where they acted on what stays. Counts per scope (``user``,
        ``persona_user``, ``persona``), ``review_actions`` and ``suppressions``."""
        ...

    def apply_retention(
        self, ctx: AccessContext, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        """Archive active rows not updated since ``archive_before``; hard-delete archived
        rows not updated since ``delete_archived_before``."""
        ...

    def list_actions(self, ctx: AccessContext, memory_id: str) -> list[ReviewAction]: ...


class PersonaStore(Protocol):
    def get_persona(self, ctx: AccessContext, persona_id: str) -> Persona | None: ...

    def list_personas(self, ctx: AccessContext) -> list[Persona]:
        """The personas configured in ``ctx.team_id``, by persona id."""
        ...

    def put_persona(self, ctx: AccessContext, persona: Persona) -> Persona: ...

    def get_team_settings(self, ctx: AccessContext) -> TeamSettings | None: ...

    def put_team_settings(self, ctx: AccessContext, settings: TeamSettings) -> TeamSettings: ...


class Embedder(Protocol):
    """Text to vectors of a fixed dimension."""

    @property
    def dimensions(self) -> int: ...

    @property
    def model_id(self) -> str:
        """What each row records its vector was made with: another id (a new model, another
        dimension) means the row is embedded again, and vectors of two ids are never compared."""
        ...

    @property
    def tuning(self) -> RecallTuning:
        """This embedder's similarity threshold and fusion in hybrid recall."""
        ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def embedding_text(key: str, value: str) -> str:
    """The text a memory's embedding is made from."""
    return f"{key}: {value}"


@dataclass(frozen=True, slots=True)
class EmbeddingTask:
    """One row to embed: its id, team, key and value when it was read."""

    memory_id: str
    team_id: str
    key: str
    value: str

    @property
    def text(self) -> str:
        return embedding_text(self.key, self.value)


class EmbeddingBacklog(Protocol):
    """Rows whose embedding was not made by the configured embedder, across every team (the
    maintenance job's; PostgreSQL refuses it to a request acting in a team)."""

    def unembedded(self, model_id: str, limit: int) -> list[EmbeddingTask]:
        """Up to ``limit`` rows of any status not embedded with ``model_id`` (saved without an
        embedder, while it was down, or with another one)."""
        ...

    def set_embeddings(
        self, model_id: str, done: list[tuple[EmbeddingTask, list[float] | None]]
    ) -> int:
        """Store each row's embedding (a None vector: the model gives none for this text) if
        the row still holds ``task.key`` and ``task.value``; a row changed or deleted since is
        left alone (its save embedded it, or it is listed again). How many were stored."""
        ...


def list_all(store: MemoryStore, ctx: AccessContext, flt: MemoryFilter) -> list[Memory]:
    """Every memory ``flt`` lists, all its pages (the service's own jobs and exports)."""
    rows: list[Memory] = []
    cursor: str | None = None
    while True:
        page = store.list_memories(ctx, flt.model_copy(update={"cursor": cursor, "limit": 1000}))
        rows.extend(page.memories)
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


__all__ = [
    "AccessContext",
    "Embedder",
    "EmbeddingBacklog",
    "EmbeddingTask",
    "MemoryChange",
    "MemoryStore",
    "PersonaStore",
    "embedding_text",
    "list_all",
]
