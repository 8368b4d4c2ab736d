"""Ports of the explicit-memory domain. Adapters live in ``engram.adapters``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

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


@dataclass(frozen=True, slots=True)
class AccessContext:
    """The tenant a store call acts in; the PostgreSQL adapter turns it into RLS settings.

    ``elevated`` is true for admins of the team and for the service's own jobs; it lets the
    call see (and write) every row of ``team_id``. Without it a call sees its own user and
    persona_user rows and the team's persona rows, and writes only its own rows.
    """

    team_id: str
    user_id: str
    elevated: bool = False


class MemoryStore(Protocol):
    """Seed §4 operations, all within one team (``ctx.team_id``).

    Every method answers as if rows the context may not see did not exist.
    """

    def upsert(self, ctx: AccessContext, memory: NewMemory) -> tuple[Memory, bool]:
        """Create, or update the row with the same (scope, owner, user, key): value,
        confidence, status, provenance and ``updated_at`` change; id and ``created_at`` stay.
        Returns the row and whether it was created."""
        ...

    def get(self, ctx: AccessContext, memory_id: str) -> Memory | None: ...

    def find_by_key(
        self, ctx: AccessContext, scope: Scope, owner_id: str, user_id: str | None, key: str
    ) -> Memory | None: ...

    def list_memories(self, ctx: AccessContext, flt: MemoryFilter) -> MemoryPage:
        """Newest first (``created_at`` then id, descending), cursor-paginated."""
        ...

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
        """Change fields of one row; raises ``Conflict`` when the new key is taken."""
        ...

    def delete(self, ctx: AccessContext, memory_id: str) -> bool: ...

    def archive(self, ctx: AccessContext, memory_id: str) -> Memory | None: ...

    def recall(self, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
        """Active rows of the visible scopes, shadowed by key, ranked (see ``recall.py``)."""
        ...

    def count_by_owner(self, ctx: AccessContext, scope: Scope, owner_id: str) -> int: ...

    def erase_user(self, ctx: AccessContext, user_id: str) -> dict[str, int]:
        """Hard-delete the user and persona_user rows of ``user_id``; counts per scope."""
        ...

    def apply_retention(
        self, ctx: AccessContext, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        """Archive active rows not updated since ``archive_before``; hard-delete archived
        rows not updated since ``delete_archived_before``."""
        ...

    def record_action(self, ctx: AccessContext, action: ReviewAction) -> None: ...

    def list_actions(self, ctx: AccessContext, memory_id: str) -> list[ReviewAction]: ...


class PersonaStore(Protocol):
    def get_persona(self, ctx: AccessContext, persona_id: str) -> Persona | None: ...

    def put_persona(self, ctx: AccessContext, persona: Persona) -> Persona: ...

    def get_team_settings(self, ctx: AccessContext) -> TeamSettings | None: ...

    def put_team_settings(self, ctx: AccessContext, settings: TeamSettings) -> TeamSettings: ...


class Embedder(Protocol):
    """Text to vectors of a fixed dimension (``Settings.embedding_dimensions``)."""

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...
