"""The outbox on PostgreSQL published to EventBridge (moto, behind the fault proxy): nothing
published for a change that rolled back, every event once per publish and in sequence order
per memory through outages, partial failures re-sending only the refused entries, a relay
crash re-sending with the same event id, dead entries not blocking later events."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from functions.events.handler import run as run_events_function
from tests.integration.events.conftest import World

from engram.errors import Forbidden, QuotaExceeded
from engram.events.ports import OutboxEntry, PutResult
from engram.events.relay import backoff_ms
from engram.memories.commands import EditMemory, SaveMemory
from engram.memories.ports import AccessContext
from engram.memories.service import MemoryService
from engram.settings import Settings


class Crash(BaseException):
    """The relay's process dying: not an error it could catch and handle."""


def save(world: World, user: str, key: str, value: str = "v") -> str:
    memory, _ = world.container.memories.save(world.caller(user), SaveMemory(key=key, value=value))
    return memory.id


def edit(world: World, user: str, memory_id: str, value: str) -> None:
    world.container.memories.update(world.caller(user), memory_id, EditMemory(value=value))


def event_ids(world: World) -> list[str]:
    return [str(r[0]) for r in world.sql("SELECT event_id FROM event_outbox ORDER BY position")]


def drain_until_sent(world: World, expected: int, *, rounds: int = 12) -> None:
    relay = world.relay()
    for attempt in range(1, rounds + 1):
        relay.drain()
        if len(world.bridge.delivered()) >= expected:
            return
        world.clock.advance(ms=backoff_ms(attempt))
    raise AssertionError(f"only {len(world.bridge.delivered())} of {expected} delivered")


def per_memory_sequences(details: list[dict[str, Any]]) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = defaultdict(list)
    for d in details:
        seen[d["memoryId"]].append(d["sequence"])
    return dict(seen)


def test_a_change_whose_transaction_fails_after_the_outbox_insert_publishes_nothing(
    world: World,
) -> None:
    # a quota refusal is raised after the row and its event were written: both roll back
    store = world.container.memory_store
    quota = MemoryService(store, settings=Settings(max_memories_per_user=1))
    quota.save(world.caller("alice"), SaveMemory(key="first", value="v"))
    with pytest.raises(QuotaExceeded):
        quota.save(world.caller("alice"), SaveMemory(key="second", value="v"))
    # and any failure after the outbox insert: a trigger refusing the next event row
    world.sql(
        "CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused after the outbox insert'; END $$"
    )
    world.sql(
        "CREATE TRIGGER refuse_event AFTER INSERT ON event_outbox"
        " FOR EACH ROW EXECUTE FUNCTION refuse_event()"
    )
    with pytest.raises(psycopg.errors.RaiseException):
        save(world, "bob", "doomed")
    world.sql("DROP TRIGGER refuse_event ON event_outbox")

    assert world.sql("SELECT key FROM memories") == [("first",)]
    assert [row[1] for row in world.outbox()] == ["memory.saved"]
    world.relay().drain()
    details = world.bridge.details()
    assert [(d["type"], d["ownerId"]) for d in details] == [("memory.saved", "alice")]


def test_eventbridge_down_for_a_while_then_accepting_delivers_each_event_once_in_order(
    world: World,
) -> None:
    ids = [save(world, "alice", f"k{i}") for i in range(4)]
    for round_ in range(2):
        for memory_id in ids:
            edit(world, "alice", memory_id, f"v{round_}")
    assert len(world.outbox()) == 12

    world.bridge.proxy.down()
    relay = world.relay()
    for attempt in (1, 2, 3):
        report = relay.drain()
        assert (report.sent, report.refused) == (0, 4)  # each memory's first event
        assert relay.drain().requests == 0  # backing off
        world.clock.advance(ms=backoff_ms(attempt))
    assert world.bridge.delivered() == []
    world.bridge.proxy.pass_through()
    drain_until_sent(world, 12)

    delivered = world.bridge.delivered()
    assert len(delivered) == 12
    assert Counter(e["detail"]["eventId"] for e in delivered) == Counter(event_ids(world))
    assert per_memory_sequences([e["detail"] for e in delivered]) == {
        memory_id: [1, 2, 3] for memory_id in ids
    }
    assert [row[3] for row in world.outbox()] == ["sent"] * 12
    assert relay.stats().pending == 0


def test_a_put_answered_with_failed_entries_resends_only_those(world: World) -> None:
    for i in range(5):
        save(world, f"user{i}", "editor")
    ids = event_ids(world)
    world.bridge.refusals.times = {ids[1]: 1, ids[3]: 1}
    relay = world.relay()
    first = relay.drain()
    assert (first.sent, first.refused) == (3, 2)
    world.clock.advance(ms=backoff_ms(1))
    assert relay.drain().sent == 2

    assert world.bridge.refusals.requests == [ids, [ids[1], ids[3]]]
    assert world.bridge.refusals.failed_entry_counts == [2, 0]  # HTTP 200 both times
    assert sorted(d["eventId"] for d in world.bridge.details()) == sorted(ids)


def test_a_relay_crash_between_put_and_marking_sent_resends_the_same_event_id(
    world: World,
) -> None:
    save(world, "alice", "editor")
    save(world, "bob", "editor")
    real = world.bridge.bus()

    class DyingBus:
        max_entries = real.max_entries
        max_bytes = real.max_bytes
        entry_size = real.entry_size

        def put(self, entries: Sequence[OutboxEntry]) -> Sequence[PutResult]:
            real.put(entries)  # EventBridge accepted them ...
            raise Crash  # ... and the process died before marking them sent

    with pytest.raises(Crash):
        world.relay(bus=DyingBus()).step()
    first = list(world.bridge.delivered())
    assert len(first) == 2

    successor = world.relay()
    assert successor.drain().requests == 0  # the dead relay's lease still holds them
    world.clock.advance(seconds=world.container.settings.events_lease_s)
    assert successor.drain().sent == 2

    delivered = world.bridge.delivered()
    assert len(delivered) == 4
    again = delivered[2:]
    assert [e["detail"] for e in again] == [e["detail"] for e in first]  # same eventId, same detail
    assert {e["id"] for e in again}.isdisjoint(e["id"] for e in first)  # EventBridge's own ids
    assert {e["detail"]["eventId"] for e in delivered} == set(event_ids(world))


def test_a_permanently_refused_event_goes_dead_and_the_memory_s_later_events_flow(
    world: World,
) -> None:
    memory_id = save(world, "alice", "editor")
    edit(world, "alice", memory_id, "vim")
    edit(world, "alice", memory_id, "helix")
    first, second, third = event_ids(world)
    world.bridge.refusals.times = {first: -1}
    attempts = world.container.settings.events_max_attempts
    relay = world.relay()
    dead = 0
    for attempt in range(1, attempts + 1):
        dead += relay.drain().dead
        world.clock.advance(ms=backoff_ms(attempt))
    assert dead == 1
    assert [row[3] for row in world.outbox()] == ["dead", "sent", "sent"]
    assert [(d["eventId"], d["sequence"]) for d in world.bridge.details()] == [
        (second, 2),
        (third, 3),
    ]
    assert world.bridge.refusals.requests.count([first]) == attempts
    # what the events function reports (and emits as metrics, alarmed)
    body = run_events_function({"runSeconds": 0}, None, container=world.container)
    assert (body["deadEntries"], body["pending"]) == (1, 0)


def test_relays_running_at_once_publish_each_event_once(world: World) -> None:
    ids = [save(world, f"user{i % 5}", f"k{i}") for i in range(15)]
    for memory_id, i in zip(ids, range(15), strict=True):
        edit(world, f"user{i % 5}", memory_id, "again")
    start = threading.Barrier(3)

    def relay_run() -> None:
        start.wait()
        world.relay().drain()

    threads = [threading.Thread(target=relay_run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    world.relay().drain()
    details = world.bridge.details()
    assert Counter(d["eventId"] for d in details) == Counter(event_ids(world))  # once each
    assert all(seq == [1, 2] for seq in per_memory_sequences(details).values())


def test_sent_events_are_pruned_after_the_keep_time(world: World) -> None:
    save(world, "alice", "editor")
    relay = world.relay(keep_sent_ms=60_000)
    assert relay.drain().sent == 1
    assert len(world.outbox()) == 1
    world.clock.advance(seconds=61)
    assert relay.drain().pruned == 1
    assert world.outbox() == []
    # the memory's numbering goes on after its rows were pruned
    edit(world, "alice", world.bridge.details()[0]["memoryId"], "vim")
    assert [row[2] for row in world.outbox()] == [2]


def test_requests_reach_neither_the_outbox_rows_nor_the_relay_functions(world: World) -> None:
    save(world, "alice", "editor")
    db = world.container.database
    for ctx in (AccessContext("acme", "alice"), AccessContext("acme", "root", elevated=True)):
        with pytest.raises(Forbidden), db.tenant(ctx) as conn:
            conn.execute("SELECT count(*) FROM event_outbox")
        with pytest.raises(Forbidden), db.tenant(ctx) as conn:
            conn.execute("SELECT * FROM engram_outbox_claim(10, '30 seconds', now())")
        with pytest.raises(Forbidden), db.tenant(ctx) as conn:
            conn.execute("SELECT engram_outbox_prune(now(), 10)")
    # and a tenant writes events of its own team only
    with pytest.raises(Forbidden), db.tenant(AccessContext("acme", "alice")) as conn:
        conn.execute(
            "INSERT INTO event_outbox (event_id, team_id, aggregate_id, sequence, event_type,"
            " detail, created_at, next_attempt_at) VALUES (gen_random_uuid(), 'other', 'x', 1,"
            " 'memory.saved', '{}', now(), now())"
        )
