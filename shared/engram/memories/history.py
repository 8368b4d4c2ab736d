"""What a memory said over time: its history (versions and audit), a restore of an earlier
version, and reads as of a past moment (``engram.memories.versions``).

Who may read a memory's history is who may read the memory (``lifecycle.history_visible``),
also after it was deleted (judged by its last version). Who may restore is who may edit it:
its owner, and team admins for the persona and ``persona_user`` memories they manage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from engram.errors import Forbidden, InvalidInput, NotFound
from engram.identity import Caller
from engram.memories import rules, writes
from engram.memories.changes import ChangeProposal
from engram.memories.core import MemoryCore
from engram.memories.lifecycle import check_version, history_visible, last_known
from engram.memories.models import Memory, RecallRequest, ReviewAction, Scope, Status
from engram.memories.ports import AccessContext, MemoryTx
from engram.memories.privacy import context_for
from engram.memories.recall import rank_in_memory
from engram.memories.versions import DELETED, VersionPage


@dataclass(frozen=True, slots=True)
class MemoryHistory:
    """One page of a memory's versions (oldest first) and its whole audit trail."""

    memory_id: str
    page: VersionPage
    actions: list[ReviewAction]
    #: the change proposal waiting for review about it, if any
    pending_change: ChangeProposal | None = None


class MemoryHistories:
    """History, restore and as-of reads over the shared ``core``."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core

    def moment(self, as_of_ms: int) -> datetime:
        """``asOf`` (epoch ms, not negative: the edge checks) as a time; ``InvalidInput``
        when it is in the future."""
        if as_of_ms > self._core.clock.now_ms():
            raise InvalidInput("asOf", "is in the future; give a past moment in epoch ms")
        return datetime.fromtimestamp(as_of_ms / 1000, UTC)

    def _subject(self, tx: MemoryTx, memory_id: str) -> Memory | None:
        """The memory as it is, else as its last version left it (deleted)."""
        current = tx.get(memory_id)
        if current is not None:
            return current
        latest = tx.version(memory_id, None)
        return None if latest is None else latest.as_memory()

    def history(
        self, caller: Caller, memory_id: str, *, after: int = 0, limit: int = 50
    ) -> MemoryHistory:
        """One page of versions after version ``after``, and the audit trail, oldest first,
        also after the memory was deleted. ``NotFound`` for what the caller may not see."""
        audit = AccessContext(team_id=caller.team_id, user_id=caller.user_id, elevated=True)
        with self._core.uow(audit) as tx:
            actions = tx.list_actions(memory_id)
            subject = self._subject(tx, memory_id) or last_known(actions, caller.team_id)
            if subject is None or not history_visible(context_for(caller), subject):
                raise NotFound("memory not found")
            page = tx.versions(memory_id, after=after, limit=limit)
            pending = tx.change_for(memory_id)
        return MemoryHistory(memory_id, page, actions, pending)

    def get_as_of(self, caller: Caller, memory_id: str, as_of_ms: int) -> Memory:
        """The memory as it was at ``as_of_ms``: ``NotFound`` when it did not exist then
        (before its first recorded version, or deleted)."""
        at = self.moment(as_of_ms)
        core = self._core
        with core.uow(context_for(caller)) as tx:
            core.visible(caller, tx, self._subject(tx, memory_id))
            version = tx.version_at(memory_id, at)
        if version is None or version.status == DELETED:
            raise NotFound(f"memory {memory_id} had no recorded version at asOf={as_of_ms}")
        return version.as_memory()

    def recall_as_of(self, tx: MemoryTx, request: RecallRequest, at: datetime) -> list[Memory]:
        """What a recall of ``request`` would have answered at ``at``, from the versions
        then current (keyword ranking: past values have no embeddings)."""
        active = [
            v.as_memory()
            for v in tx.versions_current_at(request, at)
            if v.status == Status.ACTIVE.value
        ]
        return rank_in_memory(active, request.query, request.limit)

    def restore(
        self,
        caller: Caller,
        memory_id: str,
        version: int,
        *,
        if_versions: frozenset[int] | None = None,
    ) -> Memory:
        """Make version ``version``'s key and value current as a new version (a deleted
        memory comes back, active). ``NotFound`` naming the version when it was never
        recorded (or retention removed it)."""
        core, ctx = self._core, context_for(caller)
        with core.uow(ctx) as tx:
            row = tx.lock(memory_id)
            subject = core.visible(caller, tx, row or self._subject(tx, memory_id))
            if subject.scope is Scope.PERSONA and not ctx.elevated:
                raise Forbidden("only team admins restore persona-scope memories")
            target = tx.version(memory_id, version)
            if target is None:
                raise NotFound(f"version {version} of memory {memory_id} does not exist")
            if row is not None:
                rules.check_editable(row)
                if (row.key, row.value) == (target.key, target.value):
                    check_version(row, if_versions)
                    return row  # already what that version says: no new version
            return writes.restore(
                tx,
                row,
                target,
                decided=core.decided(ctx, "restore"),
                if_versions=if_versions,
                quotas=core.quotas,
                embedded=core.embedded,
            )


__all__ = ["MemoryHistories", "MemoryHistory"]
