"""Fixtures for behavioural-memory unit tests: a fake clock and an observation factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engram.behaviour.models import Observation, ObservationType
from engram.clock import FakeClock

IDENTITY = "team-a:user-1"

MakeObs = Callable[..., Observation]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_obs(clock: FakeClock) -> MakeObs:
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
