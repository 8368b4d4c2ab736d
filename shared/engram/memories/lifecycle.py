"""The facts of the explicit-memory lifecycle that the rules (``engram.memories.rules``), the
writes and both stores share: who a memory is about, the audit row of a decision, the
suppression digest, quotas, and who may read a memory's history.

* A person's decision — an admin approving or rejecting a proposal, an owner or admin editing,
  archiving or deleting a memory — is an :class:`AuditStamp`; its audit row (with before/after
  copies) is written in the unit of work of the change.
* A deletion or an archive by a person is also remembered as a *suppression*: a SHA-256 digest
  of the key and value (never their text) under the memory's team, scope, owner and user, so
  an equal proposal is not made again. Retention and erasure record none.
* Quotas count a key's live rows (``LIVE_STATUSES``): per user (their ``user`` and
  ``persona_user`` rows, whatever the persona id), per persona (its ``persona`` and
  ``persona_user`` rows) and per team, on counters the write's unit of work has locked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engram.errors import PreconditionFailed, QuotaExceeded
from engram.memories.access import AccessContext
from engram.memories.keys import canonical_key
from engram.memories.models import (
    PROPOSAL_STATUSES,
    Memory,
    NewMemory,
    ReviewAction,
    Scope,
    Status,
)
from engram.settings import env_name

QuotaKind = Literal["team", "persona", "user"]
#: Retry-After of a quota refusal: space frees only when memories are deleted or archived
QUOTA_RETRY_AFTER_S = 3600


@dataclass(frozen=True, slots=True)
class AuditStamp:
    """Who decided what, and when: the store turns it into the audit row of the change."""

    id: str
    actor_id: str
    action: str
    at: datetime


def check_version(row: Memory, if_versions: frozenset[int] | None) -> None:
    """``PreconditionFailed`` unless the row is at one of ``if_versions`` (None: any)."""
    if if_versions is not None and row.version not in if_versions:
        raise PreconditionFailed(
            f"the memory changed since it was read (it is at version {row.version})"
        )


def subject_user(memory: Memory | NewMemory) -> str | None:
    """The user a memory is about: the owner of a ``user`` memory, the user of a
    ``persona_user`` one, the user a ``persona`` memory was learnt from (if any)."""
    if memory.scope is Scope.USER:
        return memory.owner_id
    if memory.scope is Scope.PERSONA_USER:
        return memory.user_id
    return memory.source_user_id


def audit_row(
    stamp: AuditStamp, memory_id: str, before: Memory | None, after: Memory | None
) -> ReviewAction:
    subject = after or before
    assert subject is not None
    return ReviewAction(
        id=stamp.id,
        team_id=subject.team_id,
        memory_id=memory_id,
        actor_id=stamp.actor_id,
        action=stamp.action,
        before=before.to_json_dict() if before else None,
        after=after.to_json_dict() if after else None,
        at=stamp.at,
        about_user_id=subject_user(subject),
    )


def _digest(key: str, value: str) -> bytes:
    raw_key = key.encode()
    return hashlib.sha256(len(raw_key).to_bytes(4, "big") + raw_key + value.encode()).digest()


def suppression_digest(key: str, value: str) -> bytes:
    """SHA-256 of a key's canonical form (``engram.memories.keys``) and a value
    (length-prefixed, so no two pairs share a digest): a refused value stays refused under
    every spelling of its key."""
    return _digest(canonical_key(key), value)


def suppression_digests(key: str, value: str) -> list[bytes]:
    """The digests that refuse ``key`` and ``value``: the canonical one, and the digest of the
    key as spelt, which suppressions recorded before keys were canonical hold."""
    return list(dict.fromkeys((suppression_digest(key, value), _digest(key, value))))


# --- quotas ---------------------------------------------------------------------------------
_QUOTA_NAMES: dict[QuotaKind, tuple[str, str]] = {
    "team": ("memoriesPerTeam", "max_memories_per_team"),
    "persona": ("memoriesPerPersona", "max_memories_per_persona"),
    "user": ("memoriesPerUser", "max_memories_per_user"),
}


@dataclass(frozen=True, slots=True)
class QuotaSubject:
    kind: QuotaKind
    subject: str  # the persona or user id; "" for the team
    limit: int

    def exceeded(self) -> QuotaExceeded:
        name, setting = _QUOTA_NAMES[self.kind]
        return QuotaExceeded(
            f"quota {name} reached: at most {self.limit} memories; delete or archive some first",
            retry_after_s=QUOTA_RETRY_AFTER_S,
            details={"quota": name, "limit": self.limit, "setting": env_name(setting)},
        )


@dataclass(frozen=True, slots=True)
class Quotas:
    """Limits on live rows; ``None``: no limit of that kind."""

    per_user: int | None = None
    per_persona: int | None = None
    per_team: int | None = None

    def subjects(self, memory: NewMemory) -> list[QuotaSubject]:
        """The limited counters a new row counts toward, in lock order (team, persona, user)."""
        out: list[QuotaSubject] = []
        if self.per_team is not None:
            out.append(QuotaSubject("team", "", self.per_team))
        if self.per_persona is not None and memory.scope is not Scope.USER:
            out.append(QuotaSubject("persona", memory.owner_id, self.per_persona))
        user = memory.owner_id if memory.scope is Scope.USER else memory.user_id
        if self.per_user is not None and user is not None:
            out.append(QuotaSubject("user", user, self.per_user))
        return out


def counts_toward(memory: Memory, subject: QuotaSubject) -> bool:
    if memory.status is Status.REJECTED:
        return False
    if subject.kind == "team":
        return True
    if subject.kind == "persona":
        return memory.scope is not Scope.USER and memory.owner_id == subject.subject
    user = memory.owner_id if memory.scope is Scope.USER else memory.user_id
    return user == subject.subject


# --- history --------------------------------------------------------------------------------
def private_to_its_user(ctx: AccessContext, memory: Memory) -> bool:
    """A user's own ``user`` memory (active or archived) is theirs alone: team admins, who
    may read every row of the team, manage proposals (pending or rejected), ``persona`` and
    ``persona_user`` memories, not that one. True when ``ctx`` is not its owner."""
    return (
        memory.scope is Scope.USER
        and memory.owner_id != ctx.user_id
        and memory.status not in PROPOSAL_STATUSES
    )


def history_visible(ctx: AccessContext, memory: Memory) -> bool:
    """The owner sees the history of their memories (``user``, and ``persona_user`` of
    theirs); team admins see what they manage — proposals (pending or rejected), ``persona``
    and ``persona_user`` memories — but not a user's own ``user`` memory."""
    if memory.team_id != ctx.team_id:
        return False
    user = subject_user(memory) if memory.scope is not Scope.PERSONA else None
    if user == ctx.user_id:
        return True
    if not ctx.elevated:
        return False
    return not private_to_its_user(ctx, memory)


def last_known(actions: list[ReviewAction], team_id: str) -> Memory | None:
    """The memory as the latest audit row last saw it (its ``after``, else its ``before``)."""
    for action in reversed(actions):
        copy = action.after or action.before
        if copy is not None:
            return Memory.model_validate({**copy, "teamId": team_id})
    return None
