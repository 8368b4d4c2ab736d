"""Erasure leaves nothing of the identity in Redis; the identity index pages stably;
``Settings.observation_retention_days`` reaches consolidation."""

from __future__ import annotations

import random

import pytest
import redis
from tests.support.observations import IDENTITY, MakeObs
from tests.support.rounds import commit, one_round, plan
from tests.support.services import APP_PREFIX, RedisTarget

from engram import InMemoryBehaviourStore
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.ports import RoundInput
from engram.behaviour.service import BehaviourService
from engram.bootstrap import Container
from engram.clock import MS_PER_DAY, FakeClock
from engram.errors import InvalidInput
from engram.settings import Settings


def keys_of(target: RedisTarget, identity: str) -> list[bytes]:
    """Every key whose name holds the identity's hash tag (SCAN on every primary)."""
    escaped = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in identity)
    return target.key_names(f"*{{{escaped}}}*")


def assert_gone(store: RedisBehaviourStore, target: RedisTarget) -> None:
    """Nothing of the identity is left: no key, no entry in the identity index."""
    assert keys_of(target, IDENTITY) == []
    assert store.client.zscore(store.index_key, IDENTITY) is None


def stale_commit(store: RedisBehaviourStore, clock: FakeClock, read: RoundInput) -> bool:
    upserts, deletes = plan(read, clock)
    assert upserts
    return commit(store, read, clock, upserts=upserts, deletes=deletes)


def test_erase_leaves_no_key_and_no_index_entry(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    other = "team-a:user-2"
    store.append(IDENTITY, [make_obs("tool_success", "a"), make_obs("tool_failure", "b")])
    one_round(store, clock)
    clock.advance(days=9)  # some observations below the checkpoint become tombstones
    store.append(IDENTITY, [make_obs("entity_access", ("account", "1", "Acme"))])
    one_round(store, clock)
    store.append(IDENTITY, [make_obs("query_pattern", "revenue")])  # still pending
    store.append(other, [make_obs("tool_success", "a", identity=other)])
    names = {k.split(b":")[1] for k in keys_of(redis_target, IDENTITY)}
    assert names == {b"state", b"obs", b"obsid", b"obsts", b"obsgone", b"facts", b"pending"}

    assert store.erase(IDENTITY) == {"observations": 2, "facts": 3}

    assert_gone(store, redis_target)
    assert IDENTITY not in store.list_identities(limit=1000)[0]
    # the other identity is untouched
    assert keys_of(redis_target, other) != []
    assert store.list_identities()[0] == [other]
    # idempotent, and the store's read and retention paths create nothing for it
    assert store.erase(IDENTITY) == {"observations": 0, "facts": 0}
    assert store.read_round(IDENTITY).observation_count == 0
    assert store.delete_fact(IDENTITY, "fact:tool_affinity:a") is False
    assert store.prune(IDENTITY, clock.now_ms()) == 0
    assert store.remove_if_empty(IDENTITY) is True
    assert_gone(store, redis_target)


def test_a_consolidation_racing_an_erasure_writes_nothing_back(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    one_round(store, clock)  # cursor and version are no longer zero ...
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    read = store.read_round(IDENTITY)
    store.erase(IDENTITY)
    assert stale_commit(store, clock, read) is False
    # ... nor were they for the round read above: nothing, not even an index entry, is back
    assert_gone(store, redis_target)


def test_a_fresh_identity_racing_an_erasure_writes_nothing_back(
    store: RedisBehaviourStore, redis_target: RedisTarget, clock: FakeClock, make_obs: MakeObs
) -> None:
    # never consolidated: cursor 0 and version 0 before and after the erasure alike
    store.append(IDENTITY, [make_obs("tool_success", "a")])
    read = store.read_round(IDENTITY)
    assert (read.cursor, read.version) == (0, 0)
    store.erase(IDENTITY)
    assert stale_commit(store, clock, read) is False
    assert_gone(store, redis_target)


def test_string_cursor_pages_stably_under_removals_and_additions(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    ids = [f"user-{i:02d}" for i in range(10)]
    for ident in ids:
        store.append(ident, [make_obs("tool_success", "t", identity=ident)])
        clock.advance(seconds=1)
    page, nxt = store.list_identities(cursor="", limit=3)
    assert page == ids[:3]
    assert nxt
    # removals before and after the cursor, and a brand-new identity, between two pages
    store.erase(ids[0])
    store.erase(ids[2])
    store.erase(ids[5])
    store.append("late", [make_obs("tool_success", "t", identity="late")])
    seen = list(page)
    while nxt:
        page, nxt = store.list_identities(cursor=nxt, limit=3)
        seen += page
    assert seen == ids[:5] + ids[6:] + ["late"]  # nothing skipped, nothing twice
    # an int offset would have skipped identities here (shown for contrast)
    assert store.list_identities(cursor=3, limit=3)[0] == [ids[6], ids[7], ids[8]]


def test_string_cursor_breaks_ties_by_id_beyond_one_batch(
    store: RedisBehaviourStore, make_obs: MakeObs
) -> None:
    ids = sorted(f"same-ms-{i}" for i in range(25))  # all active in the same millisecond
    for ident in reversed(ids):
        store.append(ident, [make_obs("tool_success", "t", identity=ident)])
    seen: list[str] = []
    nxt = ""
    pages = 0
    while True:
        page, nxt = store.list_identities(cursor=nxt, limit=4)
        seen += page
        pages += 1
        if not nxt:
            break
    assert seen == ids
    assert pages == 7


def test_string_cursor_respects_active_before(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    for ident in ("a", "b", "c"):
        store.append(ident, [make_obs("tool_success", "t", identity=ident)])
        clock.advance(days=1)
    cutoff = clock.now_ms() - MS_PER_DAY - 1
    page, nxt = store.list_identities(active_before_ms=cutoff, cursor="", limit=1)
    assert page == ["a"]
    page, nxt = store.list_identities(active_before_ms=cutoff, cursor=nxt, limit=1)
    assert page == ["b"]
    assert store.list_identities(active_before_ms=cutoff, cursor=nxt, limit=1) == ([], "")


@pytest.mark.parametrize("bad", ["not a cursor!", "Zm9v", "eA"])
def test_a_malformed_cursor_is_a_validation_error(store: RedisBehaviourStore, bad: str) -> None:
    with pytest.raises(InvalidInput) as err:
        store.list_identities(cursor=bad)
    assert err.value.field == "cursor"
    with pytest.raises(InvalidInput) as err:
        store.list_identities(cursor=-1)
    assert err.value.field == "cursor"


def test_redis_and_in_memory_page_alike_through_random_churn(
    store: RedisBehaviourStore, clock: FakeClock, make_obs: MakeObs
) -> None:
    rng = random.Random(7)
    mem = InMemoryBehaviourStore(clock=clock)
    live: set[str] = set()
    for step in range(60):
        ident = f"u{rng.randrange(20)}"
        if ident in live and rng.random() < 0.3:
            store.erase(ident)
            mem.erase(ident)
            live.discard(ident)
        else:
            obs = [make_obs("tool_success", "t", identity=ident)]
            store.append(ident, obs)
            mem.append(ident, obs)
            live.add(ident)
        if step % 3:
            clock.advance(seconds=rng.choice([0, 1]))
    cursors: tuple[str, str] = ("", "")
    redis_seen: list[str] = []
    mem_seen: list[str] = []
    while True:
        r_page, r_next = store.list_identities(cursor=cursors[0], limit=4)
        m_page, m_next = mem.list_identities(cursor=cursors[1], limit=4)
        assert r_page == m_page
        redis_seen += r_page
        mem_seen += m_page
        if not r_next:
            assert not m_next
            break
        cursors = (r_next, m_next)
    assert sorted(redis_seen) == sorted(live)


def test_settings_retention_reaches_consolidation(
    client: redis.Redis, clock: FakeClock, make_obs: MakeObs
) -> None:
    def service(days: int) -> BehaviourService:
        settings = Settings(
            observation_retention_days=days, redis_key_prefix=f"{APP_PREFIX}:r{days}"
        )
        return Container(settings, clock=clock, redis=client).behaviour

    old = make_obs("tool_success", "old", at=clock.now_ms() - 12 * MS_PER_DAY)
    short, default = service(10), service(30)
    for svc in (short, default):
        # stored straight through the log (``record`` drops what is already past retention):
        # what is checked here is the prune at consolidation
        svc.store.append(IDENTITY, [old])
        assert "tool_affinity:old" in {f.subject for f in svc.load(IDENTITY).facts}
    # 12 days old: beyond 10 days of retention, within the default 30 (and within 7 days of
    # the round's newest observation, so the checkpoint rule keeps it)
    assert short.store.since(IDENTITY, None) == []
    assert [o.id for o in default.store.since(IDENTITY, None)] == [old.id]
