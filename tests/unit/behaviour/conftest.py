"""Fixtures for behavioural-memory unit tests: a fake clock and an observation factory."""

from __future__ import annotations

import pytest
from tests.support.observations import MakeObs, observation_factory

from engram.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_obs(clock: FakeClock) -> MakeObs:
    return observation_factory(clock)
