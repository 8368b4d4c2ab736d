"""Ports of the explicit-memory domain. Adapters live in ``engram.adapters``.

A store is a ``UnitOfWork``: ``with store(ctx) as tx`` is one tenant transaction (``MemoryTx``)
in which a use case reads, locks and writes rows. ``AccessContext`` is re-exported.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from engram.events.models import Cause, MemoryEventType
from engram.memories.access import AccessContext
from engram.memories.changes import ChangeProposal
from engram.memories.lifecycle import QuotaSubject
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
from engram.memories.versions import MemoryVersion, VersionPage


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


@dataclass(frozen=True, slots=True)
class KeyRow:
    """A key's one row as a unit of work locked it, and whether a person edited its key or
    value since it was last learnt (what protects a proposal from being refreshed)."""

    memory: Memory
    edited: bool = False


@dataclass(frozen=True, slots=True)
class Switches:
    """The team's settings and one persona's, as one transaction read them (None: never
    configured, so the defaults apply)."""

    team: TeamSettings | None = None
    persona: Persona | None = None


class MemoryTx(Protocol):
    """One tenant's transaction over memories, personas, team settings, review actions and
    the outbox: what a store does (read, lock, write rows), never what a write should do —
    those rules are ``engram.memories.rules``, applied by ``engram.memories.writes``.

    Every method answers as if rows ``ctx`` may not see did not exist, and a write to a row
    it may not write changes nothing (``None``/``False``).
    """

    @property
    def ctx(self) -> AccessContext: ...

    @property
    def now(self) -> datetime:
        """The transaction's time: what its writes stamp."""
        ...

    # --- settings -------------------------------------------------------------------------
    def switches(self, persona_id: str | None) -> Switches:
        """The team's settings and ``persona_id``'s (None: the team's only), in one read."""
        ...

    def personas(self) -> list[Persona]:
        """The personas configured in the team, by persona id."""
        ...

    def put_persona(self, persona: Persona) -> Persona: ...

    def put_team_settings(self, settings: TeamSettings) -> TeamSettings:
        """Also appends ``team.settings.changed`` to the outbox."""
        ...

    # --- reads ----------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory | None: ...

    def lock(self, memory_id: str) -> Memory | None:
        """The row, locked until the transaction ends."""
        ...

    def lock_key(self, scope: Scope, owner_id: str, user_id: str | None, key: str) -> KeyRow | None:
        """The key's one row (any status), whatever its spelling
        (``engram.memories.keys.canonical_key``), locked until the transaction ends."""
        ...

    def list_memories(self, flt: MemoryFilter) -> MemoryPage:
        """Newest first (``created_at`` then id, descending), cursor-paginated. The cursor is
        the (``created_at``, id) of the last row of a page, which never change: a row that
        exists throughout a listing appears exactly once, whatever is saved or deleted
        meanwhile."""
        ...

    def recall(self, request: RecallRequest) -> list[Memory]:
        """Active rows of the visible scopes, shadowed by key, ranked (see ``recall.py``)."""
        ...

    def count_by_owner(self, scope: Scope, owner_id: str) -> int: ...

    def list_actions(self, memory_id: str) -> list[ReviewAction]: ...

    def usage(self, subjects: list[QuotaSubject]) -> dict[str, int]:
        """How many live rows each counter holds (``kind/subject`` -> used), the counters
        locked in the given order until the transaction ends, so no concurrent writer adds a
        row to them meanwhile."""
        ...

    def suppressed(self, memory: NewMemory) -> bool:
        """Whether a suppression holds ``memory``'s key (however spelt) and value."""
        ...

    def version(self, memory_id: str, number: int | None) -> MemoryVersion | None:
        """One recorded version of a memory (None: its latest), also once it is deleted."""
        ...

    def versions(self, memory_id: str, *, after: int, limit: int) -> VersionPage:
        """The memory's recorded versions numbered above ``after``, oldest first."""
        ...

    def version_at(self, memory_id: str, at: datetime) -> MemoryVersion | None:
        """The version of the memory current at ``at`` (None: none recorded then)."""
        ...

    def versions_current_at(self, request: RecallRequest, at: datetime) -> list[MemoryVersion]:
        """The versions current at ``at`` of the memories ``request`` recalls from (its user's
        and persona's scopes), whatever their status then."""
        ...

    def get_change(self, change_id: str) -> ChangeProposal | None:
        """A change proposal (any status), visible when its memory is."""
        ...

    def change_for(self, memory_id: str) -> ChangeProposal | None:
        """The memory's pending change, locked until the transaction ends (lock the memory
        first: every writer locks a memory before its change)."""
        ...

    def list_changes(self, flt: MemoryFilter) -> list[tuple[ChangeProposal, Memory]]:
        """Pending changes whose memory ``flt`` selects (its ``status`` aside), with their
        memory, in ``list_memories``' order on the change's (``created_at``, id), from
        ``flt.cursor``; at most ``flt.limit + 1``."""
        ...

    def nearest(
        self, memory: Memory, model_id: str, embedding: list[float] | None = None
    ) -> tuple[Memory, float] | None:
        """The live memory (active or pending) of ``memory``'s scope, owner and user under
        another key whose embedding (of ``model_id``) is the closest to ``embedding`` (None:
        ``memory``'s stored one of that model), and its cosine similarity; None when there is
        none."""
        ...

    def erased_since(self, user_id: str, since_ms: int) -> bool:
        """Whether ``user_id`` was erased at or after ``since_ms``; an erasure of the user in
        flight is waited for, and one that starts later waits for this transaction."""
        ...

    # --- writes ---------------------------------------------------------------------------
    def save(self, memory: NewMemory) -> tuple[Memory, bool, bool] | None:
        """Write the key's row from ``memory`` (created, or the row's value, confidence,
        status, provenance and embedding replaced; id, key and ``created_at`` stay) with its
        ``memory.saved`` / ``memory.updated`` event, in one statement; a row that already
        holds ``memory``'s value and status is left as it is. ``None``, nothing written, when
        the key's row is rejected. The row, whether it was created and whether it changed."""
        ...

    def insert(self, memory: NewMemory) -> Memory | None:
        """A new row; ``None``, nothing written, when the key already has one."""
        ...

    def overwrite(self, row: Memory, memory: NewMemory) -> Memory:
        """The locked ``row`` takes ``memory``'s value, confidence, status, provenance and
        embedding, and loses its person's-edit mark."""
        ...

    def change(self, row: Memory, change: MemoryChange, *, edited: bool = False) -> Memory | None:
        """Apply ``change`` to the locked ``row`` (``edited``: mark it a person's edit);
        ``Conflict`` when its new key has a row."""
        ...

    def remove(self, memory_id: str) -> Memory | None:
        """Hard-delete one row; the row as it was."""
        ...

    def revive(self, memory: Memory) -> Memory:
        """Insert a deleted memory again, under its id, as ``memory`` (its key free)."""
        ...

    def put_change(self, change: ChangeProposal) -> None:
        """Write a change proposal (new, or the one of its id replaced)."""
        ...

    def fold(self, row: Memory, into: Memory) -> Memory:
        """Make the locked ``row``'s recorded versions the earliest of the locked ``into``'s
        (numbered from 1, the last of them ended now), ``into``'s own numbered after them (its
        version moves by as many, and it is updated now). ``into`` as it now is; ``row`` itself
        stays, for ``remove``, and its audit rows stay under its id (an audit row is never
        rewritten)."""
        ...

    def forget_versions(self, memory_id: str) -> None:
        """Delete every version of a memory (its user was erased)."""
        ...

    def record_version(self, version: MemoryVersion) -> None:
        """Record the memory's next version; the one current until now stops being current
        at ``version.valid_from``."""
        ...

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
        """Append the event of one change of ``memory`` to the outbox (``into``: the memory
        a ``memory.merged`` one was folded into)."""
        ...

    def audit(self, action: ReviewAction) -> None: ...

    def suppress(self, memory: Memory) -> None:
        """Remember ``memory``'s key and value as refused (a digest, never the text)."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A block whose writes are undone, alone, when it raises."""
        ...

    # --- bulk -----------------------------------------------------------------------------
    def record_erasure(self, user_id: str, at_ms: int) -> None:
        """Record that ``user_id`` was erased (with ``user.erased`` and the user's insights
        contribution removed); recording it again changes nothing."""
        ...

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Hard-delete the user and persona_user rows of ``user_id``, the persona rows learnt
        from them, their versions (also of such rows deleted before), the audit rows about any
        of those and their suppressions; take their id off the audit rows and versions where
        they acted on what stays, and the change proposals learnt from them. Counts per scope
        (``user``, ``persona_user``, ``persona``), ``review_actions``, ``suppressions``,
        ``versions`` and ``changes``."""
        ...

    def apply_retention(
        self, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        """Archive active rows not updated since ``archive_before``; hard-delete archived
        rows not updated since ``delete_archived_before``; an event and a version for each."""
        ...


class UnitOfWork(Protocol):
    """``with uow(ctx) as tx:`` one transaction acting for ``ctx``, committed when the block
    ends and rolled back when it raises (one per use case; stores never commit alone)."""

    def __call__(self, ctx: AccessContext) -> AbstractContextManager[MemoryTx]: ...


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


class HistoryRetention(Protocol):
    """Memory versions across every team (the maintenance job's; PostgreSQL refuses it to a
    request acting in a team)."""

    def purge_history(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` versions that stopped being current before ``before``, and
        the whole history of memories deleted before it; how many versions went."""
        ...


def list_all(tx: MemoryTx, flt: MemoryFilter) -> list[Memory]:
    """Every memory ``flt`` lists, all its pages (the service's own jobs and exports)."""
    rows: list[Memory] = []
    cursor: str | None = None
    while True:
        page = tx.list_memories(flt.model_copy(update={"cursor": cursor, "limit": 1000}))
        rows.extend(page.memories)
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


__all__ = [
    "AccessContext",
    "Embedder",
    "EmbeddingBacklog",
    "EmbeddingTask",
    "HistoryRetention",
    "KeyRow",
    "MemoryChange",
    "MemoryTx",
    "Switches",
    "UnitOfWork",
    "embedding_text",
    "list_all",
]
