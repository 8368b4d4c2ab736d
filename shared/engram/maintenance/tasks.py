"""The paged tasks of the maintenance job, and the loop they share.

Each task walks one list (the identity index, the retention policies, the erasure log) page by
page from its cursor, visits every item while the budget lasts, saves its cursor after each
page, and on its last page rewinds the cursor and counts one more cycle. A task stops with
``Stopped`` when the budget is spent (``cut_off``) or when it took its cap for this run
(``paused``); the next run goes on from the saved cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from engram.identity import Caller, parse_identity_id
from engram.insights.ports import FactSource, InsightsStore
from engram.maintenance.budget import Budget
from engram.maintenance.models import (
    ErasureCursor,
    ErasureRecord,
    InsightsCursor,
    OffsetCursor,
    PolicyCursor,
    RetentionPolicy,
    TaskReport,
)
from engram.maintenance.ports import (
    BehaviourMaintenance,
    ErasureLog,
    MemoryMaintenance,
    PersonaRetention,
    RetentionPolicySource,
)

T = TypeVar("T")


def identity_id(team_id: str, user_id: str) -> str:
    """The behavioural identity of a user (the same key the API uses)."""
    return Caller(user_id=user_id, team_id=team_id).identity_id


class Stopped(Exception):
    """The task stopped for this run; its report says why (``cut_off`` or ``paused``)."""


class Cycle(Protocol):
    """A task's cursor: how many times the task went through its whole list."""

    cycle: int


class KeyCursor(Protocol):
    """A cursor into a list in key order: the key of the last item visited (None: the start)."""

    cycle: int
    after: Any


class Keyed(Protocol):
    @property
    def key(self) -> Any: ...


KeyedT = TypeVar("KeyedT", bound=Keyed)
KeyedT_co = TypeVar("KeyedT_co", bound=Keyed, covariant=True)


class KeyedPages(Protocol[KeyedT_co]):
    """A list read in key order: the page after key ``after`` (None: the first), at most
    ``limit`` items; a page shorter than ``limit`` is the last one."""

    def __call__(self, *, after: Any, limit: int) -> Sequence[KeyedT_co]: ...


@dataclass
class TaskRun:
    """One task in one run: its budget, its report, how to save the cursors, the page size."""

    budget: Budget
    rep: TaskReport
    save: Callable[[], None]
    page_size: int

    def check(self) -> None:
        """Stop the task (``cut_off``) when the budget is spent."""
        if self.budget.exhausted():
            self.rep.cut_off = True
            raise Stopped

    def room(self, done: int, cap: int) -> int:
        """How many more items this task may take in this run (stops it at its cap)."""
        if done >= cap:
            self.rep.paused = True
            raise Stopped
        return cap - done

    def page_through(
        self,
        cur: Cycle,
        *,
        cap: int,
        fetch: Callable[[int], tuple[Sequence[T], bool]],
        visit: Callable[[T], None],
        end: Callable[[], None],
        turn: Callable[[], None] | None = None,
    ) -> None:
        """``fetch`` at most ``page_size`` items (fewer near ``cap`` items in this run) and
        whether this is the last page, ``visit`` each while the budget lasts, ``turn`` the
        page (a page cut short is fetched again), save the cursors; after the last page
        ``end`` rewinds the cursor and the cycle is complete."""
        done = 0
        while True:
            limit = min(self.page_size, self.room(done, cap))
            self.check()
            items, last = fetch(limit)
            for item in items:
                self.check()
                visit(item)
                done += 1
            if turn is not None:
                turn()
            if last:
                end()
                cur.cycle += 1
                self.rep.completed_cycle = True
                return
            self.save()

    def page_by_key(
        self,
        cur: KeyCursor,
        *,
        cap: int,
        pages: KeyedPages[KeyedT],
        visit: Callable[[KeyedT], None],
    ) -> None:
        """``page_through`` the list ``pages`` reads, after ``cur.after``; each item's key is
        the cursor before the item is visited (a failing item never blocks the list)."""

        def fetch(limit: int) -> tuple[Sequence[KeyedT], bool]:
            page = list(pages(after=cur.after, limit=limit))
            return page, len(page) < limit

        def one(item: KeyedT) -> None:
            cur.after = item.key
            visit(item)

        def restart() -> None:
            cur.after = None

        self.page_through(cur, cap=cap, fetch=fetch, visit=one, end=restart)


def walk_identities(
    run: TaskRun,
    store: BehaviourMaintenance,
    cur: OffsetCursor,
    *,
    active_before_ms: int | None,
    cap: int,
    visit: Callable[[str], bool],
) -> None:
    """Page through the identity index from ``cur``, visiting each identity once per cycle;
    ``visit`` returns True when it removed the identity from the index."""

    def fetch(limit: int) -> tuple[Sequence[str], bool]:
        ids, nxt = store.list_identities(
            active_before_ms=active_before_ms, cursor=cur.cursor, limit=limit
        )
        return ids, nxt == 0

    def one(ident: str) -> None:
        cur.cursor += 1  # past it before the call: a failing identity never blocks
        removed = visit(ident)
        run.rep.add("identities")
        if removed:
            cur.cursor -= 1  # the rest of the index moved up by one

    def restart() -> None:
        cur.cursor = 0

    run.page_through(cur, cap=cap, fetch=fetch, visit=one, end=restart)


def prune(
    run: TaskRun, store: BehaviourMaintenance, cur: OffsetCursor, *, before_ms: int, cap: int
) -> None:
    """Every identity: drop its observations older than ``before_ms``."""

    def visit(ident: str) -> bool:
        run.rep.add("observationsPruned", store.prune(ident, before_ms))
        return False

    walk_identities(run, store, cur, active_before_ms=None, cap=cap, visit=visit)


def sweep(
    run: TaskRun,
    store: BehaviourMaintenance,
    cur: OffsetCursor,
    *,
    now_ms: int,
    idle_since_ms: int,
    cap: int,
) -> None:
    """Identities idle since ``idle_since_ms``: delete their expired facts, and remove those
    with nothing left from the index."""

    def visit(ident: str) -> bool:
        run.rep.add("factsExpired", store.sweep_expired(ident, now_ms))
        if store.remove_if_empty(ident):
            run.rep.add("identitiesRemoved")
            return True
        return False

    walk_identities(run, store, cur, active_before_ms=idle_since_ms, cap=cap, visit=visit)


def retention(
    run: TaskRun,
    memories: MemoryMaintenance,
    policies: RetentionPolicySource,
    cur: PolicyCursor,
    *,
    now_ms: int,
    cap: int,
) -> None:
    """Every retention policy: apply it to its team or persona (``policiesUnsupported`` for a
    persona policy when the store has no per-persona retention)."""
    rep = run.rep

    def apply(policy: RetentionPolicy) -> None:
        if policy.persona_id is None:
            counts = memories.apply_retention(policy, now_ms)
        elif isinstance(memories, PersonaRetention):
            counts = memories.apply_persona_retention(policy, now_ms)
        else:
            rep.add("policiesUnsupported")
            return
        rep.add("policies")
        rep.add("memoriesArchived", counts.get("archived", 0))
        rep.add("memoriesDeleted", counts.get("deleted", 0))

    run.page_by_key(cur, cap=cap, pages=policies.list_policies, visit=apply)


def erasure(
    run: TaskRun,
    log: ErasureLog,
    cur: ErasureCursor,
    *,
    behaviour: BehaviourMaintenance | None,
    memories: MemoryMaintenance | None,
    now_ms: int,
    settle_ms: int,
    cap: int,
) -> None:
    """Every erasure not yet settled: purge what reappeared for its user in both stores; once
    ``settle_ms`` has passed since the erasure, mark it purged."""
    rep = run.rep

    def purge(record: ErasureRecord) -> None:
        team, user, erased_at = record.team_id, record.user_id, record.erased_at_ms
        if behaviour is not None:
            rep.add(
                "behaviourLeftovers",
                behaviour.purge_leftovers(identity_id(team, user), erased_at),
            )
        if memories is not None:
            rep.add("memoryLeftovers", memories.purge_user_before(team, user, erased_at))
        rep.add("erasuresChecked")
        if now_ms >= erased_at + settle_ms:
            log.mark_purged(team, user, erased_at)
            rep.add("erasuresSettled")

    run.page_by_key(cur, cap=cap, pages=log.pending_purges, visit=purge)


def insights(
    run: TaskRun,
    facts: FactSource,
    store: InsightsStore,
    cur: InsightsCursor,
    *,
    now_ms: int,
    min_users: int,
    cap: int,
) -> None:
    """Every identity: replace the user's contribution to their team's insights; after the
    last page, publish the cycle's aggregates (teams of at least ``min_users``)."""
    following = cur.cursor

    def fetch(limit: int) -> tuple[Sequence[str], bool]:
        nonlocal following
        ids, following = facts.identity_page(cur.cursor, limit)
        return ids, not following

    def contribute(ident: str) -> None:
        parsed = parse_identity_id(ident)
        # now_ms is before the facts are read: an erasure since then keeps them out
        if parsed is not None:
            rows = facts.contributions(ident, now_ms)
            store.contribute(*parsed, rows, cycle=cur.cycle, read_at_ms=now_ms)
        run.rep.add("identities")

    def turn() -> None:  # only after the whole page: replacing a contribution is idempotent
        cur.cursor = following

    def publish() -> None:
        published = store.publish(cycle=cur.cycle, min_users=min_users, now_ms=now_ms)
        run.rep.add("rowsPublished", published)

    run.page_through(cur, cap=cap, fetch=fetch, visit=contribute, end=publish, turn=turn)
