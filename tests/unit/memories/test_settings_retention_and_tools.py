"""MemoryService: retention rules on personas and team settings (kept when left out, cleared
with None, bad days refused naming the field) and tool-call provenance, on the in-memory
store."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.api.errors import error_response
from engram.api.memory_inputs import PersonaRequest, TeamSettingsRequest
from engram.api.tools import tool_command
from engram.clock import FakeClock
from engram.errors import Forbidden
from engram.identity import Caller
from engram.memories.models import RetentionRules, ToolResult
from engram.memories.service import MemoryService
from engram.settings import Settings


def call_tool(
    svc: MemoryService, caller: Caller, name: str, arguments: dict[str, Any], **ids: str | None
) -> ToolResult:
    """A model's tool call as the edge makes it: arguments validated once, then executed."""
    return svc.tools.execute(caller, tool_command(name, arguments, **ids))


ADMIN = Caller(user_id="root", team_id="t1", is_team_admin=True)
ALICE = Caller(user_id="alice", team_id="t1")


@pytest.fixture
def service() -> MemoryService:
    store = InMemoryMemoryStore(FakeClock())
    return MemoryService(store, settings=Settings(), clock=FakeClock())


def test_persona_retention_kept_when_left_out_and_cleared_with_none(
    service: MemoryService,
) -> None:
    set_ = service.personas.put_persona(
        ADMIN,
        PersonaRequest.model_validate({"retention": {"archiveAfterDays": 30}}).command("chef"),
    )
    assert set_.retention == RetentionRules(archive_after_days=30)
    kept = service.personas.put_persona(
        ADMIN, PersonaRequest.model_validate({"memoryEnabled": False}).command("chef")
    )
    assert (kept.memory_enabled, kept.retention.archive_after_days) == (False, 30)
    assert service.personas.get_persona(ADMIN, "chef").retention.archive_after_days == 30
    cleared = service.personas.put_persona(
        ADMIN, PersonaRequest.model_validate({"retention": None}).command("chef")
    )
    assert cleared.retention == RetentionRules()


def test_team_retention_kept_when_left_out_and_cleared_with_none(service: MemoryService) -> None:
    assert service.personas.get_team_settings(ADMIN).retention == RetentionRules()
    rule = {"archiveAfterDays": 90, "deleteArchivedAfterDays": 30}
    saved = service.personas.put_team_settings(
        ADMIN, TeamSettingsRequest(memory_enabled=True, retention=rule).command()
    )
    assert saved.retention == RetentionRules(archive_after_days=90, delete_archived_after_days=30)
    kept = service.personas.put_team_settings(
        ADMIN, TeamSettingsRequest(memory_enabled=False).command()
    )
    assert kept.retention == saved.retention
    assert service.personas.get_team_settings(ADMIN).memory_enabled is False
    cleared = service.personas.put_team_settings(
        ADMIN, TeamSettingsRequest(memory_enabled=True, retention=None).command()
    )
    assert cleared.retention == RetentionRules()
    with pytest.raises(Forbidden):
        service.personas.get_team_settings(ALICE)


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"archiveAfterDays": 0}, "retention.archiveAfterDays"),
        ({"deleteArchivedAfterDays": "7"}, "retention.deleteArchivedAfterDays"),
        ({"archiveAfterDays": True}, "retention.archiveAfterDays"),
        ({"archiveAfterDays": 36_501}, "retention.archiveAfterDays"),
    ],
)
def test_bad_team_retention_names_the_field_and_stores_nothing(
    service: MemoryService, rule: dict[str, object], field: str
) -> None:
    service.personas.put_team_settings(
        ADMIN, TeamSettingsRequest(memory_enabled=True, retention={"archiveAfterDays": 5}).command()
    )
    # the request model is the one rule: a bad rule never becomes a request the service sees
    with pytest.raises(ValidationError) as error:
        TeamSettingsRequest.model_validate(
            {"memoryEnabled": False, "retention": rule}, by_alias=True, by_name=False
        )
    assert error_response(error.value).details[0]["field"] == field
    stored = service.personas.get_team_settings(ADMIN)
    assert (stored.memory_enabled, stored.retention.archive_after_days) == (True, 5)


def test_memory_save_tool_keeps_the_source_channel(service: MemoryService) -> None:
    result = call_tool(
        service,
        ALICE,
        "memory_save",
        {"key": "editor", "value": "helix"},
        source_channel_id="conv-7",
    )
    assert result.ok
    assert result.memories[0].source_channel_id == "conv-7"
    recalled = call_tool(service, ALICE, "memory_recall", {}, source_channel_id="conv-8")
    assert [m.source_channel_id for m in recalled.memories] == ["conv-7"]
