"""Persona and team settings: team admins configure who may use a persona, whether memory
is on, extraction and retention; the service's own jobs read a persona or its defaults."""

from __future__ import annotations

from engram.errors import Forbidden, NotFound
from engram.identity import Caller
from engram.memories.commands import PutPersona, PutTeamSettings
from engram.memories.core import MemoryCore
from engram.memories.models import Persona, RetentionRules, TeamSettings
from engram.memories.privacy import context_for, system_context


class PersonaAdministration:
    """Personas and team switches (``PUT/GET /v1/personas``, ``/v1/team/settings``)."""

    def __init__(self, core: MemoryCore) -> None:
        self._personas = core.personas

    def put_persona(self, caller: Caller, command: PutPersona) -> Persona:
        """Team admins. ``command.retention`` None: the persona's retention stays as it is."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins configure personas")
        pid = command.persona_id
        ctx = context_for(caller)
        retention = command.retention
        if retention is None:  # keep the persona's retention rules
            current = self._personas.get_persona(ctx, pid)
            retention = current.retention if current else RetentionRules()
        persona = Persona(
            persona_id=pid,
            team_id=caller.team_id,
            allowed_groups=list(command.allowed_groups),
            memory_enabled=command.memory_enabled,
            extraction=command.extraction,
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

    def put_team_settings(self, caller: Caller, request: PutTeamSettings) -> TeamSettings:
        """Team admins. ``request.retention`` None: the team's retention stays as it is."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins change team settings")
        ctx = context_for(caller)
        rule = request.retention
        if rule is None:
            current = self._personas.get_team_settings(ctx)
            rule = current.retention if current else RetentionRules()
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
