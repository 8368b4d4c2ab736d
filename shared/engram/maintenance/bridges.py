"""Bridges from the concrete domain stores to the maintenance ports.

* :class:`BehaviourStoreMaintenance` — over a behavioural store (``InMemoryBehaviourStore``,
  ``RedisBehaviourStore``) plus the decay strategy: the job's per-identity operations.
* :class:`MemoryStoreMaintenance` — over the memory service (team retention) and its
  memory store, a unit of work (persona retention, erasure backstop).

Pure domain: they only call the stores' public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from engram.behaviour.consolidation import sweep_expired
from engram.behaviour.decay import DecayStrategy
from engram.behaviour.ports import BehaviourStore
from engram.identity import SERVICE_USER_PREFIX, parse_identity_id
from engram.insights.models import Contribution, contributions
from engram.maintenance.models import RetentionPolicy
from engram.memories import writes
from engram.memories.background import BackgroundJobs
from engram.memories.models import Memory, MemoryFilter, Scope, Status
from engram.memories.ports import MemoryChange, MemoryTx, UnitOfWork, list_all
from engram.memories.privacy import system_context


class BehaviourStoreMaintenance:
    """``BehaviourMaintenance`` over a behavioural store and a decay strategy."""

    def __init__(self, store: BehaviourStore, decay: DecayStrategy) -> None:
        self._store = store
        self._decay = decay

    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int = 0, limit: int = 100
    ) -> tuple[list[str], int]:
        return self._store.list_identities(
            active_before_ms=active_before_ms, cursor=cursor, limit=limit
        )

    def prune(self, identity_id: str, before_ms: int) -> int:
        return self._store.prune(identity_id, before_ms)

    def sweep_expired(self, identity_id: str, now_ms: int) -> int:
        return sweep_expired(identity_id, facts=self._store, decay=self._decay, now=now_ms)

    def remove_if_empty(self, identity_id: str) -> bool:
        return self._store.remove_if_empty(identity_id)

    # --- FactSource (team insights) -----------------------------------------------------------
    def identity_page(self, cursor: str, limit: int) -> tuple[list[str], str]:
        """A keyset page of the identity index (stable while identities come and go)."""
        return self._store.list_identities(cursor=cursor, limit=limit)

    def contributions(self, identity_id: str, now_ms: int) -> list[Contribution]:
        """What the identity's user contributes to their team's insights: nothing for an id
        that is not ``<team>:<user>`` or for a service acting as itself."""
        parsed = parse_identity_id(identity_id)
        if parsed is None or parsed[1].startswith(SERVICE_USER_PREFIX):
            return []
        facts = self._store.get(identity_id)
        current = [self._decay.apply(f, now_ms) for f in facts]
        return contributions(facts, current, self._decay.expiry_threshold)

    def purge_leftovers(self, identity_id: str, erased_at_ms: int) -> int:
        observations = self._store.since(identity_id, None)
        if any(o.created_at > erased_at_ms for o in observations):
            # The user came back: remove only what predates the erasure.
            return self._store.prune(identity_id, erased_at_ms + 1)
        if not observations and not self._store.get(identity_id):
            return 0
        return sum(self._store.erase(identity_id).values())


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class MemoryStoreMaintenance:
    """``MemoryMaintenance`` + ``PersonaRetention`` over the memory service and its store."""

    def __init__(self, service: BackgroundJobs, store: UnitOfWork) -> None:
        self._service = service
        self._store = store

    def apply_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        return self._service.apply_retention(
            policy.team_id,
            archive_after_days=policy.archive_after_days,
            delete_archived_after_days=policy.delete_archived_after_days,
            now=now,
        )

    def apply_persona_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        """Archive active persona/persona_user rows of ``policy.persona_id`` idle for
        ``archive_after_days``; delete archived ones idle for ``delete_archived_after_days``."""
        if policy.persona_id is None:
            raise ValueError("a persona's retention policy names its persona")
        team_id, persona_id = policy.team_id, policy.persona_id
        when = _when(now)
        counts = {"archived": 0, "deleted": 0}

        def delete(tx: MemoryTx, row: Memory) -> bool:
            return writes.delete(tx, row)

        def archive(tx: MemoryTx, row: Memory) -> bool:
            return writes.edit(tx, row, MemoryChange(status=Status.ARCHIVED)) is not None

        steps: tuple[tuple[int | None, Status, str, Callable[[MemoryTx, Memory], bool]], ...] = (
            (policy.delete_archived_after_days, Status.ARCHIVED, "deleted", delete),
            (policy.archive_after_days, Status.ACTIVE, "archived", archive),
        )
        with self._store(system_context(team_id)) as tx:
            for days, status, counted, act in steps:  # deletes first: a row archived now stays
                if days is None:
                    continue
                idle = MemoryFilter(
                    team_id=team_id,
                    persona_id=persona_id,
                    status=status,
                    updated_before=when - timedelta(days=days),
                )
                for row in list_all(tx, idle):
                    locked = tx.lock(row.id)
                    counts[counted] += int(locked is not None and act(tx, locked))
        return counts

    def purge_user_before(self, team_id: str, user_id: str, before_ms: int) -> int:
        """Delete what erasure deletes that was created up to ``before_ms``: the user's rows
        and the persona rows learnt from them."""
        cutoff = _when(before_ms)
        with self._store(system_context(team_id, user_id)) as tx:
            rows = [
                row
                for flt in (
                    MemoryFilter(team_id=team_id, scope=Scope.USER, owner_id=user_id),
                    MemoryFilter(team_id=team_id, scope=Scope.PERSONA_USER, user_id=user_id),
                    MemoryFilter(team_id=team_id, scope=Scope.PERSONA, source_user_id=user_id),
                )
                for row in list_all(tx, flt)
            ]
            doomed = [r for r in rows if r.created_at <= cutoff]
            return sum(int(writes.delete(tx, r, erasing=True)) for r in doomed)
