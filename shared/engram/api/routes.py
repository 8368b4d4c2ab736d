"""The route table of the v1 HTTP API: the one place a route is written.

Each ``RouteSpec`` says which Lambda function serves the route (``function``), the endpoint
that answers it (``handler``: a plain function of ``engram.api.endpoints.<function>``, taking
an ``engram.api.web.Request`` and the path parameters, giving an ``engram.api.web.Reply``),
whether it needs a token, and its request, query and response models. Everything else is
derived from ``ROUTES``:

* the handlers' resolvers (``engram.adapters.apigateway.http_app(function, container)``
  registers each route of a function on its ``APIGatewayHttpResolver``, calling its endpoint);
* the local server's route table and its public routes (``engram.local``);
* the OpenAPI document (``engram.api.openapi``, committed as ``docs/openapi.json``), which
  ``get_openapi`` below serves;
* the API Gateway routes of the CDK stack (``infra.constructs.http_api``), plus ``CATCH_ALL``;
* the tests' route lists.

To add a route: write its endpoint in ``engram/api/endpoints/<function>.py``, add its
``RouteSpec`` here naming it, regenerate ``docs/openapi.json``
(``uv run python -m engram.api.openapi > docs/openapi.json``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from engram.api.endpoints import ingest, memories, session
from engram.api.models import (
    AcceptedResponse,
    ApproveRequest,
    BulkReviewRequest,
    BulkReviewResponse,
    DomainInsightsResponse,
    ErasureReceipt,
    EventsRequest,
    ExportResponse,
    FactsResponse,
    HealthResponse,
    MemoryGetQuery,
    MemoryHistoryQuery,
    MemoryHistoryResponse,
    MemoryListQuery,
    MemoryListResponse,
    MemoryMergeRequest,
    MemoryOut,
    MemoryPageResponse,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemoryRestoreRequest,
    MemorySaveRequest,
    ObservationsRequest,
    PersonaListResponse,
    PersonaRequest,
    PersonaResponse,
    QueuedResponse,
    ReviewListQuery,
    ReviewListResponse,
    SavedMemoryOut,
    SessionRequest,
    SessionResponse,
    TeamSettingsRequest,
    TeamSettingsResponse,
    ToolCallQuery,
    ToolCallRequest,
    ToolCallResponse,
    ToolInsightsResponse,
    ToolRankRequest,
    ToolRankResponse,
    ToolsQuery,
    ToolsResponse,
    TranscriptRequest,
)
from engram.api.route_spec import (
    CATCH_ALL,
    CATCH_ALL_FUNCTION,
    HTTP_FUNCTIONS,
    HttpFunction,
    RouteSpec,
)
from engram.api.web import Reply, Request


# The OpenAPI endpoint lives beside the table it documents: in an endpoint module it would have
# to import the table that imports it.
def get_openapi(req: Request) -> Reply:
    """No token needed: docs/openapi.json, generated from this table and its models."""
    return Reply(200, _openapi(), headers={"Cache-Control": "public, max-age=300"})


@cache
def _openapi() -> dict[str, Any]:
    from engram.api.openapi import openapi_document  # built on first request, then kept

    return openapi_document(ROUTES)


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec(
        method="GET",
        path="/v1/health",
        function="memories",
        handler=memories.get_health,
        summary="status of Redis and PostgreSQL",
        response=HealthResponse,
        auth=False,
    ),
    RouteSpec(
        method="GET",
        path="/v1/openapi.json",
        function="memories",
        handler=get_openapi,
        summary="this OpenAPI document (docs/openapi.json)",
        auth=False,
    ),
    RouteSpec(
        method="POST",
        path="/v1/observations",
        function="ingest",
        handler=ingest.post_observations,
        summary="queue typed observations",
        request=ObservationsRequest,
        response=AcceptedResponse,
        status=202,
        idempotency_key=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/events",
        function="ingest",
        handler=ingest.post_events,
        summary="queue raw query and tool events",
        request=EventsRequest,
        response=AcceptedResponse,
        status=202,
        idempotency_key=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/sessions",
        function="session",
        handler=session.post_session,
        summary="consolidate and recall",
        request=SessionRequest,
        response=SessionResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/facts",
        function="memories",
        handler=memories.get_facts,
        summary="the caller's facts",
        response=FactsResponse,
    ),
    RouteSpec(
        method="DELETE",
        path="/v1/facts/{factId}",
        function="memories",
        handler=memories.delete_fact,
        summary="forget one fact",
        status=204,
    ),
    RouteSpec(
        method="POST",
        path="/v1/memories",
        function="memories",
        handler=memories.post_memory,
        summary="memory_save (201 new, 200 updated)",
        request=MemorySaveRequest,
        response=SavedMemoryOut,
        status=201,
        etag=True,
    ),
    RouteSpec(
        method="GET",
        path="/v1/memories",
        function="memories",
        handler=memories.get_memories,
        summary="memory_recall, scope-merged",
        query=MemoryRecallQuery,
        response=MemoryListResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/memories/list",
        function="memories",
        handler=memories.get_memory_list,
        summary="one page of the memories visible to the caller, newest first",
        query=MemoryListQuery,
        response=MemoryPageResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/memories/{id}",
        function="memories",
        handler=memories.get_memory,
        summary="one memory (asOf: as it was then)",
        query=MemoryGetQuery,
        response=MemoryOut,
        etag=True,
    ),
    RouteSpec(
        method="PATCH",
        path="/v1/memories/{id}",
        function="memories",
        handler=memories.patch_memory,
        summary="edit one memory",
        request=MemoryPatchRequest,
        response=MemoryOut,
        if_match=True,
        etag=True,
    ),
    RouteSpec(
        method="DELETE",
        path="/v1/memories/{id}",
        function="memories",
        handler=memories.delete_memory,
        summary="delete one memory",
        status=204,
        if_match=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/memories/{id}/archive",
        function="memories",
        handler=memories.archive_memory,
        summary="archive one memory",
        response=MemoryOut,
        if_match=True,
        etag=True,
    ),
    RouteSpec(
        method="GET",
        path="/v1/memories/{id}/history",
        function="memories",
        handler=memories.get_memory_history,
        summary="the versions and audit trail of one memory (its owner; admins: what they manage)",
        query=MemoryHistoryQuery,
        response=MemoryHistoryResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/memories/{id}/restore",
        function="memories",
        handler=memories.restore_memory,
        summary="make an earlier version current again, as a new version",
        request=MemoryRestoreRequest,
        response=MemoryOut,
        if_match=True,
        etag=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/memories/{id}/merge",
        function="memories",
        handler=memories.merge_memory,
        summary="fold one memory into another of the same owner and scope (a duplicate)",
        request=MemoryMergeRequest,
        response=MemoryOut,
        if_match=True,
        etag=True,
    ),
    RouteSpec(
        method="GET",
        path="/v1/tools",
        function="memories",
        handler=memories.get_tools,
        summary="tool definitions in a provider's format",
        query=ToolsQuery,
        response=ToolsResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/tools/rank",  # before /v1/tools/{name}: no tool is called "rank"
        function="memories",
        handler=memories.post_tools_rank,
        summary="order a tool catalogue by relevance plus 2 x the caller's tool affinity",
        request=ToolRankRequest,
        response=ToolRankResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/tools/{name}",
        function="memories",
        handler=memories.post_tool,
        summary="execute a tool call in a provider's format",
        query=ToolCallQuery,
        request=ToolCallRequest,
        response=ToolCallResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/conversations/{conversationId}/transcript",
        function="ingest",
        handler=ingest.post_transcript,
        summary="queue a transcript for extraction",
        request=TranscriptRequest,
        response=QueuedResponse,
        status=202,
    ),
    RouteSpec(
        method="GET",
        path="/v1/review",
        function="memories",
        handler=memories.get_review,
        summary="pending memories, one page (admins)",
        query=ReviewListQuery,
        response=ReviewListResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/review/{id}/approve",
        function="memories",
        handler=memories.approve,
        summary="approve, optionally editing key/value first (admins)",
        request=ApproveRequest,
        body_required=False,
        response=MemoryOut,
        etag=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/review/{id}/reject",
        function="memories",
        handler=memories.reject,
        summary="reject (admins)",
        response=MemoryOut,
        etag=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/review/bulk",
        function="memories",
        handler=memories.post_review_bulk,
        summary="approve or reject many, a result per id (admins)",
        request=BulkReviewRequest,
        response=BulkReviewResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/personas",
        function="memories",
        handler=memories.get_personas,
        summary="the personas configured in the team (admins)",
        response=PersonaListResponse,
    ),
    RouteSpec(
        method="PUT",
        path="/v1/personas/{personaId}",
        function="memories",
        handler=memories.put_persona,
        summary="persona settings",
        request=PersonaRequest,
        response=PersonaResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/personas/{personaId}",
        function="memories",
        handler=memories.get_persona,
        summary="persona settings",
        response=PersonaResponse,
    ),
    RouteSpec(
        method="PUT",
        path="/v1/settings/team",
        function="memories",
        handler=memories.put_team_settings,
        summary="team memory switch and retention",
        request=TeamSettingsRequest,
        response=TeamSettingsResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/settings/team",
        function="memories",
        handler=memories.get_team_settings,
        summary="team memory switch and retention (team admins)",
        response=TeamSettingsResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/me/export",
        function="memories",
        handler=memories.get_export,
        summary="everything held about the caller",
        response=ExportResponse,
    ),
    RouteSpec(
        method="DELETE",
        path="/v1/me",
        function="memories",
        handler=memories.delete_me,
        summary="erase the caller",
        response=ErasureReceipt,
    ),
    RouteSpec(
        method="GET",
        path="/v1/insights/tools",
        function="memories",
        handler=memories.get_tool_insights,
        summary="the team's tool affinities and avoidances, k-anonymous (team admins)",
        response=ToolInsightsResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/insights/domains",
        function="memories",
        handler=memories.get_domain_insights,
        summary="the team's preferred domains, k-anonymous (team admins)",
        response=DomainInsightsResponse,
    ),
)


def routes_of(function: HttpFunction) -> tuple[RouteSpec, ...]:
    """The routes ``function`` answers, in table order."""
    return tuple(r for r in ROUTES if r.function == function)


#: Route keys that need no token (API Gateway's ``HttpNoneAuthorizer``).
PUBLIC_ROUTES: frozenset[str] = frozenset(r.route_key for r in ROUTES if not r.auth)

__all__ = [
    "CATCH_ALL",
    "CATCH_ALL_FUNCTION",
    "HTTP_FUNCTIONS",
    "PUBLIC_ROUTES",
    "ROUTES",
    "HttpFunction",
    "RouteSpec",
    "routes_of",
]
