"""``MemoryService``: a caller's explicit memories (save, recall, read, edit, list, export,
erase), and the services of explicit memories beside it, one responsibility each, sharing one
``MemoryCore`` (stores, switches, embeddings, visibility):

- ``review``: team admins decide proposals (``engram.memories.review``);
- ``personas``: persona and team settings (``engram.memories.administration``);
- ``jobs``: the service's own jobs, proposals and retention (``engram.memories.background``);
- ``tools``: a model's tool calls (``engram.memories.tools``).

Every public method takes the verified ``Caller`` and stays inside ``caller.team_id``, and
takes the command the edge mapped its input to (``engram.memories.commands``).
Errors are ``engram.errors``: ``InvalidInput`` (naming the camelCase field), ``NotFound``
(also for anything the caller may not see), ``Forbidden``, ``MemoryDisabled``, ``Conflict``,
``Unavailable`` (PostgreSQL down; raised by the adapter).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.clock import Clock
from engram.errors import Forbidden, InvalidInput, MemoryDisabled, NotFound
from engram.identity import Caller
from engram.memories import rules, writes
from engram.memories.administration import PersonaAdministration
from engram.memories.background import BackgroundJobs, ProposalOutcome, ProposalResult
from engram.memories.changes import Duplicate
from engram.memories.commands import EditMemory, ListMemories, Recall, SaveMemory
from engram.memories.core import MemoryCore
from engram.memories.cursors import CursorSigner
from engram.memories.hint import DEFAULT_MAX_CHARS, build_memory_hint
from engram.memories.history import MemoryHistories
from engram.memories.models import (
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    RecallRequest,
    Scope,
    Status,
)
from engram.memories.ports import (
    AccessContext,
    Embedder,
    MemoryChange,
    MemoryTx,
    UnitOfWork,
    list_all,
)
from engram.memories.privacy import context_for, persona_allows
from engram.memories.review import ReviewOutcome, ReviewPipeline
from engram.memories.scopes import save_target
from engram.memories.tools import MemoryTools
from engram.settings import Settings

__all__ = [
    "HINT_RECALL_LIMIT",
    "MemoryService",
    "ProposalOutcome",
    "ProposalResult",
    "ReviewOutcome",
]

HINT_RECALL_LIMIT = 100


class MemoryService:
    """A caller's explicit memories; ``review``, ``personas``, ``jobs`` and ``tools`` are the
    other services of explicit memories, over the same ``core``."""

    def __init__(
        self,
        store: UnitOfWork,
        *,
        settings: Settings,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        cursors: CursorSigner | None = None,
    ) -> None:
        """``store``: the unit of work every use case runs in. ``cursors`` signs listing
        cursors with the deployment's key (the composition root passes it); without one, a
        key only this process knows."""
        self.core = core = MemoryCore(
            store, settings=settings, embedder=embedder, clock=clock, cursors=cursors
        )
        self.review = ReviewPipeline(core)
        self.personas = PersonaAdministration(core)
        self.jobs = BackgroundJobs(core)
        self.histories = MemoryHistories(core)
        self.tools = MemoryTools(self)

    def save(self, caller: Caller, command: SaveMemory) -> tuple[Memory, bool]:
        """Create or update (same scope, owner, user and key) an active memory: the access
        check, the quota, the write and its event in one unit of work."""
        saved, created, _ = self.save_flagged(caller, command)
        return saved, created

    def save_flagged(
        self, caller: Caller, command: SaveMemory
    ) -> tuple[Memory, bool, Duplicate | None]:
        """``save``, and the caller's memory under another key whose value is close to the
        saved one (``MemoryCore.duplicate_of``), read in the same unit of work."""
        core, persona = self.core, command.persona_id
        target = save_target(caller, persona, command.scope)
        with core.uow(context_for(caller)) as tx:
            core.access(caller, tx, persona, persona=target.scope is not Scope.USER)
            # embedded once the caller may save, before the write takes any lock
            memory = NewMemory(
                scope=target.scope,
                owner_id=target.owner_id,
                user_id=target.user_id,
                team_id=caller.team_id,
                key=command.key,
                value=command.value,
                source_channel_id=command.source_channel_id,
                confidence=command.confidence,
                status=Status.ACTIVE,
                **core.memory_embedding(command.key, command.value),
            )
            saved, created = writes.save(tx, memory, core.quotas)
            if memory.embedding is None:  # no embedder, or it failed: nothing to compare
                return saved, created, None
            return saved, created, core.duplicate_of(tx, saved, memory.embedding)

    def recall(self, caller: Caller, command: Recall) -> list[Memory]:
        """Scope-merged recall; empty when memory is off or the persona is not allowed."""
        return self.recall_each(caller, [command])[0]

    def recall_each(self, caller: Caller, commands: Sequence[Recall]) -> list[list[Memory]]:
        """Several recalls of one persona behind one access check, in one unit of work: one
        list per command, in order; all empty when memory is off or the persona is not
        allowed."""
        core = self.core
        personas = {r.persona_id for r in commands}
        if len(personas) > 1:
            raise ValueError("recall_each: every command names the same persona")
        persona = next(iter(personas), None)
        moments = {
            c.as_of_ms: self.histories.moment(c.as_of_ms)
            for c in commands
            if c.as_of_ms is not None
        }
        with core.uow(context_for(caller)) as tx:
            try:
                core.access(caller, tx, persona)
            except (Forbidden, MemoryDisabled):
                return [[] for _ in commands]  # off globally, for the team, or in this persona
            found: list[list[Memory]] = []
            for command in commands:
                request = RecallRequest(
                    team_id=caller.team_id,
                    user_id=caller.user_id,
                    persona_id=persona,
                    query=command.query,
                    limit=command.max_results,
                )
                if command.as_of_ms is not None:
                    at = moments[command.as_of_ms]
                    found.append(self.histories.recall_as_of(tx, request, at))
                else:
                    embedded = core.query_embedding(command.query)
                    found.append(tx.recall(request.model_copy(update=embedded)))
            return found

    def build_hint(self, caller: Caller, persona_id: str | None = None) -> str:
        """The memory section of the system prompt (``""`` when there is nothing)."""
        memories = self.recall(caller, Recall(max_results=HINT_RECALL_LIMIT, persona_id=persona_id))
        cap = min(self.core.settings.memory_hint_max_chars, DEFAULT_MAX_CHARS)
        return build_memory_hint(memories, cap)

    # --- one memory ------------------------------------------------------------------------
    def get(self, caller: Caller, memory_id: str, *, as_of_ms: int | None = None) -> Memory:
        """One memory; ``as_of_ms``: as it was then (``MemoryHistories.get_as_of``)."""
        if as_of_ms is not None:
            return self.histories.get_as_of(caller, memory_id, as_of_ms)
        with self.core.uow(context_for(caller)) as tx:
            return self.core.visible(caller, tx, tx.get(memory_id))

    def _locked(self, caller: Caller, tx: MemoryTx, memory_id: str, doing: str) -> Memory:
        """The memory the caller may change, locked in ``tx``."""
        return self._writable(caller, tx, tx.lock(memory_id), doing)

    def _writable(self, caller: Caller, tx: MemoryTx, row: Memory | None, doing: str) -> Memory:
        """``row`` (locked) when the caller may change it: ``NotFound`` outside what they see,
        ``Forbidden`` for a persona-scope memory unless they are a team admin."""
        before = self.core.visible(caller, tx, row)
        if before.scope is Scope.PERSONA and not tx.ctx.elevated:
            raise Forbidden(f"only team admins {doing} persona-scope memories")
        return before

    def update(
        self,
        caller: Caller,
        memory_id: str,
        patch: EditMemory,
        *,
        if_versions: frozenset[int] | None = None,
    ) -> Memory:
        """Edit a memory's key, value or confidence (``PATCH /v1/memories/{id}``).
        ``if_versions`` (the ``If-Match`` of the request): ``PreconditionFailed``, and nothing
        changed, unless the memory is still at one of these versions when the edit is made."""
        change = MemoryChange(key=patch.key, value=patch.value, confidence=patch.confidence)
        return self._change(caller, memory_id, change, if_versions)

    def _change(
        self,
        caller: Caller,
        memory_id: str,
        change: MemoryChange,
        if_versions: frozenset[int] | None,
    ) -> Memory:
        core, ctx = self.core, context_for(caller)
        with core.uow(ctx) as tx:
            before = self._locked(caller, tx, memory_id, "edit")
            after = writes.edit(
                tx,
                before,
                core.embedded(before, change),
                decided=core.decided(ctx, "update"),
                if_versions=if_versions,
            )
        if after is None:
            raise NotFound("memory not found")
        return after

    def merge(
        self,
        caller: Caller,
        memory_id: str,
        into_id: str,
        *,
        if_versions: frozenset[int] | None = None,
    ) -> Memory:
        """Fold ``memory_id`` into ``into_id`` (``writes.merge``), both memories the caller
        may change; ``if_versions`` as ``update``, of ``memory_id``. Both are locked in id
        order, so two merges of one pair wait for each other instead of deadlocking."""
        core, ctx = self.core, context_for(caller)
        with core.uow(ctx) as tx:
            locked = {i: tx.lock(i) for i in sorted({memory_id, into_id})}
            row = self._writable(caller, tx, locked[memory_id], "merge")
            try:
                into = core.visible(caller, tx, locked[into_id])
            except NotFound:
                raise InvalidInput("into", "no memory with this id that you may change") from None
            rules.check_merge(row, into)  # of one owner and scope: writable as ``row`` is
            decided = core.decided(ctx, "merge")
            return writes.merge(tx, row, into, decided=decided, if_versions=if_versions)

    def delete(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> None:
        """Delete one memory; ``if_versions`` as ``update``."""
        core, ctx = self.core, context_for(caller)
        with core.uow(ctx) as tx:
            before = self._locked(caller, tx, memory_id, "delete")
            decided = core.decided(ctx, "delete")
            if not writes.delete(tx, before, decided=decided, if_versions=if_versions):
                raise NotFound("memory not found")

    def archive(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> Memory:
        """Archive one memory (not recalled until edited back); ``if_versions`` as ``update``."""
        return self._change(caller, memory_id, MemoryChange(status=Status.ARCHIVED), if_versions)

    def list_memories(self, caller: Caller, query: ListMemories | None = None) -> MemoryPage:
        """One page of the memories visible to the caller, newest first, every status unless
        ``query.status`` says: a user sees their own ``user`` and ``persona_user`` memories
        and the ``persona`` memories of the personas open to their groups (proposals among
        them only when learnt from their own conversations); a team admin sees
        the team's ``persona`` and ``persona_user`` memories, every proposal, and their own
        ``user`` memories, but not another user's approved ``user`` memories (theirs alone).
        The order is by creation, which never changes, so a memory that exists throughout a
        listing appears on exactly one page. ``next_cursor`` is signed for this caller and
        these filters (``engram.memories.cursors``)."""
        query = query or ListMemories()
        ctx = context_for(caller)
        listing = (
            "memories",
            caller.team_id,
            caller.user_id,
            query.scope or "",
            query.status or "",
            query.persona_id or "",
            query.source_channel_id or "",
        )
        with self.core.uow(ctx) as tx:
            closed: tuple[str, ...] = ()
            if not ctx.elevated:
                closed = tuple(p.persona_id for p in tx.personas() if not persona_allows(caller, p))
            flt = MemoryFilter(
                team_id=caller.team_id,
                scope=query.scope,
                status=query.status,
                persona_id=query.persona_id,
                source_channel_id=query.source_channel_id,
                managed_by=caller.user_id if ctx.elevated else None,
                member=None if ctx.elevated else caller.user_id,
                exclude_personas=closed,
                limit=query.limit,
            )
            return self.core.signed_page(tx, flt, query.cursor, listing)

    # --- the user's own data ----------------------------------------------------------------
    def export(self, caller: Caller) -> dict[str, Any]:
        """Every memory erasure would delete, all statuses: the caller's user and persona_user
        memories and the persona memories learnt from their transcripts."""
        ctx = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=False)
        team, user = caller.team_id, caller.user_id
        mine: list[Memory] = []
        with self.core.uow(ctx) as tx:
            for flt in (
                MemoryFilter(team_id=team, scope=Scope.USER, owner_id=user),
                MemoryFilter(team_id=team, scope=Scope.PERSONA_USER, user_id=user),
                MemoryFilter(team_id=team, scope=Scope.PERSONA, source_user_id=user),
            ):
                mine += list_all(tx, flt)
        return {"memories": [m.to_json_dict() for m in mine]}

    def erase(self, caller: Caller, *, at_ms: int | None = None) -> dict[str, int]:
        """Record the caller's erasure (at ``at_ms``, default now) and erase their memories,
        in one unit of work: the counts of ``MemoryTx.erase_user``."""
        ctx = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=False)
        at = self.core.clock.now_ms() if at_ms is None else at_ms
        with self.core.uow(ctx) as tx:
            tx.record_erasure(caller.user_id, at)
            return tx.erase_user(caller.user_id)
