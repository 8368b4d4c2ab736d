"""Privacy rules (who may see and write which memory) as plain predicates, shared by the
service and the in-memory adapter (the PostgreSQL adapter enforces the same rules with
row-level security)."""

from __future__ import annotations

from engram.identity import Caller
from engram.memories.models import Memory, Persona, Scope
from engram.memories.ports import AccessContext


def context_for(caller: Caller) -> AccessContext:
    """Admins of the caller's team are elevated; everyone stays inside ``caller.team_id``."""
    return AccessContext(
        team_id=caller.team_id,
        user_id=caller.user_id,
        elevated=caller.can_administer_team(caller.team_id),
        surface=caller.surface,
    )


def system_context(team_id: str, user_id: str = "engram-system") -> AccessContext:
    """The service's own jobs (extraction, retention) act elevated within one team."""
    return AccessContext(team_id=team_id, user_id=user_id, elevated=True)


def can_see(
    ctx: AccessContext, team_id: str, scope: Scope, owner_id: str, user_id: str | None
) -> bool:
    """Persona rows are the team's to read (group access is checked against the persona)."""
    return _reaches(ctx, team_id, scope, owner_id, user_id, persona_rows=True)


def can_write(
    ctx: AccessContext, team_id: str, scope: Scope, owner_id: str, user_id: str | None
) -> bool:
    """Persona rows are written by elevated contexts only (team admins, the service)."""
    return _reaches(ctx, team_id, scope, owner_id, user_id, persona_rows=False)


def _reaches(
    ctx: AccessContext,
    team_id: str,
    scope: Scope,
    owner_id: str,
    user_id: str | None,
    *,
    persona_rows: bool,
) -> bool:
    """Within the context's team only: an elevated context reaches every row, anyone else
    their own ``user`` rows and their ``persona_user`` rows, and persona rows as
    ``persona_rows`` says."""
    if team_id != ctx.team_id:
        return False
    if ctx.elevated:
        return True
    if scope is Scope.USER:
        return owner_id == ctx.user_id
    if scope is Scope.PERSONA_USER:
        return user_id == ctx.user_id
    return persona_rows


def memory_visible(ctx: AccessContext, m: Memory) -> bool:
    return can_see(ctx, m.team_id, m.scope, m.owner_id, m.user_id)


def persona_allows(caller: Caller, persona: Persona | None) -> bool:
    """An unconfigured persona is open to the team; admins of the team always pass."""
    if persona is None or caller.can_administer_team(caller.team_id):
        return True
    return persona.allows(caller.groups)
