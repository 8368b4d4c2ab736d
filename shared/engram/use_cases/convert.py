"""Domain objects as API response models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.api.models import FactOut, MemoryActionOut, MemoryOut
from engram.behaviour.models import Fact
from engram.memories.models import Memory, ReviewAction


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
    )


def action_out(action: ReviewAction) -> MemoryActionOut:
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
