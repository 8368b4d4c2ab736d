"""Scope rules: where a save goes, what a recall may see."""

from __future__ import annotations

from dataclasses import dataclass

from engram.errors import Forbidden, InvalidInput
from engram.identity import Caller
from engram.memories.models import Memory, Scope


@dataclass(frozen=True, slots=True)
class Target:
    scope: Scope
    owner_id: str
    user_id: str | None


def parse_scope(raw: object, field: str = "scope") -> Scope | None:
    if raw is None:
        return None
    if isinstance(raw, Scope):
        return raw
    if not isinstance(raw, str):
        raise InvalidInput(field, "must be one of user, persona, persona_user")
    try:
        return Scope(raw)
    except ValueError:
        raise InvalidInput(
            field, f"unknown scope {raw[:40]!r}; use user, persona or persona_user"
        ) from None


def save_target(caller: Caller, persona_id: str | None, scope: Scope | None) -> Target:
    """Default: no persona -> user scope; persona -> persona_user. An explicit ``scope`` may
    pick ``user`` with a persona active, or ``persona`` (team admins only)."""
    if scope is None:
        scope = Scope.PERSONA_USER if persona_id else Scope.USER
    if scope is Scope.USER:
        return Target(Scope.USER, caller.user_id, None)
    if not persona_id:
        raise InvalidInput("personaId", f"scope {scope.value} needs a personaId")
    if scope is Scope.PERSONA:
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins save persona-scope memories")
        return Target(Scope.PERSONA, persona_id, None)
    return Target(Scope.PERSONA_USER, persona_id, caller.user_id)


def target_of(memory: Memory) -> Target:
    return Target(memory.scope, memory.owner_id, memory.user_id)
