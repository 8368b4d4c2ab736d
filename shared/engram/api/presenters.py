"""Domain results as HTTP response models: the one place where the use cases' answers (facts,
memories, personas, session contexts, exports, receipts) take the shapes of
``engram.api.models``. The use cases never build these themselves.

A response model reads the same-named fields of a domain model (``Model.of(model)``) or the
same-named attributes of another object (``Model.model_validate(obj)``), nested ones too:
enums become their values, ``datetime`` epoch milliseconds. A presenter writes out only the
fields that are named or gathered differently."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from engram.api.errors import error_response
from engram.api.memory_outputs import (
    CurrentOut,
    DuplicateOut,
    PendingChangeOut,
    ReviewItemOut,
    SavedMemoryOut,
)
from engram.api.models import (
    BulkReviewResponse,
    BulkReviewResult,
    DomainInsightsResponse,
    ErasureCounts,
    ErasureReceipt,
    ErrorDetail,
    ExportResponse,
    FactOut,
    FactsResponse,
    MemoryActionOut,
    MemoryHistoryResponse,
    MemoryListResponse,
    MemoryOut,
    MemoryPageResponse,
    MemoryVersionOut,
    ObservationOut,
    PersonaListResponse,
    PersonaResponse,
    RankedToolOut,
    ReviewListResponse,
    SessionResponse,
    SessionSections,
    TeamSettingsResponse,
    ToolCallResponse,
    ToolDefinition,
    ToolInsightsResponse,
    ToolRankResponse,
    ToolsResponse,
)
from engram.api.responses import epoch_ms
from engram.api.tools import ToolFormat
from engram.behaviour.models import Fact
from engram.insights.models import InsightsPage
from engram.memories.changes import Duplicate, ReviewItem, ReviewPage
from engram.memories.history import MemoryHistory
from engram.memories.models import (
    Memory,
    MemoryPage,
    Persona,
    ReviewAction,
    TeamSettings,
    ToolResult,
)
from engram.memories.versions import MemoryVersion

if TYPE_CHECKING:
    from engram.memories.service import ReviewOutcome
    from engram.use_cases.me import Erasure, Export
    from engram.use_cases.session import SessionContext
    from engram.use_cases.tool_ranking import ToolRanking


Page = TypeVar("Page", bound=MemoryPageResponse)


def fact_out(fact: Fact) -> FactOut:
    return FactOut.of(fact)


def facts_response(facts: Sequence[Fact]) -> FactsResponse:
    return FactsResponse(facts=[fact_out(f) for f in facts])


def memory_out(memory: Memory) -> MemoryOut:
    return MemoryOut.of(memory)


def action_out(action: ReviewAction) -> MemoryActionOut:
    """An audit row with the before/after copies it holds (stored JSON of the memory)."""

    def copy(raw: dict[str, Any] | None) -> MemoryOut | None:
        if raw is None:
            return None
        return memory_out(Memory.model_validate({**raw, "teamId": action.team_id}))

    return MemoryActionOut(
        id=action.id,
        action=action.action,
        actor_id=action.actor_id,
        at=epoch_ms(action.at),
        before=copy(action.before),
        after=copy(action.after),
    )


def version_out(version: MemoryVersion) -> MemoryVersionOut:
    return MemoryVersionOut(
        version=version.version,
        key=version.key,
        value=version.value,
        status=version.status,
        actor_id=version.actor_id,
        actor_kind=version.actor_kind,
        surface=version.surface,
        valid_from=epoch_ms(version.valid_from),
        valid_to=None if version.valid_to is None else epoch_ms(version.valid_to),
    )


def memory_history(history: MemoryHistory) -> MemoryHistoryResponse:
    page = history.page
    return MemoryHistoryResponse(
        memory_id=history.memory_id,
        recorded_from=page.recorded_from,
        versions=[version_out(v) for v in page.versions],
        actions=[action_out(a) for a in history.actions],
        next_cursor=None if page.next_after is None else str(page.next_after),
        pending_change=None
        if history.pending_change is None
        else PendingChangeOut.of(history.pending_change),
    )


def memory_list(memories: Sequence[Memory]) -> MemoryListResponse:
    return MemoryListResponse(memories=[memory_out(m) for m in memories])


def _page_of(model: type[Page], page: MemoryPage) -> Page:
    return model(memories=[memory_out(m) for m in page.memories], next_cursor=page.next_cursor)


def memory_page(page: MemoryPage) -> MemoryPageResponse:
    return _page_of(MemoryPageResponse, page)


def bulk_review_response(outcomes: Sequence[ReviewOutcome]) -> BulkReviewResponse:
    """One result per id; an id's error has the code and message its single route answers."""
    results = []
    for outcome in outcomes:
        error = None
        if outcome.error is not None:
            mapped = error_response(outcome.error)
            error = ErrorDetail.model_validate({"code": mapped.code, "message": mapped.message})
        results.append(
            BulkReviewResult(
                id=outcome.memory_id,
                ok=outcome.memory is not None,
                memory=memory_out(outcome.memory) if outcome.memory is not None else None,
                error=error,
            )
        )
    return BulkReviewResponse(results=results)


def saved_out(memory: Memory, duplicate: Duplicate | None) -> SavedMemoryOut:
    flagged = None if duplicate is None else DuplicateOut(**vars(duplicate))
    return SavedMemoryOut.of(memory).model_copy(update={"duplicate_of": flagged})


def review_item_out(item: ReviewItem) -> ReviewItemOut:
    current, duplicate = item.current, item.duplicate_of
    return ReviewItemOut.of(item.memory).model_copy(
        update={
            "current": None if current is None else CurrentOut(**vars(current)),
            "duplicate_of": None if duplicate is None else DuplicateOut(**vars(duplicate)),
        }
    )


def review_page(page: ReviewPage) -> ReviewListResponse:
    return ReviewListResponse(
        memories=[review_item_out(i) for i in page.items], next_cursor=page.next_cursor
    )


def session_response(context: SessionContext) -> SessionResponse:
    return SessionResponse(
        identity_id=context.identity_id,
        persona_id=context.persona_id,
        facts=[fact_out(f) for f in context.facts],
        tool_affinities=dict(context.tool_affinities),
        memories=[memory_out(m) for m in context.memories],
        prompt=context.prompt,
        sections=SessionSections(facts=context.facts_section, memories=context.memories_section),
        degraded=list(context.degraded),
    )


def tools_response(fmt: ToolFormat, definitions: Sequence[Mapping[str, Any]]) -> ToolsResponse:
    """Tool definitions in ``fmt`` (``engram.api.tools``); ``json_schema`` as
    ``{name, description, inputSchema}``, every other format exactly as it renders them."""
    if fmt != "json_schema":
        return ToolsResponse(format=fmt, tools=[dict(d) for d in definitions])
    return ToolsResponse(
        format=fmt,
        tools=[
            ToolDefinition(
                name=d["name"], description=d["description"], input_schema=d["parameters"]
            )
            for d in definitions
        ],
    )


def tool_rank_response(ranking: ToolRanking) -> ToolRankResponse:
    tools = [
        RankedToolOut(
            name=t.name, score=t.score, affinity=t.affinity, boosted_score=t.boosted_score
        )
        for t in ranking.tools
    ]
    return ToolRankResponse(
        tools=tools, boost_factor=ranking.boost_factor, degraded=list(ranking.degraded)
    )


def tool_call_response(result: ToolResult) -> ToolCallResponse:
    payload = result.model_dump(mode="json", by_alias=True)
    payload["memories"] = [memory_out(m).model_dump(mode="json") for m in result.memories]
    return ToolCallResponse(name=result.name, result=payload)


def persona_response(persona: Persona) -> PersonaResponse:
    return PersonaResponse.of(persona)


def persona_list(personas: Sequence[Persona]) -> PersonaListResponse:
    return PersonaListResponse(personas=[persona_response(p) for p in personas])


def team_settings_response(settings: TeamSettings) -> TeamSettingsResponse:
    return TeamSettingsResponse.of(settings)


def export_response(export: Export) -> ExportResponse:
    caller = export.caller
    return ExportResponse(
        identity_id=caller.identity_id,
        user_id=caller.user_id,
        team_id=caller.team_id,
        exported_at=export.exported_at,
        observations=[ObservationOut.of(o) for o in export.observations],
        facts=[fact_out(f) for f in export.facts],
        checkpoint=export.checkpoint,
        memories=[memory_out(m) for m in export.memories],
    )


def erasure_receipt(erasure: Erasure) -> ErasureReceipt:
    caller = erasure.caller
    return ErasureReceipt(
        identity_id=caller.identity_id,
        user_id=caller.user_id,
        team_id=caller.team_id,
        erased_at=erasure.erased_at,
        counts=ErasureCounts.model_validate(erasure),
    )


def tool_insights(page: InsightsPage) -> ToolInsightsResponse:
    return ToolInsightsResponse.model_validate(page)


def domain_insights(page: InsightsPage) -> DomainInsightsResponse:
    return DomainInsightsResponse.model_validate(page)
