"""What the maintenance job needs from the rest of Engram, as ``typing.Protocol``.

The concrete stores satisfy these structurally (directly, or through the small bridges in
``engram.maintenance.bridges``); adapters for SQS/DynamoDB/PostgreSQL implement the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from engram.maintenance.models import ErasureRecord, QueueMessage, RetentionPolicy


class MaintenanceStateStore(Protocol):
    """One small JSON document that survives between runs (cursors, cycle counters)."""

    def get(self) -> dict[str, Any] | None: ...

    def set(self, state: dict[str, Any]) -> None: ...


class MaintenanceLease(Protocol):
    """At most one maintenance run at a time: a lease with a time to live, and the schedules
    of the runs that found it taken (so the next holder does their work)."""

    def acquire(self, ttl_ms: int) -> str | None:
        """A token if the lease was free (it is now held for ``ttl_ms``), else None."""
        ...

    def release(self, token: str) -> None:
        """Give the lease up, if ``token`` still holds it."""
        ...

    def add_pending(self, schedule: str) -> None:
        """Remember that a run of ``schedule`` was skipped."""
        ...

    def take_pending(self) -> set[str]:
        """The schedules skipped since the last call (and forget them)."""
        ...


class BehaviourMaintenance(Protocol):
    """Retention operations of the behavioural store, per identity, driven by its identity
    index (never by scanning the keyspace)."""

    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int = 0, limit: int = 100
    ) -> tuple[list[str], int]:
        """One page of identity ids, least recently active first, and the offset of the next
        page (0 when this was the last page). ``active_before_ms`` keeps only identities whose
        last activity is older than that."""
        ...

    def prune(self, identity_id: str, before_ms: int) -> int:
        """Drop observations created before ``before_ms``; how many were dropped. (The
        checkpoint - 7 days rule is applied by consolidation when it commits a round.)"""
        ...

    def sweep_expired(self, identity_id: str, now_ms: int) -> int:
        """Delete facts whose current (decayed) confidence is below the expiry threshold."""
        ...

    def remove_if_empty(self, identity_id: str) -> bool:
        """Remove the identity (index entry and keys) when it has no facts and no
        observations left; True when it was removed."""
        ...

    def purge_leftovers(self, identity_id: str, erased_at_ms: int) -> int:
        """Remove what reappeared for an erased identity and predates the erasure (e.g. an
        observation delivered late by SQS, and anything derived from it), keeping what the
        user created after coming back; how many items were removed."""
        ...


class MemoryMaintenance(Protocol):
    """Retention and erasure backstop of the explicit-memory store."""

    def apply_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        """A team's policy (``policy.persona_id`` None): archive active memories idle for
        ``archive_after_days``; hard-delete archived ones idle for
        ``delete_archived_after_days``; counts (``archived``, ``deleted``)."""
        ...

    def purge_user_before(self, team_id: str, user_id: str, before_ms: int) -> int:
        """Hard-delete the user's user and persona_user memories created at or before
        ``before_ms``; how many were deleted."""
        ...


@runtime_checkable
class PersonaRetention(Protocol):
    """Optional: retention for the memories of one persona (persona and persona_user rows)."""

    def apply_persona_retention(self, policy: RetentionPolicy, now: int) -> dict[str, int]:
        """The policy of ``policy.persona_id``, as ``MemoryMaintenance.apply_retention``."""
        ...


class RetentionPolicySource(Protocol):
    def list_policies(self, *, after: str | None, limit: int) -> Sequence[RetentionPolicy]:
        """Policies ordered by :attr:`RetentionPolicy.key`, those after ``after`` only; a page
        shorter than ``limit`` is the last one."""
        ...


class ErasureLog(Protocol):
    """Who was erased and when; written by ``DELETE /v1/me``, read by the job and by the
    extraction drain (a transcript queued before its user's erasure creates nothing)."""

    def record(self, team_id: str, user_id: str, at_ms: int) -> None: ...

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool:
        """True when the user was erased at or after ``since_ms``."""
        ...

    def pending_purges(
        self, *, after: tuple[int, str, str] | None, limit: int
    ) -> Sequence[ErasureRecord]:
        """Erasures not yet marked purged, ordered by :attr:`ErasureRecord.key`, those after
        ``after`` only; a page shorter than ``limit`` is the last one."""
        ...

    def mark_purged(self, team_id: str, user_id: str, at_ms: int) -> None:
        """The erasure at ``at_ms`` needs no more purging (it leaves ``pending_purges``)."""
        ...


class TranscriptQueue(Protocol):
    """The extraction queue (SQS in AWS, the in-process stand-in locally)."""

    def receive(self, max_messages: int) -> list[QueueMessage]: ...

    def delete(self, receipt: str) -> None: ...

    def release(self, receipt: str, delay_s: int) -> None:
        """Return the message to the queue, visible again after ``delay_s`` seconds."""
        ...

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        """Copy the message to the dead-letter queue with ``reason``; the job deletes the
        original afterwards."""
        ...
