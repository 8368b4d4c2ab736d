"""``MemoryService``: the use cases of explicit memories, over a store and an optional embedder.

Every public method takes the verified ``Caller`` and stays inside ``caller.team_id``.
Errors are ``engram.errors``: ``InvalidInput`` (naming the camelCase field), ``NotFound``
(also for anything the caller may not see), ``Forbidden``, ``MemoryDisabled``, ``Conflict``,
``Unavailable`` (PostgreSQL down; raised by the adapter).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from engram.clock import Clock, SystemClock
from engram.errors import (
    EngramError,
    Forbidden,
    InvalidInput,
    MemoryDisabled,
    NotFound,
    QuotaExceeded,
)
from engram.fields import Confidence, Identifier, MemoryKey, MemoryValue
from engram.identity import Caller
from engram.memories.cursors import CursorSigner
from engram.memories.hint import DEFAULT_MAX_CHARS, build_memory_hint
from engram.memories.inputs import (
    ApproveRequest,
    BulkReviewRequest,
    MemoryListQuery,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemorySaveRequest,
    PersonaRequest,
    RetentionRule,
    ReviewListQuery,
    TeamSettingsRequest,
)
from engram.memories.lifecycle import (
    AuditStamp,
    Quotas,
    history_visible,
    last_known,
    private_to_its_user,
)
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
    ToolResult,
)
from engram.memories.ports import (
    AccessContext,
    Embedder,
    MemoryStore,
    PersonaStore,
    embedding_text,
)
from engram.memories.privacy import context_for, memory_visible, persona_allows, system_context
from engram.memories.scopes import parse_scope, save_target
from engram.memories.tools import (
    RECALL,
    SAVE,
    ToolFormat,
    argument_error,
    invalid_from,
    parse_recall_args,
    parse_save_args,
    recall_result_text,
    save_result_text,
)
from engram.memories.tools import tool_definitions as _tool_definitions
from engram.settings import Settings

log = logging.getLogger(__name__)
HINT_RECALL_LIMIT = 100


T = TypeVar("T")
_ID: TypeAdapter[str] = TypeAdapter(Identifier)
_KEY: TypeAdapter[str] = TypeAdapter(MemoryKey)
_VALUE: TypeAdapter[str] = TypeAdapter(MemoryValue)
_CONFIDENCE: TypeAdapter[float] = TypeAdapter(Confidence)


def _checked(adapter: TypeAdapter[T], value: object, field: str) -> T:
    """``value`` under the same field rule the request models use (for the service's own
    jobs, whose values come from queued data rather than a request model)."""
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        raise invalid_from(exc, prefix=field) from None


ProposalOutcome = Literal["created", "refreshed", "dropped"]


@dataclass(frozen=True)
class ReviewOutcome:
    """One id of a bulk review: the decided memory, or the error that id alone met (the
    same error a single approval or rejection of it would raise)."""

    memory_id: str
    memory: Memory | None = None
    error: EngramError | None = None


@dataclass(frozen=True)
class ProposalResult:
    """What ``MemoryService.propose_outcome`` did, and the stored row (``None`` if dropped)."""

    outcome: ProposalOutcome
    memory: Memory | None


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        personas: PersonaStore,
        *,
        settings: Settings,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        cursors: CursorSigner | None = None,
    ) -> None:
        """``cursors`` signs review cursors with the deployment's key (the composition root
        passes it); without one, a key only this process knows."""
        self._store = store
        self._personas = personas
        self._embedder = embedder
        self._settings = settings
        self._clock = clock or SystemClock()
        self._cursors = cursors or CursorSigner()
        self._quotas = Quotas(
            per_user=self._settings.max_memories_per_user,
            per_persona=self._settings.max_memories_per_persona,
            per_team=self._settings.max_memories_per_team,
        )

    # --- switches and access ----------------------------------------------------------------
    def _persona(self, ctx: AccessContext, persona_id: str | None) -> Persona | None:
        return self._personas.get_persona(ctx, persona_id) if persona_id else None

    def _enabled(self, ctx: AccessContext, persona: Persona | None) -> bool:
        if not self._settings.memory_enabled:
            return False
        team = self._personas.get_team_settings(ctx)
        if team is not None and not team.memory_enabled:
            return False
        return persona is None or persona.memory_enabled

    def _embed(self, text: str) -> dict[str, Any]:
        """``embedding`` and ``embedding_model`` of a text: both None without an embedder or
        when it fails (the row is embedded later, the recall is keyword-only), a None vector
        when the model gives nothing for the text."""
        if self._embedder is None or not text.strip():
            return {"embedding": None, "embedding_model": None}
        try:
            vector = self._embedder.embed([text])[0]
            model = self._embedder.model_id
        except Exception:  # an embedder outage degrades recall to keywords, never fails it
            log.warning("embedder failed; continuing keyword-only", exc_info=True)
            return {"embedding": None, "embedding_model": None}
        return {"embedding": vector if any(vector) else None, "embedding_model": model}

    def _memory_embedding(self, key: str, value: str) -> dict[str, Any]:
        return self._embed(embedding_text(key, value))

    def _query_embedding(self, query: str) -> dict[str, Any]:
        """The query's embedding, its model and the embedder's tuning (none: keyword-only)."""
        embedded = self._embed(query)
        if self._embedder is None or embedded["embedding"] is None:
            return {}
        return {**embedded, "tuning": self._embedder.tuning}

    def _visible(self, caller: Caller, ctx: AccessContext, memory: Memory | None) -> Memory:
        """The memory as ``caller`` may see it: 404 outside their rows, and for admins a
        user's own ``user`` memory too (``private_to_its_user``), as for its history."""
        if memory is None or not memory_visible(ctx, memory) or private_to_its_user(ctx, memory):
            raise NotFound("memory not found")
        if memory.scope is not Scope.USER and not persona_allows(
            caller, self._persona(ctx, memory.owner_id)
        ):
            raise NotFound("memory not found")
        return memory

    def _decided(self, ctx: AccessContext, action: str) -> AuditStamp:
        """A person's decision, for the store to audit in the same transaction."""
        at = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        return AuditStamp(id=str(uuid.uuid4()), actor_id=ctx.user_id, action=action, at=at)

    # --- memory_save / memory_recall ---------------------------------------------------------
    def check_persona_access(self, caller: Caller, persona_id: str | None) -> None:
        """Raise what a save with this persona would: ``Forbidden`` when the persona is not
        open to the caller's groups, ``MemoryDisabled`` when memory is off globally, for the
        team or for the persona. ``persona_id`` is a validated id (``TranscriptRequest``)."""
        ctx = context_for(caller)
        persona_cfg = self._persona(ctx, persona_id)
        if persona_id and not persona_allows(caller, persona_cfg):
            raise Forbidden("this persona is not available to the caller's groups")
        if not self._enabled(ctx, persona_cfg):
            raise MemoryDisabled("memory is switched off for this team or persona")

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
            return ToolResult(
                name=name,
                ok=False,
                text=f"Nothing was saved: {exc.message}",
                error={"code": exc.code, "message": exc.message},
            )

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
                return ToolResult(
                    name=name,
                    ok=False,
                    text=f"Memory is switched off: {exc.message}",
                    error={"code": exc.code, "message": exc.message},
                )
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
        return self._change(
            caller,
            memory_id,
            key=patch.key,
            value=patch.value,
            confidence=patch.confidence,
            if_versions=if_versions,
        )

    def _change(
        self,
        caller: Caller,
        memory_id: str,
        *,
        key: str | None = None,
        value: str | None = None,
        confidence: float | None = None,
        status: Status | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> Memory:
        ctx = context_for(caller)
        before = self.get(caller, memory_id)
        key_s, value_s = key, value
        if before.scope is Scope.PERSONA and not ctx.elevated:
            raise Forbidden("only team admins edit persona-scope memories")
        embedding: dict[str, Any] = {}
        if key_s is not None or value_s is not None:
            embedding = self._memory_embedding(key_s or before.key, value_s or before.value)
        after = self._store.update(
            ctx,
            before.id,
            key=key_s,
            value=value_s,
            confidence=confidence,
            status=status,
            **embedding,
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
        return self._change(caller, memory_id, status=Status.ARCHIVED, if_versions=if_versions)

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
        page = self._store.list_memories(
            ctx,
            MemoryFilter(
                team_id=caller.team_id,
                scope=parse_scope(query.scope),
                status=Status(query.status) if query.status else None,
                persona_id=query.persona_id,
                source_channel_id=query.source_channel_id,
                managed_by=caller.user_id if ctx.elevated else None,
                member=None if ctx.elevated else caller.user_id,
                exclude_personas=closed,
                limit=query.limit,
                cursor=self._cursors.open(query.cursor, *listing),
            ),
        )
        return page.model_copy(
            update={"next_cursor": self._cursors.sign(page.next_cursor, *listing)}
        )

    # --- personas and switches --------------------------------------------------------------
    def put_persona(self, caller: Caller, persona_id: str, cfg: PersonaRequest) -> Persona:
        """Team admins. ``cfg.retention`` left out: the persona's retention stays as it is;
        ``None``: no rules."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins configure personas")
        pid = persona_id
        ctx = context_for(caller)
        if "retention" in cfg.model_fields_set:
            retention = cfg.retention or RetentionRule()
        else:  # left out: keep the persona's retention rules
            current = self._personas.get_persona(ctx, pid)
            retention = current.retention if current else RetentionRule()
        persona = Persona(
            persona_id=pid,
            team_id=caller.team_id,
            allowed_groups=list(cfg.allowed_groups),
            memory_enabled=cfg.memory_enabled,
            extraction=cfg.extraction,
            retention=retention,
        )
        return self._personas.put_persona(ctx, persona)

    def list_personas(self, caller: Caller) -> list[Persona]:
        """Admins: every persona configured in their team, by persona id."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read persona settings")
        return self._personas.list_personas(context_for(caller))

    def get_persona(self, caller: Caller, persona_id: str) -> Persona:
        """Admins read the personas configured in their team. ``NotFound`` for one with no row
        in the caller's team (never configured here, or only in another team), so another
        team's persona id is not revealed. Sessions and recall with such a persona id still
        work, with the defaults (``persona_settings``)."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read persona settings")
        found = self._personas.get_persona(context_for(caller), persona_id)
        if found is None:
            raise NotFound("persona not found")
        return found

    def persona_settings(self, team_id: str, persona_id: str) -> Persona:
        """For the service's own jobs (extraction): the persona or its defaults."""
        found = self._personas.get_persona(system_context(team_id), persona_id)
        return found or Persona(persona_id=persona_id, team_id=team_id)

    def put_team_settings(self, caller: Caller, request: TeamSettingsRequest) -> TeamSettings:
        """Team admins. ``request.retention`` left out: the team's retention stays as it is;
        ``None``: no rules."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins change team settings")
        ctx = context_for(caller)
        if "retention" in request.model_fields_set:
            rule = request.retention or RetentionRule()
        else:
            current = self._personas.get_team_settings(ctx)
            rule = current.retention if current else RetentionRule()
        return self._personas.put_team_settings(
            ctx,
            TeamSettings(
                team_id=caller.team_id, memory_enabled=request.memory_enabled, retention=rule
            ),
        )

    def get_team_settings(self, caller: Caller) -> TeamSettings:
        """Team admins: the team's settings, or the defaults when never configured."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read team settings")
        found = self._personas.get_team_settings(context_for(caller))
        return found or TeamSettings(team_id=caller.team_id)

    # --- the user's own data ----------------------------------------------------------------
    def _all(self, ctx: AccessContext, flt: MemoryFilter) -> list[Memory]:
        out: list[Memory] = []
        cursor: str | None = None
        while True:
            page = self._store.list_memories(
                ctx, flt.model_copy(update={"cursor": cursor, "limit": 1000})
            )
            out.extend(page.memories)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

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
            mine += self._all(ctx, flt)
        return {"memories": [m.to_json_dict() for m in mine]}

    def erase(self, caller: Caller) -> dict[str, int]:
        ctx = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=False)
        return self._store.erase_user(ctx, caller.user_id)

    # --- review pipeline --------------------------------------------------------------------
    def _admin(self, caller: Caller) -> AccessContext:
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins review memories")
        return context_for(caller)

    def list_pending(self, caller: Caller, query: ReviewListQuery | None = None) -> MemoryPage:
        """One page of the team's pending memories, oldest first. ``next_cursor`` is signed
        (``engram.memories.cursors``) for this team and persona filter; a ``cursor`` this
        service did not issue for the same listing raises ``InvalidInput("cursor")``."""
        query = query or ReviewListQuery()
        ctx = self._admin(caller)
        listing = ("review", caller.team_id, query.persona_id or "")
        page = self._store.list_memories(
            ctx,
            MemoryFilter(
                team_id=caller.team_id,
                status=Status.PENDING_REVIEW,
                persona_id=query.persona_id,
                limit=query.limit,
                cursor=self._cursors.open(query.cursor, *listing),
            ),
        )
        return page.model_copy(
            update={"next_cursor": self._cursors.sign(page.next_cursor, *listing)}
        )

    def approve(self, caller: Caller, memory_id: str, edit: ApproveRequest | None = None) -> Memory:
        """Approve a pending proposal, first applying ``edit`` (a new key and/or value).
        ``NotFound`` when there is no such proposal the admin may see; ``Conflict`` when it was
        already decided (the loser of two concurrent decisions). The change and its audit row
        are one transaction."""
        ctx = self._admin(caller)
        key_s, value_s = (edit.key, edit.value) if edit is not None else (None, None)
        proposed = self._store.get(ctx, memory_id)
        if proposed is None:
            raise NotFound("no pending memory with this id")
        edited = key_s is not None or value_s is not None
        return self._review(
            ctx,
            memory_id,
            Status.ACTIVE,
            "approve",
            key=key_s,
            value=value_s,
            **(
                self._memory_embedding(key_s or proposed.key, value_s or proposed.value)
                if edited
                else {}
            ),
        )

    def reject(self, caller: Caller, memory_id: str) -> Memory:
        """Reject a pending proposal: it becomes ``rejected`` and its key and value are
        suppressed, so an equal proposal is never made again, until erasure. A new value of
        its key may be proposed (it replaces the rejected row). Errors as ``approve``."""
        return self._review(self._admin(caller), memory_id, Status.REJECTED, "reject")

    def review_many(self, caller: Caller, request: BulkReviewRequest) -> list[ReviewOutcome]:
        """Approve or reject each id of ``request``, in order, each in its own atomic step with
        its own audit row, exactly as ``approve`` / ``reject`` one by one: an id already
        decided reports ``Conflict``, an unknown one ``NotFound``, and neither stops the
        others. ``Forbidden`` for a caller who is not an admin of the team (nothing decided)."""
        self._admin(caller)
        decide = self.approve if request.action == "approve" else self.reject
        outcomes: list[ReviewOutcome] = []
        for memory_id in request.ids:
            try:
                outcomes.append(ReviewOutcome(memory_id, memory=decide(caller, memory_id)))
            except EngramError as exc:
                outcomes.append(ReviewOutcome(memory_id, error=exc))
        return outcomes

    def _review(
        self, ctx: AccessContext, memory_id: str, status: Status, action: str, **edits: Any
    ) -> Memory:
        reviewed = self._store.review(
            ctx, memory_id, status=status, decided=self._decided(ctx, action), **edits
        )
        if reviewed is None:
            raise NotFound("no pending memory with this id")
        return reviewed

    def history(self, caller: Caller, memory_id: str) -> list[ReviewAction]:
        """The audit trail of one memory, oldest first, also after it was deleted. The owner
        sees the history of their memories; team admins that of what they manage (proposals,
        persona and persona_user memories), not a user's own ``user`` memory. ``NotFound``
        for anything else."""
        audit = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=True)
        actions = self._store.list_actions(audit, memory_id)
        subject = self._store.get(audit, memory_id) or last_known(actions, caller.team_id)
        if subject is None or not history_visible(context_for(caller), subject):
            raise NotFound("memory not found")
        return actions

    # --- background jobs --------------------------------------------------------------------
    def propose(  # noqa: PLR0917 - the extraction job's positional contract
        self,
        team_id: str,
        user_id: str,
        persona_id: str | None,
        key: str,
        value: str,
        confidence: float,
        source_channel_id: str | None,
        scope: Scope | str | None = None,
        *,
        not_erased_since_ms: int | None = None,
    ) -> Memory | None:
        """An extraction proposal (``pending_review``) learnt from ``user_id``'s transcript.
        Dropped (``None``) when an equal memory (same scope, owner, user, key and value) was
        rejected, or deleted or archived by a person; when the key is already active; when a
        quota is full; when memory is switched off. A pending key is refreshed; a key that
        retention archived becomes a proposal again. ``propose_outcome`` says which."""
        return self.propose_outcome(
            team_id,
            user_id,
            persona_id,
            key,
            value,
            confidence,
            source_channel_id,
            scope,
            not_erased_since_ms=not_erased_since_ms,
        ).memory

    def propose_outcome(  # noqa: PLR0917 - the same positional contract as ``propose``
        self,
        team_id: str,
        user_id: str,
        persona_id: str | None,
        key: str,
        value: str,
        confidence: float,
        source_channel_id: str | None,
        scope: Scope | str | None = None,
        *,
        not_erased_since_ms: int | None = None,
    ) -> ProposalResult:
        """``propose`` answering ``"created"`` (a new pending row), ``"refreshed"`` (the key's
        pending or archived row became this proposal) or ``"dropped"`` (``memory`` is then
        ``None``). The store decides all of it in the write itself, so created vs refreshed
        and every rule hold under concurrency.

        ``not_erased_since_ms`` (the extraction job's ``queued_at``): also ``"dropped"`` when
        the user was erased (``DELETE /v1/me``) at or after it — checked in the same write, so
        an erasure that lands between the job's own check and this write cannot leave a new
        pending row behind."""
        team = _checked(_ID, team_id, "teamId")
        user = _checked(_ID, user_id, "userId")
        persona = None if persona_id is None else _checked(_ID, persona_id, "personaId")
        key_s = _checked(_KEY, key, "key")
        value_s = _checked(_VALUE, value, "value")
        conf = _checked(_CONFIDENCE, confidence, "confidence")
        channel = source_channel_id
        if channel is not None:
            channel = _checked(_ID, channel, "sourceChannelId")
        system = Caller(user_id=user, team_id=team, is_team_admin=True, is_service=True)
        target = save_target(system, persona, parse_scope(scope))
        ctx = system_context(team, user)
        persona_cfg = self._persona(ctx, persona)
        if not self._enabled(ctx, persona_cfg):
            return ProposalResult("dropped", None)
        written = self._store.propose(
            ctx,
            NewMemory(
                scope=target.scope,
                owner_id=target.owner_id,
                user_id=target.user_id,
                team_id=team,
                key=key_s,
                value=value_s,
                source_channel_id=channel,
                source_user_id=user,
                confidence=conf,
                status=Status.PENDING_REVIEW,
                **self._memory_embedding(key_s, value_s),
            ),
            quotas=self._quotas,
            not_erased_since_ms=not_erased_since_ms,
        )
        if written is None:
            return ProposalResult("dropped", None)
        memory, created = written
        return ProposalResult("created" if created else "refreshed", memory)

    def apply_retention(
        self,
        team_id: str,
        *,
        archive_after_days: int | None,
        delete_archived_after_days: int | None,
        now: int | datetime | None = None,
    ) -> dict[str, int]:
        """Archive active memories untouched for ``archive_after_days``; hard-delete archived
        ones untouched for ``delete_archived_after_days`` (``None``: never). ``now`` is epoch
        ms or a datetime (default: the clock)."""
        if now is None:
            now = self._clock.now_ms()
        when = now if isinstance(now, datetime) else datetime.fromtimestamp(now / 1000, UTC)
        never = datetime(1970, 1, 1, tzinfo=UTC)
        for field, days in (
            ("archiveAfterDays", archive_after_days),
            ("deleteArchivedAfterDays", delete_archived_after_days),
        ):
            if days is not None and (
                isinstance(days, bool) or not isinstance(days, int) or days < 1
            ):
                raise InvalidInput(field, "must be a positive number of days")
        return self._store.apply_retention(
            system_context(team_id),
            archive_before=when - timedelta(days=archive_after_days)
            if archive_after_days
            else never,
            delete_archived_before=(
                when - timedelta(days=delete_archived_after_days)
                if delete_archived_after_days
                else never
            ),
        )
