"""``MemoryService.get_persona`` (``GET /v1/personas/{id}``) finds only personas configured in
the caller's team; sessions, saves and recall with any other persona id keep working with the
defaults. On both adapters."""

from __future__ import annotations

import pytest
from tests.integration.memories.conftest import Backend

from engram.api.memory_inputs import PersonaRequest
from engram.errors import NotFound
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory

BOSS = Caller(user_id="boss", team_id="t1", is_team_admin=True)
OTHER_BOSS = Caller(user_id="boss", team_id="t2", is_team_admin=True)
ALICE_T2 = Caller(user_id="alice", team_id="t2")


def test_a_persona_never_configured_in_the_callers_team_is_not_found(backend: Backend) -> None:
    svc = backend.service()
    svc.personas.put_persona(
        BOSS,
        PersonaRequest.model_validate(
            {"allowedGroups": ["support"], "memoryEnabled": False}
        ).command("helpdesk"),
    )
    assert svc.personas.get_persona(BOSS, "helpdesk").allowed_groups == ["support"]
    with pytest.raises(NotFound) as other_team:
        svc.personas.get_persona(OTHER_BOSS, "helpdesk")  # configured, but in t1
    with pytest.raises(NotFound) as nobody:
        svc.personas.get_persona(OTHER_BOSS, "never-configured")
    assert str(other_team.value) == str(nobody.value)  # the same answer: nothing revealed


def test_an_unconfigured_persona_still_works_with_the_defaults(backend: Backend) -> None:
    svc = backend.service()
    svc.personas.put_persona(
        BOSS, PersonaRequest.model_validate({"memoryEnabled": False}).command("helpdesk")
    )  # off in t1 only
    saved, created = svc.save(
        ALICE_T2, SaveMemory(key="tone", value="formal", persona_id="helpdesk")
    )
    assert created
    assert [m.key for m in svc.recall(ALICE_T2, Recall(query="", persona_id="helpdesk"))] == [
        "tone"
    ]
    assert "formal" in svc.build_hint(ALICE_T2, persona_id="helpdesk")
    assert svc.personas.persona_settings("t2", "helpdesk").memory_enabled
    svc.personas.put_persona(
        OTHER_BOSS, PersonaRequest.model_validate({"memoryEnabled": True}).command("helpdesk")
    )
    assert svc.personas.get_persona(OTHER_BOSS, "helpdesk").team_id == "t2"
    assert saved.owner_id == "helpdesk"
