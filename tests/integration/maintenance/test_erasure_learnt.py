"""Erasure reaches what was learnt from the user (real Redis + PostgreSQL): persona-scope
memories the extraction job learnt from the user's transcripts — pending, approved and edited,
rejected, or already deleted — go with the user, and so do the review_actions holding copies of
their text. A scan of every table then finds neither the user's text nor their conversation
id, and the receipt counts what went. What another user taught the persona stays."""

from __future__ import annotations

from typing import Any

from functions.maintenance import handler as maintenance_fn
from tests.integration.maintenance.conftest import World

from engram.api.memory_inputs import PersonaRequest
from engram.local.lambda_context import FakeLambdaContext
from engram.memories.commands import Approve, EditMemory
from engram.memories.models import Memory, Scope, Status

PERSONA = "helpdesk"
ALICE_CONVERSATION = "conv-alice-7"
ALICE_WORDS = ("royalty", "password", "subscription", "dark mode", "helix", "Prefers")


def run_frequent(world: World) -> dict[str, Any]:
    body: dict[str, Any] = maintenance_fn.run(
        {"engramSchedule": "frequent"}, FakeLambdaContext(), container=world.container
    )
    return body


def pending(world: World) -> dict[str, Memory]:
    page = world.container.memories.review.list_pending(world.caller("boss", admin=True))
    return {m.value: m for m in page.memories}


def scan_every_table(world: World, needle: str) -> dict[str, int]:
    """Rows of every table of the schema whose text form contains ``needle``."""
    tables = [
        name
        for (name,) in world.sql(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
    ]
    assert {"memories", "review_actions", "erasures"} <= set(tables)
    found: dict[str, int] = {}
    for table in tables:
        [(count,)] = world.sql(
            f'SELECT count(*) FROM "{table}" t WHERE t::text ILIKE %s',
            f"%{needle}%",
        )
        if count:
            found[table] = count
    return found


def test_erasure_after_persona_extraction_leaves_no_trace_of_the_user(world: World) -> None:
    memories = world.container.memories
    boss = world.caller("boss", admin=True)
    memories.personas.put_persona(
        boss, PersonaRequest(extraction={"enabled": True}).command(PERSONA)
    )
    world.transcript(
        "alice",
        ALICE_CONVERSATION,
        "I prefer dark mode. How do I export royalty statements to PDF?",
        "How do I reset my password? How do I cancel my subscription?",
        "My favourite editor is helix.",
        persona_id=PERSONA,
    )
    world.transcript("bob", "conv-bob-1", "How do I merge two invoices?", persona_id=PERSONA)
    assert run_frequent(world)["tasks"]["extraction"]["counts"]["proposalsCreated"] == 6

    found = pending(world)
    learnt = {v: m for v, m in found.items() if m.scope is Scope.PERSONA}
    assert set(learnt) == {
        "Users ask how to export royalty statements to PDF",
        "Users ask how to reset their password",
        "Users ask how to cancel their subscription",
        "Users ask how to merge two invoices",
    }
    royalty = learnt["Users ask how to export royalty statements to PDF"]
    password = learnt["Users ask how to reset their password"]
    cancel = learnt["Users ask how to cancel their subscription"]
    invoices = learnt["Users ask how to merge two invoices"]
    # approved and edited, approved then deleted (remembered, audited), rejected
    memories.review.approve(
        boss, royalty.id, Approve(value="Users ask how to export royalty statements")
    )
    memories.update(boss, royalty.id, EditMemory(value="Users export royalty statements as PDF"))
    memories.review.approve(boss, password.id)
    memories.delete(boss, password.id)
    assert memories.review.reject(boss, cancel.id).status is Status.REJECTED
    memories.review.approve(boss, invoices.id)
    memories.review.approve(boss, found["Prefers dark mode"].id)
    assert memories.get(world.caller("bob"), royalty.id).status is Status.ACTIVE  # the team's

    exported = world.container.me.export(world.caller("alice")).memories
    assert {(m.scope, m.value) for m in exported} == {  # what erasure will delete
        ("persona_user", "Prefers dark mode"),
        ("persona_user", "helix"),
        ("persona", "Users export royalty statements as PDF"),
        ("persona", "Users ask how to cancel their subscription"),
    }

    counts = world.container.me.erase(world.caller("alice"))  # the receipt's counts
    assert counts.persona_memories == 2  # royalty (active) and cancel (rejected)
    assert counts.memories == 4  # plus alice's two persona_user memories
    # royalty: approve + update; password: approve + delete; cancel: reject; dark mode: approve
    assert counts.review_actions == 6
    assert counts.suppressions == 2  # the deleted password memory, the rejected cancel one
    for needle in (*ALICE_WORDS, ALICE_CONVERSATION):
        assert scan_every_table(world, needle) == {}, needle
    # bob's contribution to the persona stays, with its audit
    [(value, source, status)] = world.sql(
        "SELECT value, source_channel_id, status FROM memories WHERE scope = 'persona'"
    )
    assert (value, source, status) == (invoices.value, "conv-bob-1", "active")
    assert [a.action for a in memories.review.history(boss, invoices.id)] == ["approve"]
    assert world.sql("SELECT count(*) FROM review_actions") == [(1,)]

    # alice comes back: the same question is learnt again (nothing of her is remembered)
    world.clock.advance(seconds=5)
    world.transcript("alice", "conv-alice-8", "How do I reset my password?", persona_id=PERSONA)
    assert run_frequent(world)["tasks"]["extraction"]["counts"]["proposalsCreated"] == 1
