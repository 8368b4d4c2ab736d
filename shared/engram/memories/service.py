"""``MemoryService``: the use cases of explicit memories, over a store and an optional embedder.

Every public method takes the verified ``Caller`` and stays inside ``caller.team_id``.
Errors are ``engram.errors``: ``InvalidInput`` (naming the camelCase field), ``NotFound``
(also for anything the caller may not see), ``Forbidden``, ``MemoryDisabled``, ``Conflict``,
``Unavailable`` (PostgreSQL down; raised by the adapter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from engram.errors import Forbidden, InvalidInput, MemoryDisabled, NotFound, QuotaExceeded
from engram.identity import Caller
from engram.memories.administration import PersonaAdministration
from engram.memories.background import BackgroundJobs, ProposalOutcome, ProposalResult
from engram.memories.hint import DEFAULT_MAX_CHARS, build_memory_hint
from engram.memories.inputs import (
    MemoryListQuery,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemorySaveRequest,
)
from engram.memories.models import (
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    RecallRequest,
    Scope,
    Status,
    ToolResult,
)
from engram.memories.ports import AccessContext, MemoryChange, list_all
from engram.memories.privacy import context_for, persona_allows
from engram.memories.review import ReviewOutcome, ReviewPipeline
from engram.memories.scopes import parse_scope, save_target
from engram.memories.tools import (
    RECALL,
    SAVE,
    ToolFormat,
    argument_error,
    parse_recall_args,
    parse_save_args,
    recall_result_text,
    refused,
    save_result_text,
)
from engram.memories.tools import tool_definitions as _tool_definitions

__all__ = [
    "HINT_RECALL_LIMIT",
    "MemoryService",
    "ProposalOutcome",
    "ProposalResult",
    "ReviewOutcome",
    "ToolCallOptions",
]

HINT_RECALL_LIMIT = 100


class ToolCallOptions(TypedDict, total=False):
    """The keywords of ``MemoryService.execute_tool`` besides the call itself."""

    persona_id: str | None
    source_channel_id: str | None
    errors_as_results: bool


class MemoryService(ReviewPipeline, PersonaAdministration, BackgroundJobs):
    """Explicit memories' use cases: save, recall and tool calls, one memory, listings and
    the user's own data here; review, persona settings and background jobs in the groups it
    inherits (``engram.memories.review``, ``.administration``, ``.background``)."""

    def save(self, caller: Caller, request: MemorySaveRequest) -> tuple[Memory, bool]:
        """Create or update (same scope, owner, user and key) an active memory."""
        key_s, value_s, persona = request.key, request.value, request.persona_id
        conf = 1.0 if request.confidence is None else request.confidence
        target = save_target(caller, persona, parse_scope(request.scope))
        ctx = context_for(caller)
        persona_cfg = self._persona(ctx, persona)
        if persona and not persona_allows(caller, persona_cfg):
            raise Forbidden("this persona is not available to the caller's groups")
        if not self._enabled(ctx, persona_cfg if target.scope is not Scope.USER else None):
            raise MemoryDisabled("memory is switched off for this team or persona")
        memory, created = self._store.upsert(
            ctx,
            NewMemory(
                scope=target.scope,
                owner_id=target.owner_id,
                user_id=target.user_id,
                team_id=caller.team_id,
                key=key_s,
                value=value_s,
                source_channel_id=request.source_channel_id,
                confidence=conf,
                status=Status.ACTIVE,
                **self._memory_embedding(key_s, value_s),
            ),
            quotas=self._quotas,
        )
        return memory, created

    def recall(self, caller: Caller, request: MemoryRecallQuery) -> list[Memory]:
        """Scope-merged recall; empty when memory is off or the persona is not allowed."""
        return self.recall_each(caller, [request])[0]

    def recall_each(
        self, caller: Caller, requests: Sequence[MemoryRecallQuery]
    ) -> list[list[Memory]]:
        """Several recalls of one persona behind one access check (the persona and the team
        switch are read once): one list per request, in order; all empty when memory is off or
        the persona is not allowed."""
        personas = {r.persona_id for r in requests}
        if len(personas) > 1:
            raise ValueError("recall_each: every request names the same persona")
        persona = next(iter(personas), None)
        ctx = context_for(caller)
        persona_cfg = self._persona(ctx, persona)
        if (persona and not persona_allows(caller, persona_cfg)) or not self._enabled(
            ctx, persona_cfg
        ):
            return [[] for _ in requests]  # off globally, for the team, or in this persona
        return [
            self._store.recall(
                ctx,
                RecallRequest(
                    team_id=caller.team_id,
                    user_id=caller.user_id,
                    persona_id=persona,
                    query=request.query or "",
                    limit=request.max_results,
                    **self._query_embedding(request.query or ""),
                ),
            )
            for request in requests
        ]

    def build_hint(self, caller: Caller, persona_id: str | None = None) -> str:
        """The memory section of the system prompt (``""`` when there is nothing)."""
        memories = self.recall(
            caller, MemoryRecallQuery(max_results=HINT_RECALL_LIMIT, persona_id=persona_id)
        )
        cap = min(self._settings.memory_hint_max_chars, DEFAULT_MAX_CHARS)
        return build_memory_hint(memories, cap)

    def tool_definitions(self, fmt: ToolFormat = "json_schema") -> list[dict[str, Any]]:
        return _tool_definitions(fmt)

    def execute_tool(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any],
        *,
        persona_id: str | None = None,
        source_channel_id: str | None = None,
        errors_as_results: bool = False,
    ) -> ToolResult:
        """Run a model's tool call: ``arguments`` are validated here, as the tool's arguments
        model (``MemorySaveArgs`` / ``MemoryRecallArgs``); bad ones raise ``InvalidInput``
        naming the argument. ``persona_id`` and ``source_channel_id`` are validated ids
        (``ToolCallRequest``). An unknown tool raises ``NotFound``; a disabled memory gives
        ``ok=False`` text. ``source_channel_id`` (the conversation the call came from) is the
        provenance of a ``memory_save``; ``memory_recall`` ignores it.

        With ``errors_as_results``, what the model itself got wrong or can act on — arguments
        its tool's model refuses, a full memory quota — is an ``ok=False`` result the model
        reads instead of an exception; errors of the caller (unknown tool, persona not
        allowed, a store down) still raise."""
        if not errors_as_results:
            return self._execute_tool(caller, name, arguments, persona_id, source_channel_id)
        if name not in (SAVE, RECALL):
            raise NotFound(f"unknown tool {name[:60]!r}; tools are {SAVE} and {RECALL}")
        try:
            return self._execute_tool(caller, name, arguments, persona_id, source_channel_id)
        except InvalidInput as exc:
            return argument_error(name, exc)
        except QuotaExceeded as exc:
            return refused(name, "Nothing was saved", exc)

    def _execute_tool(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any],
        persona_id: str | None,
        source_channel_id: str | None,
    ) -> ToolResult:
        if name == SAVE:
            args = parse_save_args(arguments)
            request = MemorySaveRequest(
                key=args.key,
                value=args.value,
                confidence=args.confidence,
                persona_id=persona_id,
                source_channel_id=source_channel_id,
            )
            try:
                memory, created = self.save(caller, request)
            except MemoryDisabled as exc:
                return refused(name, "Memory is switched off", exc)
            return ToolResult(
                name=name,
                ok=True,
                text=save_result_text(memory, created),
                memories=[memory],
                created=created,
            )
        if name == RECALL:
            rargs = parse_recall_args(arguments)
            found = self.recall(
                caller,
                MemoryRecallQuery(
                    query=rargs.query, max_results=rargs.max_results, persona_id=persona_id
                ),
            )
            return ToolResult(name=name, ok=True, text=recall_result_text(found), memories=found)
        raise NotFound(f"unknown tool {name[:60]!r}; tools are {SAVE} and {RECALL}")

    # --- one memory ------------------------------------------------------------------------
    def get(self, caller: Caller, memory_id: str) -> Memory:
        ctx = context_for(caller)
        return self._visible(caller, ctx, self._store.get(ctx, memory_id))

    def update(
        self,
        caller: Caller,
        memory_id: str,
        patch: MemoryPatchRequest,
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
        ctx = context_for(caller)
        before = self.get(caller, memory_id)
        if before.scope is Scope.PERSONA and not ctx.elevated:
            raise Forbidden("only team admins edit persona-scope memories")
        after = self._store.update(
            ctx,
            before.id,
            self._embedded(before, change),
            decided=self._decided(ctx, "update"),
            if_versions=if_versions,
        )
        if after is None:
            raise NotFound("memory not found")
        return after

    def delete(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> None:
        """Delete one memory; ``if_versions`` as ``update``."""
        ctx = context_for(caller)
        before = self.get(caller, memory_id)
        if before.scope is Scope.PERSONA and not ctx.elevated:
            raise Forbidden("only team admins delete persona-scope memories")
        decided = self._decided(ctx, "delete")
        if not self._store.delete(ctx, before.id, decided=decided, if_versions=if_versions):
            raise NotFound("memory not found")

    def archive(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> Memory:
        """Archive one memory (not recalled until edited back); ``if_versions`` as ``update``."""
        return self._change(caller, memory_id, MemoryChange(status=Status.ARCHIVED), if_versions)

    def list_memories(self, caller: Caller, query: MemoryListQuery | None = None) -> MemoryPage:
        """One page of the memories visible to the caller, newest first, every status unless
        ``query.status`` says: a user sees their own ``user`` and ``persona_user`` memories
        and the ``persona`` memories of the personas open to their groups (proposals among
        them only when learnt from their own conversations); a team admin sees
        the team's ``persona`` and ``persona_user`` memories, every proposal, and their own
        ``user`` memories, but not another user's approved ``user`` memories (theirs alone).
        The order is by creation, which never changes, so a memory that exists throughout a
        listing appears on exactly one page. ``next_cursor`` is signed for this caller and
        these filters (``engram.memories.cursors``)."""
        query = query or MemoryListQuery()
        ctx = context_for(caller)
        closed: tuple[str, ...] = ()
        if not ctx.elevated:
            closed = tuple(
                p.persona_id
                for p in self._personas.list_personas(ctx)
                if not persona_allows(caller, p)
            )
        listing = (
            "memories",
            caller.team_id,
            caller.user_id,
            query.scope or "",
            query.status or "",
            query.persona_id or "",
            query.source_channel_id or "",
        )
        flt = MemoryFilter(
            team_id=caller.team_id,
            scope=parse_scope(query.scope),
            status=Status(query.status) if query.status else None,
            persona_id=query.persona_id,
            source_channel_id=query.source_channel_id,
            managed_by=caller.user_id if ctx.elevated else None,
            member=None if ctx.elevated else caller.user_id,
            exclude_personas=closed,
            limit=query.limit,
        )
        return self._signed_page(ctx, flt, query.cursor, listing)

    # --- the user's own data ----------------------------------------------------------------
    def export(self, caller: Caller) -> dict[str, Any]:
        """Every memory erasure would delete, all statuses: the caller's user and persona_user
        memories and the persona memories learnt from their transcripts."""
        ctx = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=False)
        team, user = caller.team_id, caller.user_id
        mine: list[Memory] = []
        for flt in (
            MemoryFilter(team_id=team, scope=Scope.USER, owner_id=user),
            MemoryFilter(team_id=team, scope=Scope.PERSONA_USER, user_id=user),
            MemoryFilter(team_id=team, scope=Scope.PERSONA, source_user_id=user),
        ):
            mine += list_all(self._store, ctx, flt)
        return {"memories": [m.to_json_dict() for m in mine]}

    def erase(self, caller: Caller) -> dict[str, int]:
        ctx = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=False)
        return self._store.erase_user(ctx, caller.user_id)
