"""Domain results as HTTP response models: the one place where the use cases' answers (facts,
memories, personas, session contexts, exports, receipts) take the shapes of
``engram.api.models``. The use cases never build these themselves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engram.api.errors import error_response
from engram.api.models import (
    BulkReviewResponse,
    BulkReviewResult,
    DomainInsightOut,
    DomainInsightsResponse,
    ErasureCounts,
    ErasureReceipt,
    ErrorDetail,
    ExportResponse,
    ExtractionSettingsOut,
    FactOut,
    FactsResponse,
    MemoryActionOut,
    MemoryHistoryResponse,
    MemoryListResponse,
    MemoryOut,
    MemoryPageResponse,
    ObservationOut,
    PersonaListResponse,
    PersonaResponse,
    RankedToolOut,
    RetentionSettingsOut,
    ReviewListResponse,
    SessionResponse,
    SessionSections,
    TeamSettingsResponse,
    ToolCallResponse,
    ToolDefinition,
    ToolInsightOut,
    ToolInsightsResponse,
    ToolRankResponse,
    ToolsResponse,
)
from engram.behaviour.models import Fact, Observation
from engram.insights.models import InsightsPage
from engram.memories.inputs import RetentionRule
from engram.memories.models import (
    Memory,
    MemoryPage,
    Persona,
    ReviewAction,
    TeamSettings,
    ToolResult,
)
from engram.memories.tools import ToolFormat

if TYPE_CHECKING:
    from engram.memories.service import ReviewOutcome
    from engram.use_cases.me import Erasure, Export
    from engram.use_cases.session import SessionContext
    from engram.use_cases.tool_ranking import ToolRanking


def epoch_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def fact_out(fact: Fact) -> FactOut:
    return FactOut(
        id=fact.id,
        identity_id=fact.identity_id,
        category=fact.category.value,
        subject=fact.subject,
        content=fact.content,
        confidence=fact.confidence,
        reinforcement_count=fact.reinforcement_count,
        last_reinforced_at=fact.last_reinforced_at,
        created_at=fact.created_at,
        updated_at=fact.updated_at,
        ease_factor=fact.ease_factor,
    )


def facts_response(facts: Sequence[Fact]) -> FactsResponse:
    return FactsResponse(facts=[fact_out(f) for f in facts])


def memory_out(memory: Memory) -> MemoryOut:
    return MemoryOut(
        id=memory.id,
        scope=memory.scope.value,
        owner_id=memory.owner_id,
        user_id=memory.user_id,
        key=memory.key,
        value=memory.value,
        source_channel_id=memory.source_channel_id,
        confidence=memory.confidence,
        status=memory.status.value,
        created_at=epoch_ms(memory.created_at),
        updated_at=epoch_ms(memory.updated_at),
        version=memory.version,
    )


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


def memory_history(memory_id: str, actions: Sequence[ReviewAction]) -> MemoryHistoryResponse:
    return MemoryHistoryResponse(memory_id=memory_id, actions=[action_out(a) for a in actions])


def memory_list(memories: Sequence[Memory]) -> MemoryListResponse:
    return MemoryListResponse(memories=[memory_out(m) for m in memories])


def memory_page(page: MemoryPage) -> MemoryPageResponse:
    return MemoryPageResponse(
        memories=[memory_out(m) for m in page.memories], next_cursor=page.next_cursor
    )


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


def review_page(page: MemoryPage) -> ReviewListResponse:
    return ReviewListResponse(
        memories=[memory_out(m) for m in page.memories], next_cursor=page.next_cursor
    )


def observation_out(observation: Observation) -> ObservationOut:
    return ObservationOut(
        id=observation.id,
        identity_id=observation.identity_id,
        type=observation.type.value,
        content=observation.content,
        metadata=observation.metadata,
        created_at=observation.created_at,
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
    """Tool definitions in ``fmt`` (``engram.memories.tools``); ``json_schema`` as
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
    return ToolRankResponse(
        tools=[
            RankedToolOut(
                name=t.name, score=t.score, affinity=t.affinity, boosted_score=t.boosted_score
            )
            for t in ranking.tools
        ],
        boost_factor=ranking.boost_factor,
        degraded=list(ranking.degraded),
    )


def tool_call_response(result: ToolResult) -> ToolCallResponse:
    payload = result.model_dump(mode="json", by_alias=True)
    payload["memories"] = [memory_out(m).model_dump(mode="json") for m in result.memories]
    return ToolCallResponse(name=result.name, result=payload)


def retention_out(rule: RetentionRule) -> RetentionSettingsOut:
    return RetentionSettingsOut(
        archive_after_days=rule.archive_after_days,
        delete_archived_after_days=rule.delete_archived_after_days,
    )


def persona_response(persona: Persona) -> PersonaResponse:
    return PersonaResponse(
        persona_id=persona.persona_id,
        team_id=persona.team_id,
        allowed_groups=list(persona.allowed_groups),
        memory_enabled=persona.memory_enabled,
        extraction=ExtractionSettingsOut(
            enabled=persona.extraction.enabled, prompt=persona.extraction.prompt
        ),
        retention=retention_out(persona.retention),
        updated_at=epoch_ms(persona.updated_at) if persona.updated_at else None,
    )


def persona_list(personas: Sequence[Persona]) -> PersonaListResponse:
    return PersonaListResponse(personas=[persona_response(p) for p in personas])


def team_settings_response(settings: TeamSettings) -> TeamSettingsResponse:
    return TeamSettingsResponse(
        team_id=settings.team_id,
        memory_enabled=settings.memory_enabled,
        retention=retention_out(settings.retention),
        updated_at=epoch_ms(settings.updated_at) if settings.updated_at else None,
    )


def export_response(export: Export) -> ExportResponse:
    caller = export.caller
    return ExportResponse(
        identity_id=caller.identity_id,
        user_id=caller.user_id,
        team_id=caller.team_id,
        exported_at=export.exported_at,
        observations=[observation_out(o) for o in export.observations],
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
        counts=ErasureCounts(
            observations=erasure.observations,
            facts=erasure.facts,
            checkpoints=erasure.checkpoints,
            idempotency_records=erasure.idempotency_records,
            memories=erasure.memories,
            persona_memories=erasure.persona_memories,
            review_actions=erasure.review_actions,
            suppressions=erasure.suppressions,
        ),
    )


def tool_insights(page: InsightsPage) -> ToolInsightsResponse:
    return ToolInsightsResponse(
        aggregated_at=epoch_ms(page.aggregated_at) if page.aggregated_at else None,
        min_users=page.min_users,
        tools=[
            ToolInsightOut(
                tool=t.tool,
                users=t.users,
                users_with_affinity=t.users_with_affinity,
                users_with_avoidance=t.users_with_avoidance,
                mean_affinity_confidence=t.mean_affinity_confidence,
                mean_avoidance_confidence=t.mean_avoidance_confidence,
            )
            for t in page.tools
        ],
    )


def domain_insights(page: InsightsPage) -> DomainInsightsResponse:
    return DomainInsightsResponse(
        aggregated_at=epoch_ms(page.aggregated_at) if page.aggregated_at else None,
        min_users=page.min_users,
        domains=[
            DomainInsightOut(domain=d.domain, users=d.users, mean_confidence=d.mean_confidence)
            for d in page.domains
        ],
    )
