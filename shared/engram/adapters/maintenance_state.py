"""The maintenance job's persisted cursors (``engram.maintenance.ports.MaintenanceStateStore``)
as one JSON string in Redis: ``{prefix}:maintenance:state`` (no TTL).

Losing it costs only a repeated pass (every step of the job is idempotent), so by default a
Redis failure does not stop the run: ``get`` answers "no state" and ``set`` is dropped, both
logged; the PostgreSQL-backed tasks (retention, erasure, extraction) still run while Redis is
down. ``strict=True`` raises instead.
"""

from __future__ import annotations

import json
import logging
from typing import Any

_log = logging.getLogger("engram.adapters.maintenance_state")


class RedisMaintenanceState:
    def __init__(self, client: Any, *, prefix: str = "engram", strict: bool = False) -> None:
        self.client = client
        self.key = f"{prefix}:maintenance:state"
        self.strict = strict

    def get(self) -> dict[str, Any] | None:
        try:
            raw = self.client.get(self.key)
        except Exception:
            if self.strict:
                raise
            _log.warning("maintenance state unreadable; starting a fresh pass", exc_info=True)
            return None
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return {"unreadable": True}  # the job replaces it and reports stateReset
        return value if isinstance(value, dict) else {"unreadable": True}

    def set(self, state: dict[str, Any]) -> None:
        text = json.dumps(state, separators=(",", ":"), sort_keys=True)
        try:
            self.client.set(self.key, text)
        except Exception:
            if self.strict:
                raise
            _log.warning("maintenance state not saved", exc_info=True)
