"""One observation factory for the behavioural-memory tests of every tier."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engram.behaviour.models import Observation, ObservationType
from engram.clock import FakeClock

IDENTITY = "team-a:user-1"

MakeObs = Callable[..., Observation]


def observation_factory(clock: FakeClock) -> MakeObs:
    """make_obs("tool_success", "get_account") / ("entity_access", ("account", "42", "Acme"))."""

    def make(
        kind: str, what: Any, *, at: int | None = None, identity: str = IDENTITY, **extra: Any
    ) -> Observation:
        t = ObservationType(kind)
        if t is ObservationType.TOOL_SUCCESS:
            md: dict[str, Any] = {"toolName": what, "durationMs": 10}
        elif t is ObservationType.TOOL_FAILURE:
            md = {"toolName": what, "durationMs": 10, "error": "boom"}
        elif t is ObservationType.ENTITY_ACCESS:
            etype, eid, *name = what
            md = {"entityType": etype, "entityId": eid}
            if name:
                md["entityName"] = name[0]
        else:
            md = {"domain": what, "query": f"about {what}"}
        return Observation(
            identity_id=identity,
            type=t,
            content=f"{kind} {what}",
            metadata=md,
            created_at=clock.now_ms() if at is None else at,
            **extra,
        )

    return make
