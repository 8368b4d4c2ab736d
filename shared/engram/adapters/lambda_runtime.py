"""What a scheduled handler reads from the Lambda runtime's context object."""

from __future__ import annotations

from typing import Any


def remaining_ms_of(context: Any) -> int | None:
    """The invocation's remaining time (``context.get_remaining_time_in_millis()``), or None
    when the context has none (a test's or the local timer's)."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(getter):
        return None
    value = getter()
    return int(value) if isinstance(value, int | float) else None
