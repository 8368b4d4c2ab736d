"""The memories function's use cases: explicit memories, tools, review, personas and team
settings, each as one call on domain types (the HTTP shapes are made at the edge, by
``engram.api.presenters``).

The rules live in ``MemoryService`` (``engram.memories.service``: access, switches, quotas,
review, audit); this layer is what a route calls, so every route of the API goes through
``engram.use_cases``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from engram.identity import Caller
from engram.memories.inputs import (
    ApproveRequest,
    BulkReviewRequest,
    MemoryListQuery,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemorySaveRequest,
    PersonaRequest,
    ReviewListQuery,
    TeamSettingsRequest,
)
from engram.memories.models import (
    Memory,
    MemoryPage,
    Persona,
    ReviewAction,
    TeamSettings,
    ToolResult,
)
from engram.memories.service import MemoryService, ReviewOutcome, ToolCallOptions
from engram.memories.tools import ToolFormat


class MemoryUseCases:
    def __init__(self, memories: MemoryService) -> None:
        self.memories = memories

    # --- memories ---------------------------------------------------------------------------
    def save(self, caller: Caller, request: MemorySaveRequest) -> tuple[Memory, bool]:
        """The saved memory and whether it is new (``False``: an existing key updated)."""
        return self.memories.save(caller, request)

    def recall(self, caller: Caller, query: MemoryRecallQuery) -> list[Memory]:
        return self.memories.recall(caller, query)

    def get(self, caller: Caller, memory_id: str) -> Memory:
        return self.memories.get(caller, memory_id)

    def update(
        self,
        caller: Caller,
        memory_id: str,
        patch: MemoryPatchRequest,
        *,
        if_versions: frozenset[int] | None = None,
    ) -> Memory:
        """``if_versions``: the versions ``If-Match`` accepts (``None``: any)."""
        return self.memories.update(caller, memory_id, patch, if_versions=if_versions)

    def delete(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> None:
        self.memories.delete(caller, memory_id, if_versions=if_versions)

    def archive(
        self, caller: Caller, memory_id: str, *, if_versions: frozenset[int] | None = None
    ) -> Memory:
        return self.memories.archive(caller, memory_id, if_versions=if_versions)

    def page(self, caller: Caller, query: MemoryListQuery) -> MemoryPage:
        """One page of the memories visible to the caller (``MemoryService.list_memories``)."""
        return self.memories.list_memories(caller, query)

    def history(self, caller: Caller, memory_id: str) -> list[ReviewAction]:
        return self.memories.history(caller, memory_id)

    # --- tools ------------------------------------------------------------------------------
    def tools(self, fmt: ToolFormat = "json_schema") -> list[dict[str, Any]]:
        return self.memories.tool_definitions(fmt)

    def call_tool(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any],
        **options: Unpack[ToolCallOptions],
    ) -> ToolResult:
        """``errors_as_results``: what the model got wrong is a result it reads (the
        provider formats), not an exception (``MemoryService.execute_tool``)."""
        return self.memories.execute_tool(caller, name, arguments, **options)

    # --- review -----------------------------------------------------------------------------
    def pending(self, caller: Caller, query: ReviewListQuery) -> MemoryPage:
        return self.memories.list_pending(caller, query)

    def approve(self, caller: Caller, memory_id: str, edit: ApproveRequest) -> Memory:
        return self.memories.approve(caller, memory_id, edit)

    def reject(self, caller: Caller, memory_id: str) -> Memory:
        return self.memories.reject(caller, memory_id)

    def review_many(self, caller: Caller, request: BulkReviewRequest) -> list[ReviewOutcome]:
        return self.memories.review_many(caller, request)

    # --- personas and team settings ---------------------------------------------------------
    def put_persona(self, caller: Caller, persona_id: str, request: PersonaRequest) -> Persona:
        return self.memories.put_persona(caller, persona_id, request)

    def get_persona(self, caller: Caller, persona_id: str) -> Persona:
        return self.memories.get_persona(caller, persona_id)

    def personas(self, caller: Caller) -> list[Persona]:
        return self.memories.list_personas(caller)

    def put_team_settings(self, caller: Caller, request: TeamSettingsRequest) -> TeamSettings:
        return self.memories.put_team_settings(caller, request)

    def team_settings(self, caller: Caller) -> TeamSettings:
        return self.memories.get_team_settings(caller)
