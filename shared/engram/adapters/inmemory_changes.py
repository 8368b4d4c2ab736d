"""The change proposals of the in-memory store (``MemoryTx``'s change methods), mixed into
``InMemoryTx``: a table of changes by id, visible when their memory is."""

from __future__ import annotations

from typing import Any, Protocol

from engram.adapters.inmemory_rows import MISSING, matches
from engram.memories.changes import ChangeProposal, ChangeStatus
from engram.memories.cursors import decode_cursor
from engram.memories.models import Memory, MemoryFilter
from engram.memories.ports import AccessContext
from engram.memories.privacy import memory_visible


class _Tables(Protocol):
    rows: dict[str, Memory]
    changes: dict[str, ChangeProposal]


class ChangeMethods:
    """Needs the tables (``_s``: ``changes``, ``rows``), ``_ctx`` and the journal's
    ``_assign`` of ``InMemoryTx``."""

    _s: _Tables
    _ctx: AccessContext

    def _assign(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        raise NotImplementedError

    def _memory_of(self, change: ChangeProposal) -> Memory | None:
        row = self._s.rows.get(change.memory_id)
        if row is None or change.team_id != self._ctx.team_id:
            return None
        return row if memory_visible(self._ctx, row) else None

    def get_change(self, change_id: str) -> ChangeProposal | None:
        change = self._s.changes.get(change_id)
        return change if change is not None and self._memory_of(change) is not None else None

    def change_for(self, memory_id: str) -> ChangeProposal | None:
        for change in self._s.changes.values():
            if change.memory_id == memory_id and change.status is ChangeStatus.PENDING:
                return self.get_change(change.id)
        return None

    def list_changes(self, flt: MemoryFilter) -> list[tuple[ChangeProposal, Memory]]:
        any_status = flt.model_copy(update={"status": None})
        found = []
        for change in self._s.changes.values():
            row = self._memory_of(change)
            if change.status is ChangeStatus.PENDING and row and matches(row, any_status):
                found.append((change, row))
        found.sort(key=lambda pair: (pair[0].created_at, pair[0].id), reverse=True)
        if flt.cursor:
            when, after_id = decode_cursor(flt.cursor)
            found = [p for p in found if (p[0].created_at, p[0].id) < (when, after_id)]
        return found[: flt.limit + 1]

    def put_change(self, change: ChangeProposal) -> None:
        self._assign(self._s.changes, change.id, change)

    def _drop_changes(self, keep: Any) -> int:
        """Delete the changes ``keep(change)`` says no to; how many."""
        gone = [c for c in self._s.changes.values() if not keep(c)]
        for change in gone:
            self._assign(self._s.changes, change.id, MISSING)
        return len(gone)
