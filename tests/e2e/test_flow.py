"""The whole service over HTTP, through the Python client, as a chat backend uses it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually, pending_from_transcript

from engram.client import EngramAPIError, EngramClient

pytestmark = pytest.mark.e2e

ACCOUNT_RESULT = {"account": {"id": "ACC-42", "name": "Acme Records"}}


def emit_work(client: EngramClient) -> None:
    """What a chat backend emits during a conversation (fire-and-forget)."""
    client.emit_query("royalty report for Acme, last quarter")
    for _ in range(3):
        client.emit_tool("get_account", ok=True, duration_ms=120, result=ACCOUNT_RESULT)
    client.emit_tool("search_docs", ok=False, duration_ms=900, error="timeout")
    assert client.drain(timeout=60), "emitted events were not delivered"
    assert client.failed_events == 0
    assert client.dropped == 0
    assert client.sent_events == 5


def session_with(client: EngramClient, subjects: set[str], **kwargs: Any) -> dict[str, Any]:
    """Start sessions until the asynchronously ingested facts show up (bounded)."""

    def probe() -> dict[str, Any] | None:
        session = client.start_session(**kwargs)
        found = {f["subject"] for f in session["facts"]}
        return session if subjects <= found else None

    return eventually(probe, timeout_s=45, every_s=0.3)


def test_accepted_events_become_facts_in_the_next_session(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    accepted = alice.post_events(
        [
            {"kind": "query", "text": "revenue by product"},
            {"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 5},
        ]
    )
    # accepted counts the observations derived from the events (two domains, one tool)
    assert accepted["accepted"] == len(accepted["ids"]) == 3

    session = session_with(
        alice,
        {"tool_affinity:get_account", "domain_preference:revenue", "domain_preference:product"},
    )
    assert session["identityId"] == tenant.identity
    assert session["degraded"] == []
    by_subject = {f["subject"]: f for f in session["facts"]}
    affinity = by_subject["tool_affinity:get_account"]
    assert affinity["id"] == "fact:tool_affinity:get_account"
    assert affinity["category"] == "tool_affinity"
    assert affinity["identityId"] == tenant.identity
    assert 0 < affinity["confidence"] <= 1

    # GET /v1/facts answers the same facts; DELETE forgets one
    listed = {f["id"] for f in alice.facts()}
    assert "fact:tool_affinity:get_account" in listed
    alice.forget_fact("fact:tool_affinity:get_account")
    assert "fact:tool_affinity:get_account" not in {f["id"] for f in alice.facts()}
    with pytest.raises(EngramAPIError) as err:
        alice.forget_fact("fact:tool_affinity:get_account")
    assert err.value.status == 404


def test_typed_observations_are_accepted_and_consolidated(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    body = alice.post_observations(
        [
            {
                "type": "tool_success",
                "content": "lookup_isrc ok",
                "metadata": {"toolName": "lookup_isrc", "durationMs": 40},
            },
            {
                "type": "entity_access",
                "content": "opened account",
                "metadata": {"entityType": "account", "entityId": "A-9"},
                "id": "client-chosen-id-1",
            },
        ]
    )
    assert body["accepted"] == 2
    assert "client-chosen-id-1" in body["ids"]
    session = session_with(alice, {"tool_affinity:lookup_isrc", "entity_frequency:account:A-9"})
    assert session["toolAffinities"]["lookup_isrc"] > 0
    # a retry with the same id adds nothing
    alice.post_observations(
        [
            {
                "type": "entity_access",
                "content": "opened account",
                "metadata": {"entityType": "account", "entityId": "A-9"},
                "id": "client-chosen-id-1",
            }
        ]
    )
    # a later marker: once its fact shows, the retry (queued before it) was consumed too
    alice.post_events([{"kind": "query", "text": "contract terms"}])
    session = session_with(alice, {"domain_preference:contract"})
    facts = {f["subject"]: f for f in session["facts"]}
    assert facts["entity_frequency:account:A-9"]["reinforcementCount"] == 1


def test_session_context_has_facts_then_memories_and_tool_affinities(
    service: LocalEngram, tenant: Tenant
):
    alice = service.user_client(tenant.user, tenant.team)
    alice.save("favourite_report", "quarterly royalty statement, PDF")
    emit_work(alice)

    session = session_with(alice, {"tool_affinity:get_account", "tool_avoidance:search_docs"})
    sections = session["sections"]
    assert "What you know about this user" in sections["facts"]
    assert "get_account" in sections["facts"]
    assert "favourite_report" in sections["memories"]
    assert "quarterly royalty statement" in sections["memories"]
    prompt = session["prompt"]
    assert prompt.startswith(sections["facts"])
    assert prompt.index(sections["facts"]) < prompt.index(sections["memories"])
    assert prompt.endswith(sections["memories"])
    assert session["toolAffinities"]["get_account"] > 0
    assert session["toolAffinities"]["search_docs"] < 0
    assert [m["key"] for m in session["memories"]] == ["favourite_report"]
    entity = "entity_frequency:account:ACC-42"
    assert entity in {f["subject"] for f in alice.facts()}


def test_memory_crud(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    http = service.http()
    headers = service.headers(service.token(tenant.user, tenant.team))

    created = http.post(
        "/v1/memories",
        json={"key": "timezone", "value": "Europe/Paris", "confidence": 0.8},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    memory = created.json()
    assert memory["scope"] == "user"
    assert memory["ownerId"] == tenant.user
    assert memory["status"] == "active"
    assert memory["confidence"] == pytest.approx(0.8)
    assert set(memory) >= {
        "id",
        "scope",
        "ownerId",
        "userId",
        "key",
        "value",
        "sourceChannelId",
        "confidence",
        "status",
        "createdAt",
        "updatedAt",
    }

    updated = http.post(
        "/v1/memories", json={"key": "timezone", "value": "Europe/Berlin"}, headers=headers
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["id"] == memory["id"]
    assert updated.json()["value"] == "Europe/Berlin"

    assert alice.get_memory(memory["id"])["value"] == "Europe/Berlin"
    patched = alice.update_memory(memory["id"], value="Asia/Tokyo", confidence=0.4)
    assert patched["value"] == "Asia/Tokyo"
    assert patched["confidence"] == pytest.approx(0.4)

    recalled = alice.recall("Tokyo")
    assert [m["id"] for m in recalled] == [memory["id"]]
    assert [m["id"] for m in alice.recall()] == [memory["id"]]

    archived = alice.archive_memory(memory["id"])
    assert archived["status"] == "archived"
    assert alice.recall("Tokyo") == []  # only active memories are recalled
    assert alice.get_memory(memory["id"])["status"] == "archived"

    alice.delete_memory(memory["id"])
    for call in (lambda: alice.get_memory(memory["id"]), lambda: alice.delete_memory(memory["id"])):
        with pytest.raises(EngramAPIError) as err:
            call()
        assert err.value.status == 404
        assert err.value.code == "not_found"
    http.close()


def test_tools_with_model_style_arguments(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    tools = {t["name"]: t for t in alice.tools()}
    assert set(tools) == {"memory_save", "memory_recall"}
    save_schema = tools["memory_save"]["inputSchema"]
    assert save_schema["type"] == "object"
    assert {"key", "value"} <= set(save_schema["required"])
    assert "query" in tools["memory_recall"]["inputSchema"]["properties"]

    saved = alice.execute_tool("memory_save", {"key": "preferred_name", "value": "Ally"})
    assert saved["name"] == "memory_save"
    assert saved["result"]["ok"] is True
    assert saved["result"]["created"] is True
    assert "preferred_name" in saved["result"]["text"]

    # OpenAI-style: the arguments arrive as a JSON string
    as_string = json.dumps({"key": "preferred_name", "value": "Alison", "confidence": 0.9})
    again = alice.execute_tool("memory_save", as_string)
    assert again["result"]["created"] is False
    assert again["result"]["memories"][0]["value"] == "Alison"

    recalled = alice.execute_tool("memory_recall", json.dumps({"query": "name", "max_results": 5}))
    assert recalled["result"]["ok"] is True
    assert [m["key"] for m in recalled["result"]["memories"]] == ["preferred_name"]
    assert "Alison" in recalled["result"]["text"]
    assert alice.execute_tool("memory_recall", "")["result"]["memories"][0]["value"] == "Alison"

    for name, arguments, field in (
        ("memory_save", {"key": "k"}, "value"),
        ("memory_save", '{"key": "k", "value": 3}', "value"),
        ("memory_save", "{not json", "arguments"),
        ("memory_recall", {"max_results": 0}, "max_results"),
        ("memory_recall", {"colour": "red"}, "colour"),
    ):
        with pytest.raises(EngramAPIError) as err:
            alice.execute_tool(name, arguments)
        assert err.value.status in (400, 422), (name, arguments)
        assert field in json.dumps(err.value.details) + err.value.message, (arguments, err.value)
    with pytest.raises(EngramAPIError) as err:
        alice.execute_tool("rm_rf", {})
    assert err.value.status == 404
    assert [m["value"] for m in alice.recall()] == ["Alison"]


def test_transcripts_become_pending_memories_that_admins_approve_or_reject(
    service: LocalEngram, tenant: Tenant
):
    alice = service.user_client(tenant.user, tenant.team)
    admin = service.user_client(tenant.admin, tenant.team, admin=True)
    keep = pending_from_transcript(
        service, tenant, "conv-keep", "My favourite editor is helix.", "helix"
    )
    drop = pending_from_transcript(service, tenant, "conv-drop", "I live in Lisbon.", "Lisbon")
    assert keep["status"] == "pending_review"
    assert keep["sourceChannelId"] == "conv-keep"
    assert keep["ownerId"] == tenant.user

    assert alice.recall() == []  # pending memories are not recalled
    with pytest.raises(EngramAPIError) as err:
        alice.review_queue()
    assert err.value.status == 403
    with pytest.raises(EngramAPIError) as err:
        alice.approve(keep["id"])
    assert err.value.status == 403

    approved = admin.approve(keep["id"])
    assert approved["status"] == "active"
    rejected = admin.reject(drop["id"])
    assert rejected["status"] == "rejected"
    remaining = {m["id"] for m in admin.review_queue()}
    assert keep["id"] not in remaining
    assert drop["id"] not in remaining
    assert [m["value"] for m in alice.recall()] == ["helix"]
    for call in (lambda: admin.approve(drop["id"]), lambda: admin.reject(keep["id"])):
        with pytest.raises(EngramAPIError) as err:
            call()
        assert (err.value.status, err.value.code) == (409, "conflict")  # already decided
    assert [a["action"] for a in admin.memory_history(drop["id"])] == ["reject"]

    # a rejected proposal is never resurrected by the same sentence in a later transcript
    alice.send_transcript("conv-again", [{"role": "user", "content": "I live in Lisbon."}])
    alice.send_transcript("conv-marker", [{"role": "user", "content": "I prefer tea over coffee."}])
    eventually(lambda: any("tea" in m["value"] for m in admin.review_queue()), timeout_s=60)
    assert not any("Lisbon" in m["value"] for m in admin.review_queue())


def test_transcript_is_queued(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    queued = alice.send_transcript(
        "conv-1",
        [
            {"role": "user", "content": "My name is Alice and I work at Acme Records."},
            {"role": "assistant", "content": "Nice to meet you, Alice."},
        ],
    )
    assert queued.to_json() == {"queued": True, "conversationId": "conv-1", "messages": 2}


def test_personas_and_team_memory_switch(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    team_admin = service.user_client(tenant.admin, tenant.team, team_admin=True)
    alice.save("colour", "teal")

    persona = team_admin.put_persona(
        "helpdesk",
        allowed_groups=[],
        memory_enabled=False,
        extraction_enabled=True,
        extraction_prompt="extract preferences",
    )
    assert persona["personaId"] == "helpdesk"
    assert persona["teamId"] == tenant.team
    assert persona["memoryEnabled"] is False
    assert persona["extraction"] == {"enabled": True, "prompt": "extract preferences"}
    assert team_admin.get_persona("helpdesk")["memoryEnabled"] is False
    with pytest.raises(EngramAPIError) as err:
        alice.put_persona("helpdesk", memory_enabled=True)
    assert err.value.status == 403

    # memory off in this persona's conversations: save refused, recall and hint empty
    with pytest.raises(EngramAPIError) as err:
        alice.save("colour", "red", persona_id="helpdesk", scope="persona_user")
    assert err.value.status == 403
    assert err.value.code == "memory_disabled"
    assert alice.recall(persona_id="helpdesk") == []
    assert alice.start_session(persona_id="helpdesk")["memories"] == []
    assert [m["value"] for m in alice.recall()] == ["teal"]

    # the team switch: everything off for the team
    with pytest.raises(EngramAPIError) as err:
        alice.set_team_memory(False)
    assert err.value.status == 403
    assert team_admin.set_team_memory(False)["memoryEnabled"] is False
    http = service.http()
    refused = http.post(
        "/v1/memories",
        json={"key": "colour", "value": "red"},
        headers=service.headers(service.token(tenant.user, tenant.team)),
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "memory_disabled"
    assert refused.json()["error"]["message"]
    assert alice.recall() == []
    session = alice.start_session()
    assert session["memories"] == []
    assert session["sections"]["memories"] == ""
    tool = alice.execute_tool("memory_save", {"key": "colour", "value": "red"})
    assert tool["result"]["ok"] is False
    assert team_admin.set_team_memory(True)["memoryEnabled"] is True
    assert [m["value"] for m in alice.recall()] == ["teal"]  # nothing was overwritten
    http.close()


def test_export_holds_everything_about_the_caller(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    bob = service.user_client(tenant.other_user, tenant.team)
    alice.save("city", "Lyon")
    bob.save("city", "Porto")
    emit_work(alice)
    session_with(alice, {"tool_affinity:get_account"})

    export = alice.export()
    assert export["identityId"] == tenant.identity
    assert export["userId"] == tenant.user
    assert export["teamId"] == tenant.team
    assert [(m["key"], m["value"]) for m in export["memories"]] == [("city", "Lyon")]
    assert "tool_affinity:get_account" in {f["subject"] for f in export["facts"]}
    assert export["checkpoint"] is not None
    assert "Porto" not in json.dumps(export.to_json())


def memory_rows(service: LocalEngram, team: str, user: str) -> int:
    """Rows of ``memories`` that belong to the user (user scope: owner; persona_user: user)."""
    rows = service.sql(
        "SELECT count(*) FROM memories WHERE team_id = %s AND (owner_id = %s OR user_id = %s)",
        (team, user, user),
    )
    return int(rows[0][0])


def test_erasure_leaves_nothing_of_the_user(service: LocalEngram, tenant: Tenant):
    alice = service.user_client(tenant.user, tenant.team)
    bob = service.user_client(tenant.other_user, tenant.team)
    for client in (alice, bob):
        client.save("pet", "a cat called Miso")
        client.save("helpdesk_tone", "short answers", persona_id="helpdesk")
        emit_work(client)
        # every emitted observation is consolidated (they arrive one SQS record at a time)
        session_with(
            client,
            {
                "tool_affinity:get_account",
                "tool_avoidance:search_docs",
                "domain_preference:royalty",
            },
        )
    alice.post_observations(
        [
            {
                "type": "query_pattern",
                "content": "late",
                "metadata": {"domain": "contract", "query": "late contract"},
                "id": "obs-late",
            }
        ]
    )
    eventually(lambda: any(o["id"] == "obs-late" for o in alice.export()["observations"]))
    alice_identity = tenant.identity
    bob_identity = f"{tenant.team}:{tenant.other_user}"
    assert service.redis_keys(alice_identity)
    assert service.redis_mentions(alice_identity)  # the scanners do see the user's data
    assert "memories: 2 rows" in service.postgres_mentions(tenant.user)
    assert memory_rows(service, tenant.team, tenant.user) == 2

    receipt = alice.erase()
    assert receipt["identityId"] == alice_identity
    counts = receipt["counts"]
    assert counts["memories"] == 2
    assert counts["facts"] >= 3
    assert counts["observations"] >= 1

    assert service.redis_keys(alice_identity) == []
    # nor in any value of any key (index sets, streams, hashes...)
    assert service.redis_mentions(alice_identity) == []
    # every PostgreSQL table but the erasure log (which records that the erasure happened) and
    # the event outbox, which holds ids (never a key or value) of events waiting to be
    # published, the user.erased one included, until the relay has sent and pruned them
    assert service.postgres_mentions(tenant.user, except_tables=("erasures", "event_outbox")) == []
    assert memory_rows(service, tenant.team, tenant.user) == 0
    export = alice.export()
    assert export["memories"] == []
    assert export["facts"] == []
    assert export["observations"] == []
    assert alice.start_session()["facts"] == []

    # bob is untouched
    assert service.redis_keys(bob_identity)
    assert sorted(m["key"] for m in bob.export()["memories"]) == ["helpdesk_tone", "pet"]
    assert "tool_affinity:get_account" in {f["subject"] for f in bob.facts()}
    assert memory_rows(service, tenant.team, tenant.other_user) == 2


def test_erasure_leaves_no_copy_of_the_users_memories_in_the_audit_trail(
    service: LocalEngram, tenant: Tenant
):
    """The review/audit trail keeps before/after copies of memory values: erasure must remove
    the user's rows there too (and leave no row naming the user as the actor)."""
    alice = service.user_client(tenant.user, tenant.team)
    memory = alice.save("diagnosis", "private medical detail")
    alice.update_memory(memory["id"], value="another private detail")
    alice.delete_memory(memory["id"])
    alice.erase()
    leftovers = service.sql(
        "SELECT count(*) FROM review_actions WHERE team_id = %s AND (actor_id = %s"
        " OR before::text LIKE %s OR after::text LIKE %s)",
        (tenant.team, tenant.user, "%private%", "%private%"),
    )
    assert leftovers == [(0,)]
