from __future__ import annotations

import pytest

from engram.api.models import MemoryOut


@pytest.fixture
def memory_out() -> MemoryOut:
    """A memory response with every field set (snake_case in Python, camelCase on the wire)."""
    return MemoryOut(
        id="m1",
        scope="persona_user",
        owner_id="p",
        user_id="u",
        key="k",
        value="v",
        source_channel_id="c",
        confidence=0.5,
        status="active",
        created_at=1,
        updated_at=2,
        version=3,
    )
