"""The service's own jobs: extraction proposals (validated like requests, deduplicated by
the rules in the unit of work of the write) and retention (archive, then hard-delete)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from engram.errors import InvalidInput
from engram.fields import Confidence, Identifier, MemoryKey, MemoryValue
from engram.identity import Caller
from engram.memories import writes
from engram.memories.core import MemoryCore
from engram.memories.models import Memory, NewMemory, Scope, Status
from engram.memories.privacy import system_context
from engram.memories.scopes import parse_scope, save_target
from engram.memories.tools import invalid_from

T = TypeVar("T")
_ID: TypeAdapter[str] = TypeAdapter(Identifier)
_KEY: TypeAdapter[str] = TypeAdapter(MemoryKey)
_VALUE: TypeAdapter[str] = TypeAdapter(MemoryValue)
_CONFIDENCE: TypeAdapter[float] = TypeAdapter(Confidence)


def _checked(adapter: TypeAdapter[T], value: object, field: str) -> T:
    """``value`` under the same field rule the request models use (for the service's own
    jobs, whose values come from queued data rather than a request model)."""
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        raise invalid_from(exc, prefix=field) from None


ProposalOutcome = Literal["created", "refreshed", "dropped"]


@dataclass(frozen=True)
class ProposalResult:
    """What ``BackgroundJobs.propose_outcome`` did, and the stored row (``None`` if dropped)."""

    outcome: ProposalOutcome
    memory: Memory | None


class BackgroundJobs:
    """Proposals from transcripts and retention, acting as the system within one team."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core

    def propose(  # noqa: PLR0917 - the extraction job's positional contract
        self,
        team_id: str,
        user_id: str,
        persona_id: str | None,
        key: str,
        value: str,
        confidence: float,
        source_channel_id: str | None,
        scope: Scope | str | None = None,
        *,
        not_erased_since_ms: int | None = None,
    ) -> Memory | None:
        """An extraction proposal (``pending_review``) learnt from ``user_id``'s transcript.
        Dropped (``None``) when an equal memory (same scope, owner, user, key and value) was
        rejected, or deleted or archived by a person; when the key is already active; when a
        person edited the key's pending proposal (their edit holds until it is reviewed); when
        a quota is full; when memory is switched off. A pending key nobody edited is
        refreshed; a key that retention archived becomes a proposal again.
        ``propose_outcome`` says which."""
        return self.propose_outcome(
            team_id,
            user_id,
            persona_id,
            key,
            value,
            confidence,
            source_channel_id,
            scope,
            not_erased_since_ms=not_erased_since_ms,
        ).memory

    def propose_outcome(  # noqa: PLR0917 - the same positional contract as ``propose``
        self,
        team_id: str,
        user_id: str,
        persona_id: str | None,
        key: str,
        value: str,
        confidence: float,
        source_channel_id: str | None,
        scope: Scope | str | None = None,
        *,
        not_erased_since_ms: int | None = None,
    ) -> ProposalResult:
        """``propose`` answering ``"created"`` (a new pending row), ``"refreshed"`` (the key's
        pending or archived row became this proposal) or ``"dropped"`` (``memory`` is then
        ``None``). The switches, the rules and the write run in one unit of work on the
        rows it locked, so created vs refreshed and every rule hold under concurrency.

        ``not_erased_since_ms`` (the extraction job's ``queued_at``): also ``"dropped"`` when
        the user was erased (``DELETE /v1/me``) at or after it — checked in the unit of work
        of the write, which waits for an erasure of the user in flight, so an erasure that
        lands between the job's own check and this write cannot leave a new pending row
        behind."""
        team = _checked(_ID, team_id, "teamId")
        user = _checked(_ID, user_id, "userId")
        persona = None if persona_id is None else _checked(_ID, persona_id, "personaId")
        key_s = _checked(_KEY, key, "key")
        value_s = _checked(_VALUE, value, "value")
        conf = _checked(_CONFIDENCE, confidence, "confidence")
        channel = source_channel_id
        if channel is not None:
            channel = _checked(_ID, channel, "sourceChannelId")
        system = Caller(user_id=user, team_id=team, is_team_admin=True, is_service=True)
        target = save_target(system, persona, parse_scope(scope))
        with self._core.uow(system_context(team, user)) as tx:
            if not self._core.enabled(tx.switches(persona)):
                return ProposalResult("dropped", None)
            memory = NewMemory(
                scope=target.scope,
                owner_id=target.owner_id,
                user_id=target.user_id,
                team_id=team,
                key=key_s,
                value=value_s,
                source_channel_id=channel,
                source_user_id=user,
                confidence=conf,
                status=Status.PENDING_REVIEW,
                **self._core.memory_embedding(key_s, value_s),
            )
            written = writes.propose(
                tx, memory, self._core.quotas, not_erased_since_ms=not_erased_since_ms
            )
        if written is None:
            return ProposalResult("dropped", None)
        row, created = written
        return ProposalResult("created" if created else "refreshed", row)

    def apply_retention(
        self,
        team_id: str,
        *,
        archive_after_days: int | None,
        delete_archived_after_days: int | None,
        now: int | datetime | None = None,
    ) -> dict[str, int]:
        """Archive active memories untouched for ``archive_after_days``; hard-delete archived
        ones untouched for ``delete_archived_after_days`` (``None``: never). ``now`` is epoch
        ms or a datetime (default: the clock)."""
        if now is None:
            now = self._core.clock.now_ms()
        when = now if isinstance(now, datetime) else datetime.fromtimestamp(now / 1000, UTC)
        never = datetime(1970, 1, 1, tzinfo=UTC)
        for field, days in (
            ("archiveAfterDays", archive_after_days),
            ("deleteArchivedAfterDays", delete_archived_after_days),
        ):
            if days is not None and (
                isinstance(days, bool) or not isinstance(days, int) or days < 1
            ):
                raise InvalidInput(field, "must be a positive number of days")
        with self._core.uow(system_context(team_id)) as tx:
            return tx.apply_retention(
                archive_before=when - timedelta(days=archive_after_days)
                if archive_after_days
                else never,
                delete_archived_before=(
                    when - timedelta(days=delete_archived_after_days)
                    if delete_archived_after_days
                    else never
                ),
            )
