from __future__ import annotations

import pytest
from tests.unit.extraction.fakes import FakeSink


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()
