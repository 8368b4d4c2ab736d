"""The events of a full flow (save, edit, propose, approve, reject, delete, team settings,
retention, erasure) as a consumer receives them from EventBridge: each valid under the
schema documented in docs/events.md, numbered per aggregate, and none carrying a memory's key
or value."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from tests.integration.events.conftest import World

from engram.api.memory_inputs import TeamSettingsRequest
from engram.clock import MS_PER_DAY
from engram.events.models import EVENT_TYPES
from engram.memories.commands import EditMemory, SaveMemory

DOCS = Path(__file__).resolve().parents[3] / "docs" / "events.md"

#: keys and values of the flow: none of them may appear in any event
KEYS = ["k-editor-7f3a", "k-shell-91bc", "k-coffee-22de", "k-timezone-5e1f", "k-archived-0c4d"]
VALUES = ["v-helix-3b9d", "v-zsh-c0ffee", "v-flat-white-8d2a", "v-berlin-44aa", "v-vim-6e6e"]


def documented_schemas() -> dict[str, dict[str, Any]]:
    """The JSON schema of each event type, as docs/events.md shows it."""
    text = DOCS.read_text()
    found = re.findall(r"### `([a-z.]+)` \(version \d+\)\n\n```json\n(.*?)\n```", text, re.S)
    return {name: json.loads(body) for name, body in found}


def test_every_event_of_a_full_flow_follows_its_documented_schema(world: World) -> None:
    m = world.container.memories
    alice, admin = world.caller("alice"), world.caller("root", admin=True)
    saved, _ = m.save(alice, SaveMemory(key=KEYS[0], value=VALUES[0]))
    m.save(alice, SaveMemory(key=KEYS[0], value=VALUES[4]))  # same key: an update
    m.update(alice, saved.id, EditMemory(value=VALUES[1]))
    m.histories.restore(alice, saved.id, 1)  # the first value again, as version 4
    approved = m.jobs.propose("acme", "alice", None, KEYS[1], VALUES[1], 0.8, "conv-1")
    rejected = m.jobs.propose("acme", "alice", None, KEYS[2], VALUES[2], 0.8, "conv-1")
    assert approved is not None
    assert rejected is not None
    m.review.approve(admin, approved.id)
    m.review.reject(admin, rejected.id)
    other, _ = m.save(alice, SaveMemory(key=KEYS[3], value=VALUES[3]))
    m.delete(alice, other.id)
    kept, _ = m.save(alice, SaveMemory(key=KEYS[3], value=VALUES[3]))
    folded, _ = m.save(alice, SaveMemory(key=KEYS[4], value=VALUES[3]))
    m.merge(alice, folded.id, kept.id)
    m.personas.put_team_settings(
        admin,
        TeamSettingsRequest.model_validate(
            {"memoryEnabled": True, "retention": {"archiveAfterDays": 30}}
        ).command(),
    )
    bob = world.caller("bob")
    old, _ = m.save(bob, SaveMemory(key=KEYS[4], value=VALUES[4]))
    world.clock.advance(days=31)
    assert m.jobs.apply_retention(
        "acme", archive_after_days=30, delete_archived_after_days=None
    ) == {
        "archived": 4,  # bob's, and alice's three active ones
        "deleted": 0,
    }
    world.container.me.erase(alice)

    world.relay().drain()
    delivered = world.bridge.delivered()
    schemas = documented_schemas()
    assert sorted(schemas) == sorted(EVENT_TYPES)
    for envelope in delivered:
        assert envelope["source"] == "engram"
        assert envelope["detail-type"] == envelope["detail"]["type"]
        jsonschema.validate(
            envelope["detail"],
            schemas[envelope["detail-type"]],
            format_checker=jsonschema.FormatChecker(),
        )
        text = json.dumps(envelope)
        for secret in KEYS + VALUES:
            assert secret not in text, envelope
    types = [e["detail-type"] for e in delivered]
    assert set(types) == set(EVENT_TYPES)
    first = [(d["type"], d["sequence"], d["cause"]) for d in _of(delivered, "memoryId", saved.id)]
    assert first == [
        ("memory.saved", 1, "api"),
        ("memory.updated", 2, "api"),
        ("memory.updated", 3, "api"),
        ("memory.restored", 4, "api"),
        ("memory.updated", 5, "service"),  # archived by retention
    ]
    # an update says which version it made (schema version 2)
    updates = [d for d in _of(delivered, "memoryId", saved.id) if d["type"] == "memory.updated"]
    assert [(d["schemaVersion"], d["version"]) for d in updates] == [(2, 2), (2, 3), (2, 5)]
    assert [(d["type"], d["actorId"]) for d in _of(delivered, "memoryId", approved.id)] == [
        ("memory.proposed", "engram-system"),
        ("memory.approved", "root"),
        ("memory.updated", "engram-system"),
    ]
    assert [d["status"] for d in _of(delivered, "memoryId", rejected.id)] == [
        "pending_review",
        "rejected",
    ]
    assert [(d["type"], d["status"]) for d in _of(delivered, "memoryId", other.id)] == [
        ("memory.saved", "active"),
        ("memory.deleted", None),
    ]
    assert [d["type"] for d in _of(delivered, "memoryId", old.id)] == [
        "memory.saved",
        "memory.updated",
    ]
    assert [
        (d["type"], d.get("intoId"), d["status"]) for d in _of(delivered, "memoryId", folded.id)
    ] == [("memory.saved", None, "active"), ("memory.merged", kept.id, None)]
    assert [(d["type"], d.get("version")) for d in _of(delivered, "memoryId", kept.id)][:2] == [
        ("memory.saved", None),
        ("memory.updated", 2),  # its version moved by the one folded in
    ]
    (erased,) = [d for d in (e["detail"] for e in delivered) if d["type"] == "user.erased"]
    assert (erased["userId"], erased["sequence"]) == ("alice", 1)
    (team,) = [d for d in (e["detail"] for e in delivered) if d["type"] == "team.settings.changed"]
    assert team["retention"] == {"archiveAfterDays": 30, "deleteArchivedAfterDays": None}
    assert team["actorId"] == "root"
    # erasure published once: recording the same erasure again adds no event
    world.container.erasure_log.record("acme", "alice", erased_ms(erased))
    assert world.relay().drain().sent == 0


def erased_ms(detail: dict[str, Any]) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(detail["erasedAt"]).timestamp() * 1000)


def _of(delivered: list[dict[str, Any]], field: str, value: str) -> list[dict[str, Any]]:
    return [e["detail"] for e in delivered if e["detail"].get(field) == value]


def test_retention_deletes_publish_memory_deleted(world: World) -> None:
    m = world.container.memories
    memory, _ = m.save(world.caller("alice"), SaveMemory(key="k", value="v"))
    world.clock.advance(days=2)
    m.jobs.apply_retention("acme", archive_after_days=1, delete_archived_after_days=None)
    world.clock.advance(ms=3 * MS_PER_DAY)
    assert m.jobs.apply_retention(
        "acme", archive_after_days=None, delete_archived_after_days=1
    ) == {
        "archived": 0,
        "deleted": 1,
    }
    world.relay().drain()
    assert [(d["type"], d["status"], d["sequence"]) for d in world.bridge.details()] == [
        ("memory.saved", "active", 1),
        ("memory.updated", "archived", 2),
        ("memory.deleted", None, 3),
    ]
    assert {d["memoryId"] for d in world.bridge.details()} == {memory.id}


def test_a_rejected_row_replaced_by_a_new_value_of_its_key_publishes_its_deletion(
    world: World,
) -> None:
    m = world.container.memories
    first = m.jobs.propose("acme", "alice", None, "editor", "vim", 0.8, "conv-1")
    assert first is not None
    m.review.reject(world.caller("root", admin=True), first.id)
    again = m.jobs.propose("acme", "alice", None, "editor", "helix", 0.8, "conv-2")
    assert again is not None
    world.relay().drain()
    details = world.bridge.details()
    assert [(d["type"], d["status"]) for d in _of_memory(details, first.id)] == [
        ("memory.proposed", "pending_review"),
        ("memory.rejected", "rejected"),
        ("memory.deleted", None),
    ]
    assert [d["type"] for d in _of_memory(details, again.id)] == ["memory.proposed"]


def _of_memory(details: list[dict[str, Any]], memory_id: str) -> list[dict[str, Any]]:
    return [d for d in details if d.get("memoryId") == memory_id]


def test_a_save_over_a_rejected_key_publishes_its_deletion_then_the_new_memory(
    world: World,
) -> None:
    """The rejected row gives way: its ``memory.deleted`` (the service's doing) and the new
    row's ``memory.saved``, each numbered in its own memory's sequence, in the detail as in
    the outbox row."""
    m = world.container.memories
    admin = world.caller("root", admin=True)
    proposed = m.jobs.propose("acme", "alice", None, "k-hobby", "v-chess", 0.8, "conv-1")
    assert proposed is not None
    m.review.reject(admin, proposed.id)
    saved, created = m.save(world.caller("alice"), SaveMemory(key="k-hobby", value="v-go"))
    assert created
    assert saved.id != proposed.id
    world.relay().drain()
    delivered = world.bridge.delivered()
    assert [
        (d["type"], d["sequence"], d["actorId"]) for d in _of(delivered, "memoryId", proposed.id)
    ] == [
        ("memory.proposed", 1, "engram-system"),
        ("memory.rejected", 2, "root"),
        ("memory.deleted", 3, "engram-system"),
    ]
    assert [
        (d["type"], d["sequence"], d["actorId"]) for d in _of(delivered, "memoryId", saved.id)
    ] == [
        ("memory.saved", 1, "alice"),
    ]
    assert [(a, t, s) for a, t, s, _ in world.outbox()] == [  # in write order
        (f"memory:{proposed.id}", "memory.proposed", 1),
        (f"memory:{proposed.id}", "memory.rejected", 2),
        (f"memory:{proposed.id}", "memory.deleted", 3),
        (f"memory:{saved.id}", "memory.saved", 1),
    ]
