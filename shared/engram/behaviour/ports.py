"""The storage port of behavioural memory: ``BehaviourStore``, and its record types.

A backend implements the primitives of ``BehaviourStore`` (abstract methods); everything else
(``upsert``, ``delete_fact``, ``checkpoints``, ``append_many``, ``delete_unchanged``,
``export``, ``list_identities`` over its two page primitives, and an unfenced
``read_round``/``commit_round``) is derived from them once, here. A backend that can read a
round at once and commit it fenced overrides ``read_round`` and ``apply_round``.

The checkpoint is an *arrival sequence* (the cursor of the log), never client time, so a late
or same-millisecond observation is never skipped.

``ObservationLog``, ``FactRepository`` and ``CheckpointStore`` are the shapes of the three
separate stores the public ``engram.consolidate`` accepts (``engram.behaviour.separate``
resolves them to one ``BehaviourStore``); nothing else in the service uses them.
"""

from __future__ import annotations

import base64
import binascii
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, overload, runtime_checkable

from engram.behaviour.kinds import KINDS, LETTERS
from engram.behaviour.models import Fact, Observation
from engram.errors import InvalidInput


@runtime_checkable
class ObservationLog(Protocol):
    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        """Store observations not seen before (idempotent by id); return how many were new."""
        ...

    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        """Observations that arrived after ``checkpoint`` (arrival sequence), oldest first."""
        ...

    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        """Drop observations created before ``before_ms`` (only those with seq <= up_to_seq)."""
        ...


@runtime_checkable
class FactRepository(Protocol):
    def get(self, identity_id: str) -> list[Fact]: ...

    def upsert(self, identity_id: str, fact: Fact) -> None: ...

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None: ...

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int: ...


@runtime_checkable
class CheckpointStore(Protocol):
    def get(self, identity_id: str) -> int | None: ...

    def set(self, identity_id: str, value: int) -> None: ...


class KeyGroup(NamedTuple):
    """The observations of one round that map to one fact subject (an immutable record; a
    named tuple because a round builds one per distinct key)."""

    category: str  # the FactCategory member for a built-in kind
    subject: str
    label: str
    count: int  # type: ignore[assignment]  # shadows tuple.count: the field is the API
    successes: int = 0
    failures: int = 0
    max_seq: int = 0

    def quality(self) -> float:
        """How well the observations went: a paired kind's share of its pair's observations
        (tool affinity = s/(s+f), tool avoidance = f/(s+f)), every other kind 1.0."""
        return quality(self.count, self.successes, self.failures)


def quality(count: int, successes: int, failures: int) -> float:
    """``KeyGroup.quality`` from its fields: ``count`` over the pair's observations, or 1.0
    for an unpaired kind (no successes or failures)."""
    total = successes + failures
    return count / total if total else 1.0


@dataclass(slots=True)
class RoundInput:
    """Everything one consolidation round reads, in one go."""

    cursor: int
    version: int
    facts: list[Fact]
    groups: list[KeyGroup] = field(default_factory=list)
    observation_count: int = 0
    max_seq: int = 0
    max_created_at: int = 0
    token: Any = None  # store-specific data the commit needs back (e.g. what was read)

    @classmethod
    def of_pending(
        cls,
        pending: Sequence[Observation],
        *,
        cursor: int,
        version: int,
        facts: list[Fact],
        token: Any = None,
    ) -> RoundInput:
        """The round over ``pending`` (the observations after ``cursor``), grouped by key."""
        return cls(
            cursor=cursor,
            version=version,
            facts=facts,
            groups=aggregate(pending),
            observation_count=len(pending),
            max_seq=max((o.seq or 0 for o in pending), default=cursor),
            max_created_at=max((o.created_at for o in pending), default=0),
            token=token,
        )


@dataclass(frozen=True, slots=True)
class RoundWrite:
    """What one consolidation round writes over what it ``read``: facts to upsert and to
    delete, the new cursor ``read.max_seq``, and the bounds of the two prunes."""

    read: RoundInput
    upserts: Sequence[Fact]
    deletes: Sequence[str]
    prune_before_ms: int
    hard_prune_before_ms: int
    now_ms: int


def groups_of(
    counts: Iterable[tuple[str, str, int, int]], labels: Mapping[str, str]
) -> list[KeyGroup]:
    """The key groups of a round from ``(letter, log key, count, max seq)`` entries and the
    stored labels by log key (``ObservationKind.log_key``): one group per subject; the two
    kinds of a pair counted together by key, each with its own group when it has any
    observation. Entries of a letter no kind has are left out."""
    groups: list[KeyGroup] = []
    append = groups.append
    make = KeyGroup._make
    kind_of = LETTERS.get
    label_of = labels.get
    tallies: dict[tuple[str, str], list[int]] = {}  # (succeeding kind, key) -> [s, f, seq]
    for letter, log_key, count, max_seq in counts:
        kind = kind_of(letter)
        if kind is None:
            continue
        if kind.counterpart is None:
            category = kind.fact.category
            label = label_of(log_key) or kind.label_from_key(log_key[len(category) + 1 :])
            append(make((category, log_key, label, count, 0, 0, max_seq)))
            continue
        lead = kind.name if kind.succeeds else kind.counterpart
        tally = tallies.get((lead, log_key))
        if tally is None:
            tally = tallies[(lead, log_key)] = [0, 0, 0]
        tally[0 if kind.succeeds else 1] += count
        tally[2] = max(tally[2], max_seq)
    for (lead, key), (succ, fail, max_seq) in tallies.items():
        success = KINDS[lead]
        label = label_of(key) or success.label_from_key(key)
        if succ:
            category = success.fact.category
            append(make((category, f"{category}:{key}", label, succ, succ, fail, max_seq)))
        if fail:
            category = KINDS[success.counterpart or ""].fact.category
            append(make((category, f"{category}:{key}", label, fail, succ, fail, max_seq)))
    return groups


def aggregate(pending: Iterable[Observation]) -> list[KeyGroup]:
    """Group observations by fact key (what the Redis log's pending aggregate holds)."""
    counts: dict[tuple[str, str], list[int]] = {}  # (letter, log key) -> [count, max seq]
    labels: dict[str, str] = {}
    kinds = KINDS
    for obs in pending:
        kind = kinds[obs.type]
        md = obs.metadata
        log_key = kind.log_key(md)
        seq = obs.seq or 0
        entry = counts.get((kind.letter, log_key))
        if entry is None:
            counts[(kind.letter, log_key)] = [1, seq]
        else:
            entry[0] += 1
            entry[1] = max(entry[1], seq)
        if kind.label is not None:
            labels[log_key] = kind.label(md)
    return groups_of(((k[0], k[1], c, s) for k, (c, s) in counts.items()), labels)


def encode_identity_cursor(score: float, identity_id: str) -> str:
    """An opaque keyset cursor: the (last activity, id) of the last identity of a page."""
    raw = f"{score!r}\x1f{identity_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_identity_cursor(cursor: str) -> tuple[float, str]:
    """The (last activity, id) of an identity cursor; ``InvalidInput("cursor")`` if malformed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        score_text, identity_id = raw.split("\x1f", 1)
        score = float(score_text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput("cursor", "is not a cursor returned by list_identities") from exc
    if not math.isfinite(score) or not identity_id:
        raise InvalidInput("cursor", "is not a cursor returned by list_identities")
    return score, identity_id


def offset_answer(ids: list[str], offset: int, limit: int) -> tuple[list[str], int]:
    """The ids of an offset page and the offset after it (``0`` when the page is the last)."""
    return ids, (offset + len(ids) if len(ids) == limit else 0)


def keyset_answer(page: Sequence[tuple[str, float]], limit: int) -> tuple[list[str], str]:
    """The ids of a keyset page and the cursor after it (``""`` when the page is the last)."""
    ids = [member for member, _ in page]
    if len(page) < limit:
        return ids, ""
    return ids, encode_identity_cursor(page[-1][1], page[-1][0])


def page_after(
    rows: Iterable[tuple[str, float]], after: tuple[float, str], limit: int
) -> list[tuple[str, float]]:
    """The first ``limit`` of ``rows`` (sorted by (score, id)) strictly after ``after``."""
    out: list[tuple[str, float]] = []
    score, identity_id = after
    for member, member_score in rows:
        if member_score > score or (member_score == score and member > identity_id):
            out.append((member, member_score))
            if len(out) == limit:
                break
    return out


class CheckpointView:
    """The checkpoint of a ``BehaviourStore`` with the ``CheckpointStore`` methods."""

    __slots__ = ("store",)

    def __init__(self, store: BehaviourStore) -> None:
        self.store = store

    def get(self, identity_id: str) -> int | None:
        return self.store.get_checkpoint(identity_id)

    def set(self, identity_id: str, value: int) -> None:
        self.store.set_checkpoint(identity_id, value)

    def behaviour_store(self) -> BehaviourStore:
        return self.store


class BehaviourStore(ABC):
    """One backing store for everything behavioural memory keeps (Redis or in-memory).

    Subclasses implement the abstract primitives; the other methods are derived from them.
    The derived ``read_round``/``apply_round`` are correct for one round at a time (a crash
    between writing facts and the checkpoint never reinforces twice: each fact remembers the
    arrival sequence it was reinforced up to); a backend overrides them to read at once and
    to commit only if nothing changed since the read (then concurrent rounds are safe too).
    """

    # --- the observation log ----------------------------------------------------------
    @abstractmethod
    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        """Store observations not seen before (idempotent by id); return how many were new."""

    @abstractmethod
    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        """Observations that arrived after ``checkpoint`` (arrival sequence), oldest first."""

    @abstractmethod
    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        """Drop observations created before ``before_ms`` (only those with seq <= up_to_seq,
        leaving an idempotency tombstone; without it, tombstones older than that go too)."""

    # --- facts and the checkpoint ------------------------------------------------------
    @abstractmethod
    def get(self, identity_id: str) -> list[Fact]:
        """The stored facts (stored, not decayed, confidence)."""

    @abstractmethod
    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None: ...

    @abstractmethod
    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int: ...

    @abstractmethod
    def get_checkpoint(self, identity_id: str) -> int | None: ...

    @abstractmethod
    def set_checkpoint(self, identity_id: str, value: int) -> None:
        """Set the cursor; observations up to it are never consolidated again."""

    # --- the identity ------------------------------------------------------------------
    @abstractmethod
    def erase(self, identity_id: str) -> dict[str, int]:
        """Delete everything of the identity; counts of the observations and facts removed."""

    @abstractmethod
    def remove_if_empty(self, identity_id: str) -> bool:
        """Atomically drop an identity that holds nothing; False (nothing changed) otherwise."""

    @abstractmethod
    def identities_at(
        self, offset: int, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], int]:
        """``list_identities`` from an offset (both checked): the page and the next offset."""

    @abstractmethod
    def identities_after(
        self, cursor: str, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], str]:
        """``list_identities`` after a keyset cursor (``limit`` checked): the page and the
        next cursor."""

    # --- derived -----------------------------------------------------------------------
    @overload
    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int = 0, limit: int = 100
    ) -> tuple[list[str], int]: ...

    @overload
    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: str, limit: int = 100
    ) -> tuple[list[str], str]: ...

    def list_identities(
        self, *, active_before_ms: int | None = None, cursor: int | str = 0, limit: int = 100
    ) -> tuple[list[str], int] | tuple[list[str], str]:
        """One page of the identity index, least recently active first (ties by id).

        ``cursor`` is either an int offset (``0`` = start; the next offset is returned, ``0``
        when done) or an opaque string (``""`` = start; the next string is returned, ``""``
        when done). String cursors are keyset cursors (last activity, id): stable under
        concurrent removals and additions — no identity indexed for the whole pass is
        skipped; one that becomes active again during the pass moves behind the cursor and
        may be listed twice. Offsets shift when earlier entries are removed.
        """
        if limit < 1:
            raise InvalidInput("limit", "must be at least 1")
        if isinstance(cursor, str):
            return self.identities_after(cursor, limit=limit, active_before_ms=active_before_ms)
        if cursor < 0:
            raise InvalidInput("cursor", "must be a non-negative offset")
        return self.identities_at(cursor, limit=limit, active_before_ms=active_before_ms)

    def upsert(self, identity_id: str, fact: Fact) -> None:
        self.upsert_batch(identity_id, [fact])

    def delete_fact(self, identity_id: str, fact_id: str) -> bool:
        return self.delete(identity_id, [fact_id]) == 1

    @property
    def checkpoints(self) -> CheckpointView:
        """The checkpoint as a ``CheckpointStore`` (``get``/``set``): ``get`` is the facts'."""
        return CheckpointView(self)

    def behaviour_store(self) -> BehaviourStore:
        return self

    def shares_backing_with(self, other: object) -> bool:
        """Whether ``other`` (a store or a view of one) stores the same data as this one."""
        return other is self or whole_store(other) is self

    def append_many(
        self, groups: Mapping[str, Sequence[Observation]]
    ) -> dict[str, int | Exception]:
        """``append`` for several identities: per identity, how many were new, or the
        exception its append raised (the others are appended all the same)."""
        out: dict[str, int | Exception] = {}
        for identity_id, observations in groups.items():
            try:
                out[identity_id] = self.append(identity_id, observations)
            except Exception as exc:  # reported per identity: the caller retries just those
                out[identity_id] = exc
        return out

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int:
        """Delete each of ``facts`` whose stored ``lastReinforcedAt`` and ``updatedAt`` still
        equal the given ones; returns how many were deleted. Derived: a check, then a delete
        (a backend makes it atomic)."""
        stored = {f.id: f for f in self.get(identity_id)}
        doomed = [
            f.id
            for f in facts
            if (s := stored.get(f.id)) is not None
            and (s.last_reinforced_at, s.updated_at) == (f.last_reinforced_at, f.updated_at)
        ]
        return self.delete(identity_id, doomed) if doomed else 0

    def export(self, identity_id: str) -> dict[str, Any]:
        """Everything stored for the identity (stored, not decayed, confidence)."""
        return {
            "identityId": identity_id,
            "checkpoint": self.get_checkpoint(identity_id),
            "observations": [o.model_dump(by_alias=True) for o in self.since(identity_id, None)],
            "facts": [
                f.model_dump(by_alias=True, exclude_none=True) for f in self.get(identity_id)
            ],
        }

    def read_round(self, identity_id: str) -> RoundInput:
        """Everything one consolidation round reads. The facts are the caller's to change
        (fresh objects, never the store's own)."""
        checkpoint = self.get_checkpoint(identity_id)
        return RoundInput.of_pending(
            self.since(identity_id, checkpoint),
            cursor=checkpoint or 0,
            version=0,
            facts=[f.evolve() for f in self.get(identity_id)],
        )

    def commit_round(
        self,
        identity_id: str,
        *,
        read: RoundInput,
        upserts: Sequence[Fact],
        deletes: Sequence[str],
        prune_before_ms: int,
        hard_prune_before_ms: int,
        now_ms: int,
    ) -> bool:
        """Write facts, deletes, the new cursor (``read.max_seq``) and prune, as one
        ``RoundWrite`` given to ``apply_round``; False when a fenced backend refused it."""
        write = RoundWrite(read, upserts, deletes, prune_before_ms, hard_prune_before_ms, now_ms)
        return self.apply_round(identity_id, write)

    def apply_round(self, identity_id: str, write: RoundWrite) -> bool:
        """Apply one round's writes. A fenced backend applies them only if the cursor and
        fact version are still those of ``write.read`` and returns False when fenced out;
        derived, it writes facts first and the checkpoint last, and returns True."""
        if write.upserts:
            self.upsert_batch(identity_id, write.upserts)
        if write.deletes:
            self.delete(identity_id, write.deletes)
        self.set_checkpoint(identity_id, write.read.max_seq)
        self.prune(identity_id, write.prune_before_ms, up_to_seq=write.read.max_seq)
        self.prune(identity_id, write.hard_prune_before_ms)
        return True


def whole_store(part: object) -> BehaviourStore | None:
    """The ``BehaviourStore`` that ``part`` is, or is a view of (its ``behaviour_store()``);
    None for any other object."""
    if isinstance(part, BehaviourStore):
        return part
    if isinstance(part, CheckpointView):
        return part.store
    of = getattr(part, "behaviour_store", None)
    store = of() if callable(of) else None
    return store if isinstance(store, BehaviourStore) else None
