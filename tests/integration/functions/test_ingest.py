"""Ingest -> SQS -> consumer -> Redis through the Lambda handlers; 503 when SQS refuses."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.integration.functions.conftest import Stack, peek_records, settings_for
from tests.support.services import RedisTarget

from engram.extraction.models import TranscriptJob

OBS = {
    "type": "tool_success",
    "content": "get_account ok",
    "metadata": {"toolName": "get_account", "durationMs": 12},
}
EVENTS = {
    "events": [
        {"kind": "query", "text": "What were the royalty numbers last quarter?"},
        {
            "kind": "tool",
            "toolName": "get_account",
            "ok": True,
            "durationMs": 80,
            "result": {"accountId": "A-1", "name": "Acme Records"},
        },
        {
            "kind": "tool",
            "toolName": "search_snowflake_schema",
            "ok": False,
            "durationMs": 5,
            "error": "timeout",
        },
    ]
}


def stored_observations(stack: Stack, identity: str = "acme:alice") -> list[dict[str, Any]]:
    data = stack.container.behaviour.export(identity)
    observations: list[dict[str, Any]] = data["observations"]
    return observations


def test_observations_are_accepted_queued_and_stored(stack: Stack) -> None:
    created = int(time.time() * 1000) - 60_000
    body = {"observations": [OBS, {**OBS, "id": "client-id-1", "createdAt": created}]}
    res = stack.call("POST /v1/observations", body=body)
    assert res.status == 202
    assert res.body["accepted"] == 2
    assert res.body["ids"][1] == "client-id-1"
    assert stack.ingest_queue.pending() == 1  # one message per request
    assert stack.deliver() == 1
    stored = stored_observations(stack)
    assert sorted(o["id"] for o in stored) == sorted(res.body["ids"])
    assert all(o["identityId"] == "acme:alice" for o in stored)
    assert {o["createdAt"] for o in stored} >= {created}


def test_a_retried_request_gets_the_same_ids_and_is_stored_once(stack: Stack) -> None:
    # a retry carries its request's Idempotency-Key; the keyless window is tested with a
    # fake clock in test_ingest_idempotency.py (here the real clock could cross a window)
    first = stack.call("POST /v1/events", body=EVENTS, headers={"Idempotency-Key": "k-1"})
    again = stack.call("POST /v1/events", body=EVENTS, headers={"Idempotency-Key": "k-1"})
    assert first.status == again.status == 202
    assert first.body["ids"] == again.body["ids"]
    stack.deliver()
    assert len(stored_observations(stack)) == first.body["accepted"]
    other = stack.call("POST /v1/events", body=EVENTS, headers={"Idempotency-Key": "k-2"})
    assert set(other.body["ids"]).isdisjoint(first.body["ids"])


def test_events_become_facts_at_the_next_session(stack: Stack) -> None:
    res = stack.call("POST /v1/events", body=EVENTS)
    assert res.status == 202
    stack.deliver()
    session = stack.call("POST /v1/sessions", body={})
    assert session.status == 200
    subjects = {f["subject"] for f in session.body["facts"]}
    assert {
        "domain_preference:royalty",
        "tool_affinity:get_account",
        "tool_avoidance:search_snowflake_schema",
        "entity_frequency:account:A-1",
    } <= subjects
    assert session.body["toolAffinities"]["get_account"] > 0
    assert session.body["sections"]["facts"] in session.body["prompt"]
    assert session.body["degraded"] == []


def test_bad_input_names_the_field_and_queues_nothing(stack: Stack) -> None:
    cases: list[tuple[Any, int, str]] = [
        ({"observations": [{**OBS, "type": "nope"}]}, 422, "observations.0.type"),
        (
            {"observations": [{**OBS, "metadata": {"durationMs": 1}}]},
            422,
            "observations.0.metadata.toolName",
        ),
        ({"observations": [OBS], "extra": 1}, 422, "extra"),
        ({"observations": [OBS] * 101}, 422, "observations"),
        (
            {"events": [{"kind": "tool", "toolName": "x", "ok": "yes", "durationMs": 1}]},
            422,
            "events.0.tool.ok",
        ),
    ]
    for body, status, field in cases:
        route = "POST /v1/observations" if "observations" in body else "POST /v1/events"
        res = stack.call(route, body=body)
        assert res.status == status, body
        fields = [d["field"] for d in res.body["error"].get("details", [])]
        assert field in fields, (field, fields)
    assert stack.call("POST /v1/events", body=b"{not json").status == 400
    assert stack.call("POST /v1/events", body=b"x" * (300 * 1024)).status == 413
    assert stack.ingest_queue.pending() == 0


def test_no_token_is_401_and_acting_for_another_user_is_403(stack: Stack) -> None:
    assert stack.call("POST /v1/events", body=EVENTS, user=None).status == 401
    res = stack.call("POST /v1/events", body=EVENTS, headers={"x-engram-user": "bob"})
    assert res.status == 403
    assert stack.ingest_queue.pending() == 0


def test_sqs_refusing_a_record_gives_503_and_the_retry_stores_each_once(stack: Stack) -> None:
    body = {"observations": [{**OBS, "content": f"call {i}"} for i in range(25)]}
    stack.ingest_queue.fail_sends = lambda entry: entry["Id"] == "0"  # the one message
    key = {"Idempotency-Key": "batch-1"}
    refused = stack.call("POST /v1/observations", body=body, headers=key)
    assert refused.status == 503
    assert refused.body["error"]["code"] == "unavailable"
    assert refused.headers.get("Retry-After") == "1"
    stack.ingest_queue.fail_sends = None
    retried = stack.call("POST /v1/observations", body=body, headers=key)
    assert retried.status == 202
    assert retried.body["accepted"] == 25
    stack.deliver()
    stored = stored_observations(stack)
    assert sorted(o["id"] for o in stored) == sorted(retried.body["ids"])


def test_sqs_down_gives_503(stack: Stack) -> None:
    stack.ingest_queue.send_error = ConnectionError("sqs endpoint unreachable")
    res = stack.call("POST /v1/events", body=EVENTS)
    assert res.status == 503
    assert stack.ingest_queue.pending() == 0


def test_transcript_is_queued_for_extraction(stack: Stack) -> None:
    body = {"personaId": "p1", "messages": [{"role": "user", "content": "I use helix"}]}
    res = stack.call(
        "POST /v1/conversations/{conversationId}/transcript",
        body=body,
        path={"conversationId": "c-9"},
    )
    assert res.status == 202
    assert res.body == {"queued": True, "conversationId": "c-9", "messages": 1}
    records = peek_records(stack.extraction_queue)  # the queue the maintenance job pulls from
    assert len(records) == 1
    job = TranscriptJob.model_validate(json.loads(records[0]["body"]))
    assert (job.team_id, job.user_id, job.persona_id) == ("acme", "alice", "p1")
    bad = stack.call(
        "POST /v1/conversations/{conversationId}/transcript",
        body={"messages": []},
        path={"conversationId": "c-9"},
    )
    assert bad.status == 422
    assert stack.extraction_queue.pending() == 1


def test_created_at_outside_the_window_is_422_naming_the_field(stack: Stack) -> None:
    now = int(time.time() * 1000)
    day = 86_400_000
    retention = stack.settings.observation_retention_days
    for index, created in ((1, now - (retention + 1) * day), (1, now + 10 * 60_000)):
        body = {"observations": [OBS, {**OBS, "createdAt": created}]}
        res = stack.call("POST /v1/observations", body=body)
        assert res.status == 422
        assert f"observations.{index}.createdAt" in json.dumps(res.body)
    assert stack.ingest_queue.pending() == 0
    ok = {"observations": [{**OBS, "createdAt": now - (retention - 1) * day}]}
    assert stack.call("POST /v1/observations", body=ok).status == 202


TRANSCRIPT = "POST /v1/conversations/{conversationId}/transcript"
TEAM_ADMIN = ("engram-team-admins",)


def _put_persona(stack: Stack, persona: str, **config: Any) -> None:
    res = stack.call(
        "PUT /v1/personas/{personaId}",
        path={"personaId": persona},
        body=config,
        user="carol",
        groups=TEAM_ADMIN,
    )
    assert res.status == 200, res.body


def test_transcript_for_a_persona_the_caller_may_not_use_is_403(stack: Stack) -> None:
    _put_persona(stack, "sales-bot", allowedGroups=["sales"])
    _put_persona(stack, "quiet", memoryEnabled=False)
    body = {"personaId": "sales-bot", "messages": [{"role": "user", "content": "I use helix"}]}
    path = {"conversationId": "c-1"}
    assert stack.call(TRANSCRIPT, body=body, path=path).status == 403
    off = stack.call(TRANSCRIPT, body={**body, "personaId": "quiet"}, path=path)
    assert off.status == 403
    assert stack.extraction_queue.pending() == 0
    # a member of the allowed group may
    ok = stack.call(TRANSCRIPT, body=body, path=path, groups=("sales",))
    assert ok.status == 202
    assert stack.extraction_queue.pending() == 1


def test_transcripts_are_rate_limited(
    redis_target: RedisTarget, migrated_url: str, tmp_path: Any, make: Any
) -> None:
    limited: Stack = make(
        settings_for(redis_target, migrated_url, tmp_path, observations_per_minute=2)
    )
    body = {"messages": [{"role": "user", "content": "hello"}]}
    path = {"conversationId": "c-2"}
    statuses = [limited.call(TRANSCRIPT, body=body, path=path).status for _ in range(3)]
    assert statuses == [202, 202, 429]
    assert limited.extraction_queue.pending() == 2
