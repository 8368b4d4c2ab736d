"""The state and the access rules every service of explicit memories shares: the store (a
unit of work), the switches (global, team, persona), embeddings that degrade to keywords,
visibility. ``MemoryService`` builds one ``MemoryCore`` and gives it to each of its services.

Every use case opens one unit of work (``with core.uow(ctx) as tx``) and runs its access
check, reads and writes in it."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from engram.clock import Clock, SystemClock
from engram.errors import Forbidden, MemoryDisabled, NotFound
from engram.identity import Caller
from engram.memories.changes import Duplicate
from engram.memories.cursors import CursorSigner
from engram.memories.lifecycle import AuditStamp, Quotas, private_to_its_user
from engram.memories.models import Memory, MemoryFilter, MemoryPage, Scope
from engram.memories.ports import (
    AccessContext,
    Embedder,
    MemoryChange,
    MemoryTx,
    Switches,
    UnitOfWork,
    embedding_text,
)
from engram.memories.privacy import context_for, memory_visible, persona_allows
from engram.settings import Settings

log = logging.getLogger(__name__)


class MemoryCore:
    """What the services of explicit memories share (each holds the same one)."""

    def __init__(
        self,
        uow: UnitOfWork,
        *,
        settings: Settings,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        cursors: CursorSigner | None = None,
    ) -> None:
        """``cursors`` signs review cursors with the deployment's key (the composition root
        passes it); without one, a key only this process knows."""
        self.uow = uow
        self.embedder = embedder
        self.settings = settings
        self.clock = clock or SystemClock()
        self.cursors = cursors or CursorSigner()
        self.quotas = Quotas(
            per_user=settings.max_memories_per_user,
            per_persona=settings.max_memories_per_persona,
            per_team=settings.max_memories_per_team,
        )

    def enabled(self, switches: Switches, *, persona: bool = True) -> bool:
        """Memory is on globally, for the team and (``persona``) for the persona."""
        if not self.settings.memory_enabled:
            return False
        if switches.team is not None and not switches.team.memory_enabled:
            return False
        return not persona or switches.persona is None or switches.persona.memory_enabled

    def access(
        self, caller: Caller, tx: MemoryTx, persona_id: str | None, *, persona: bool = True
    ) -> Switches:
        """The switches of ``persona_id``, read in ``tx``; raises what a write with it would:
        ``Forbidden`` when the persona is not open to the caller's groups, ``MemoryDisabled``
        when memory is off globally, for the team or (``persona``) for the persona."""
        switches = tx.switches(persona_id)
        if persona_id and not persona_allows(caller, switches.persona):
            raise Forbidden("this persona is not available to the caller's groups")
        if not self.enabled(switches, persona=persona):
            raise MemoryDisabled("memory is switched off for this team or persona")
        return switches

    def embed(self, text: str) -> dict[str, Any]:
        """``embedding`` and ``embedding_model`` of a text: both None without an embedder or
        when it fails (the row is embedded later, the recall is keyword-only), a None vector
        when the model gives nothing for the text."""
        if self.embedder is None or not text.strip():
            return {"embedding": None, "embedding_model": None}
        try:
            vector = self.embedder.embed([text])[0]
            model = self.embedder.model_id
        except Exception:  # an embedder outage degrades recall to keywords, never fails it
            log.warning("embedder failed; continuing keyword-only", exc_info=True)
            return {"embedding": None, "embedding_model": None}
        return {"embedding": vector if any(vector) else None, "embedding_model": model}

    def memory_embedding(self, key: str, value: str) -> dict[str, Any]:
        return self.embed(embedding_text(key, value))

    def embedded(self, before: Memory, change: MemoryChange) -> MemoryChange:
        """``change`` with the embedding of the text it gives ``before`` (a new key or value)."""
        if not change.new_text:
            return change
        text = (change.key or before.key, change.value or before.value)
        return replace(change, **self.memory_embedding(*text))

    def duplicate_of(
        self, tx: MemoryTx, memory: Memory, embedding: list[float] | None = None
    ) -> Duplicate | None:
        """Another memory of ``memory``'s owner and scope, under another key, whose embedding
        is at least the embedder's ``duplicate_similarity`` close to ``embedding`` (None:
        ``memory``'s stored one) and which the caller may read; None without an embedder that
        flags duplicates."""
        threshold = self.embedder.tuning.duplicate_similarity if self.embedder else None
        if self.embedder is None or threshold is None:
            return None
        found = tx.nearest(memory, self.embedder.model_id, embedding)
        if found is None or found[1] < threshold or private_to_its_user(tx.ctx, found[0]):
            return None
        return Duplicate(found[0].id, found[0].key)

    def query_embedding(self, query: str) -> dict[str, Any]:
        """The query's embedding, its model and the embedder's tuning (none: keyword-only)."""
        embedded = self.embed(query)
        if self.embedder is None or embedded["embedding"] is None:
            return {}
        return {**embedded, "tuning": self.embedder.tuning}

    def visible(self, caller: Caller, tx: MemoryTx, memory: Memory | None) -> Memory:
        """The memory as ``caller`` may see it: 404 outside their rows, and for admins a
        user's own ``user`` memory too (``private_to_its_user``), as for its history."""
        ctx = tx.ctx
        if memory is None or not memory_visible(ctx, memory) or private_to_its_user(ctx, memory):
            raise NotFound("memory not found")
        if memory.scope is not Scope.USER and not persona_allows(
            caller, tx.switches(memory.owner_id).persona
        ):
            raise NotFound("memory not found")
        return memory

    def signed_page(
        self, tx: MemoryTx, flt: MemoryFilter, cursor: str | None, listing: tuple[str, ...]
    ) -> MemoryPage:
        """One page of ``flt`` from ``cursor``; the cursors in and out are signed for
        ``listing`` (``engram.memories.cursors``): one issued for another listing raises
        ``InvalidInput("cursor")``."""
        opened = flt.model_copy(update={"cursor": self.cursors.open(cursor, *listing)})
        page = tx.list_memories(opened)
        return page.model_copy(
            update={"next_cursor": self.cursors.sign(page.next_cursor, *listing)}
        )

    def decided(self, ctx: AccessContext, action: str) -> AuditStamp:
        """A person's decision, for the store to audit in the same transaction."""
        at = datetime.fromtimestamp(self.clock.now_ms() / 1000, UTC)
        return AuditStamp(id=str(uuid.uuid4()), actor_id=ctx.user_id, action=action, at=at)

    def check_persona_access(self, caller: Caller, persona_id: str | None) -> None:
        """Raise what a save with this persona would (``access``), in a unit of work of its
        own. ``persona_id`` is a validated id (``QueueTranscript``)."""
        with self.uow(context_for(caller)) as tx:
            self.access(caller, tx, persona_id)
