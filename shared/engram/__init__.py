"""Engram: long-term memory for chat assistants.

The stable top level (the names below, kept across releases) is imported lazily:
``import engram`` loads nothing heavy and connects to nothing; ``from engram import
RedisObservationLog`` imports redis-py only then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Observation": "engram.behaviour.models",
    "Fact": "engram.behaviour.models",
    "ObservationType": "engram.behaviour.models",
    "FactCategory": "engram.behaviour.models",
    "ExponentialDecay": "engram.behaviour.decay",
    "AdaptiveDecay": "engram.behaviour.decay",
    "consolidate": "engram.behaviour.consolidation",
    "format_memory_section": "engram.behaviour.prompt",
    "extract_tool_affinities": "engram.behaviour.affinity",
    "InMemoryObservationLog": "engram.adapters.inmemory_behaviour",
    "InMemoryFactRepository": "engram.adapters.inmemory_behaviour",
    "InMemoryCheckpointStore": "engram.adapters.inmemory_behaviour",
    "InMemoryBehaviourStore": "engram.adapters.inmemory_behaviour",
    "RedisObservationLog": "engram.adapters.redis_behaviour",
    "RedisFactRepository": "engram.adapters.redis_behaviour",
    "RedisCheckpointStore": "engram.adapters.redis_behaviour",
    "RedisBehaviourStore": "engram.adapters.redis_behaviour",
}

__all__ = [
    "AdaptiveDecay",
    "ExponentialDecay",
    "Fact",
    "FactCategory",
    "InMemoryBehaviourStore",
    "InMemoryCheckpointStore",
    "InMemoryFactRepository",
    "InMemoryObservationLog",
    "Observation",
    "ObservationType",
    "RedisBehaviourStore",
    "RedisCheckpointStore",
    "RedisFactRepository",
    "RedisObservationLog",
    "consolidate",
    "extract_tool_affinities",
    "format_memory_section",
]

if TYPE_CHECKING:
    from engram.adapters.inmemory_behaviour import (
        InMemoryBehaviourStore,
        InMemoryCheckpointStore,
        InMemoryFactRepository,
        InMemoryObservationLog,
    )
    from engram.adapters.redis_behaviour import (
        RedisBehaviourStore,
        RedisCheckpointStore,
        RedisFactRepository,
        RedisObservationLog,
    )
    from engram.behaviour.affinity import extract_tool_affinities
    from engram.behaviour.consolidation import consolidate
    from engram.behaviour.decay import AdaptiveDecay, ExponentialDecay
    from engram.behaviour.models import Fact, FactCategory, Observation, ObservationType
    from engram.behaviour.prompt import format_memory_section


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
