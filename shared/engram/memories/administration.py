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
        self._uow = core.uow

    def put_persona(self, caller: Caller, command: PutPersona) -> Persona:
        """Team admins. ``command.retention`` None: the persona's retention stays as it is."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins configure personas")
        pid = command.persona_id
        with self._uow(context_for(caller)) as tx:
            retention = command.retention
            if retention is None:  # keep the persona's retention rules
                current = tx.switches(pid).persona
                retention = current.retention if current else RetentionRules()
            persona = Persona(
                persona_id=pid,
                team_id=caller.team_id,
                allowed_groups=list(command.allowed_groups),
                memory_enabled=command.memory_enabled,
                extraction=command.extraction,
                retention=retention,
            )
            return tx.put_persona(persona)

    def list_personas(self, caller: Caller) -> list[Persona]:
        """Admins: every persona configured in their team, by persona id."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read persona settings")
        with self._uow(context_for(caller)) as tx:
            return tx.personas()

    def get_persona(self, caller: Caller, persona_id: str) -> Persona:
        """Admins read the personas configured in their team. ``NotFound`` for one with no row
        in the caller's team (never configured here, or only in another team), so another
        team's persona id is not revealed. Sessions and recall with such a persona id still
        work, with the defaults (``persona_settings``)."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read persona settings")
        with self._uow(context_for(caller)) as tx:
            found = tx.switches(persona_id).persona
        if found is None:
            raise NotFound("persona not found")
        return found

    def persona_settings(self, team_id: str, persona_id: str) -> Persona:
        """For the service's own jobs (extraction): the persona or its defaults."""
        with self._uow(system_context(team_id)) as tx:
            found = tx.switches(persona_id).persona
        return found or Persona(persona_id=persona_id, team_id=team_id)

    def put_team_settings(self, caller: Caller, request: PutTeamSettings) -> TeamSettings:
        """Team admins. ``request.retention`` None: the team's retention stays as it is."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins change team settings")
        with self._uow(context_for(caller)) as tx:
            rule = request.retention
            if rule is None:
                current = tx.switches(None).team
                rule = current.retention if current else RetentionRules()
            return tx.put_team_settings(
                TeamSettings(
                    team_id=caller.team_id, memory_enabled=request.memory_enabled, retention=rule
                )
            )

    def get_team_settings(self, caller: Caller) -> TeamSettings:
        """Team admins: the team's settings, or the defaults when never configured."""
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins read team settings")
        with self._uow(context_for(caller)) as tx:
            found = tx.switches(None).team
        return found or TeamSettings(team_id=caller.team_id)
