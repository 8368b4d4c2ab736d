"""The ingest queue's messages over in-memory fakes: one message per request (chunks past the
message limit), both message shapes, and a consumer batch grouped by identity."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from tests.unit.functions.test_use_cases import Queue

from engram.adapters.inmemory_behaviour import InMemoryBehaviourStore
from engram.adapters.sqs import SqsSender, batches
from engram.api.models import EventsRequest, ObservationsRequest
from engram.behaviour.models import Observation
from engram.behaviour.service import BehaviourService
from engram.clock import FakeClock
from engram.errors import InvalidInput, Unavailable
from engram.identity import Caller
from engram.use_cases.ingest import IngestService
from engram.use_cases.ingest_messages import (
    decode_message,
    encode_messages,
    observation_item,
    one_call_each,
    store_batch,
)

ALICE = Caller(user_id="alice", team_id="acme")
BOB = Caller(user_id="bob", team_id="acme")
CAROL = Caller(user_id="carol", team_id="acme")


def item(i: int, content: str = "") -> dict[str, Any]:
    return {
        "type": "tool_success",
        "content": content or f"call {i}",
        "metadata": {"toolName": f"tool_{i % 7}", "durationMs": i},
    }


def request(n: int, content: str = "") -> ObservationsRequest:
    items = [item(i, content) for i in range(n)]
    return ObservationsRequest.model_validate({"observations": items})


def ingest(queue: Queue, clock: FakeClock, max_message_bytes: int = 256 * 1024) -> IngestService:
    return IngestService(
        queue,
        clock=clock,
        observation_retention_days=30,
        retry_window_s=600,
        max_message_bytes=max_message_bytes,
    )


def messages_of(queue: Queue) -> list[tuple[str, str]]:
    return [(f"m{i}", body) for i, body in enumerate(queue.bodies)]


class Recorder:
    """``BehaviourService.record`` counting calls; raises for the identities in ``down``."""

    def __init__(self, service: BehaviourService, down: Sequence[str] = ()) -> None:
        self.service = service
        self.down = set(down)
        self.calls: list[tuple[str, int]] = []

    def __call__(self, identity_id: str, observations: Sequence[Observation]) -> int:
        self.calls.append((identity_id, len(observations)))
        if identity_id in self.down:
            raise Unavailable("behaviour store unavailable: ConnectionError")
        return self.service.record(identity_id, observations)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def behaviour(clock: FakeClock) -> BehaviourService:
    return BehaviourService(InMemoryBehaviourStore(clock=clock), clock=clock)


def stored_ids(behaviour: BehaviourService, identity: str) -> list[str]:
    return sorted(o["id"] for o in behaviour.export(identity)["observations"])


def test_a_request_is_one_message_with_its_ids(clock: FakeClock) -> None:
    queue = Queue()
    accepted = ingest(queue, clock).accept_observations(ALICE, request(100).command())
    assert len(queue.bodies) == 1
    body = json.loads(queue.bodies[0])
    assert (body["v"], body["identityId"]) == (2, "acme:alice")
    assert [o["id"] for o in body["observations"]] == accepted.ids
    assert all("identityId" not in o for o in body["observations"])  # named once
    identity, observations = decode_message(queue.bodies[0])
    assert identity == "acme:alice"
    assert [o.id for o in observations] == accepted.ids
    assert {o.identity_id for o in observations} == {"acme:alice"}


def test_a_request_past_the_message_limit_is_chunks_whose_union_is_the_request(
    clock: FakeClock, behaviour: BehaviourService
) -> None:
    queue = Queue()
    limit = 4096
    accepted = ingest(queue, clock, limit).accept_observations(
        ALICE, request(100, "x" * 300).command()
    )
    assert len(queue.bodies) > 1
    assert all(len(b.encode()) <= limit for b in queue.bodies)
    ids = [o.id for b in queue.bodies for o in decode_message(b)[1]]
    assert ids == accepted.ids  # in order, each once: no loss, no duplicate
    # each chunk is consumed on its own (here one chunk per batch, in reverse order)
    for message in reversed(messages_of(queue)):
        assert store_batch(one_call_each(behaviour.record), [message]).failed == {}
    assert stored_ids(behaviour, "acme:alice") == sorted(accepted.ids)


def test_events_past_the_message_limit_are_chunked_too(clock: FakeClock) -> None:
    queue = Queue()
    text = "royalty report " + "y" * 400
    events = EventsRequest.model_validate(
        {"events": [{"kind": "query", "text": f"{text} {i}"} for i in range(50)]}
    )
    accepted = ingest(queue, clock, 4096).accept_events(ALICE, events.command())
    assert len(queue.bodies) > 1
    assert [o.id for b in queue.bodies for o in decode_message(b)[1]] == accepted.ids


def test_one_observation_larger_than_the_limit_is_a_configuration_error(clock: FakeClock) -> None:
    observation = Observation.model_validate(
        {**item(1, "z" * 1000), "id": "a", "identityId": "acme:alice", "createdAt": 1}
    )
    with pytest.raises(ValueError, match="does not fit"):
        encode_messages("acme:alice", [observation_item(observation)], 1024)


def test_the_sender_puts_a_request_in_one_call_and_batches_by_size() -> None:
    class Client:
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def send_message_batch(self, *, QueueUrl: str, Entries: Any) -> dict[str, Any]:  # noqa: N803
            self.calls.append([e["MessageBody"] for e in Entries])
            return {"Successful": [{"Id": e["Id"]} for e in Entries]}

    client = Client()
    sender = SqsSender(client, "https://sqs/q", max_batch_bytes=1000)
    assert sender.send(["a" * 600]) == 1
    assert sender.send(["b" * 600, "c" * 300, "d" * 200]) == 3
    assert [len(call) for call in client.calls] == [1, 2, 1]  # 600 | 600+300 | 200
    assert [len(b) for b in batches(["e"] * 25, 10_000)] == [10, 10, 5]


def test_a_batch_of_mixed_identities_is_one_store_call_per_identity(
    clock: FakeClock, behaviour: BehaviourService
) -> None:
    queue = Queue()
    service = ingest(queue, clock)
    ids = {}
    for caller in (ALICE, BOB, ALICE, CAROL, BOB, ALICE):
        accepted = service.accept_observations(caller, request(10).command())
        clock.advance(ms=600_001)  # a new retry window: new ids for the same body
        ids.setdefault(caller.identity_id, []).extend(accepted.ids)
    record = Recorder(behaviour)
    outcome = store_batch(one_call_each(record), messages_of(queue))
    assert outcome.failed == {}
    assert sorted(record.calls) == [("acme:alice", 30), ("acme:bob", 20), ("acme:carol", 10)]
    assert (outcome.identities, outcome.stored) == (3, 60)
    for identity, expected in ids.items():
        assert stored_ids(behaviour, identity) == sorted(expected)


def test_one_identity_failing_reports_only_its_messages(
    clock: FakeClock, behaviour: BehaviourService
) -> None:
    queue = Queue()
    service = ingest(queue, clock)
    for caller in (ALICE, BOB, ALICE, CAROL):
        service.accept_observations(caller, request(5).command())
        clock.advance(ms=600_001)
    messages = messages_of(queue)
    outcome = store_batch(one_call_each(Recorder(behaviour, down=["acme:alice"])), messages)
    assert sorted(outcome.failed) == ["m0", "m2"]  # alice's two messages
    assert len(stored_ids(behaviour, "acme:bob")) == len(stored_ids(behaviour, "acme:carol")) == 5
    assert stored_ids(behaviour, "acme:alice") == []
    # SQS redelivers alice's messages only; once the store is back they are stored
    retried = [m for m in messages if m[0] in outcome.failed]
    assert store_batch(one_call_each(behaviour.record), retried).failed == {}
    assert len(stored_ids(behaviour, "acme:alice")) == 10


def test_a_redelivered_batch_adds_nothing(clock: FakeClock, behaviour: BehaviourService) -> None:
    queue = Queue()
    service = ingest(queue, clock)
    service.accept_observations(ALICE, request(20).command())
    service.accept_observations(BOB, request(20).command())
    first = store_batch(one_call_each(behaviour.record), messages_of(queue))
    assert (first.stored, first.failed) == (40, {})
    again = store_batch(one_call_each(behaviour.record), messages_of(queue))
    assert (again.stored, again.failed) == (0, {})
    # one message twice in one batch (SQS at-least-once): stored once
    twice = store_batch(one_call_each(behaviour.record), messages_of(queue) * 2)
    assert (twice.stored, twice.failed) == (0, {})
    assert len(stored_ids(behaviour, "acme:alice")) == 20


def test_old_and_new_shapes_in_one_batch(clock: FakeClock, behaviour: BehaviourService) -> None:
    queue = Queue()
    accepted = ingest(queue, clock).accept_observations(ALICE, request(3).command())
    old = [
        Observation.model_validate(
            {**item(i), "id": f"old-{i}", "identityId": ident, "createdAt": clock.now_ms()}
        ).model_dump_json(by_alias=True, exclude_none=True)
        for i, ident in enumerate(("acme:alice", "acme:bob"))
    ]
    record = Recorder(behaviour)
    messages = [("old-a", old[0]), *messages_of(queue), ("old-b", old[1])]
    outcome = store_batch(one_call_each(record), messages)
    assert outcome.failed == {}
    assert sorted(record.calls) == [("acme:alice", 4), ("acme:bob", 1)]
    assert stored_ids(behaviour, "acme:alice") == sorted([*accepted.ids, "old-0"])
    assert stored_ids(behaviour, "acme:bob") == ["old-1"]


def test_a_bad_message_fails_alone(clock: FakeClock, behaviour: BehaviourService) -> None:
    queue = Queue()
    ingest(queue, clock).accept_observations(ALICE, request(2).command())
    bad = [
        ("not-json", "{not json"),
        ("not-an-object", "[1]"),
        ("unknown-version", json.dumps({"v": 3, "identityId": "a:b", "observations": []})),
        ("no-identity", json.dumps({"v": 2, "observations": []})),
        ("bad-item", json.dumps({"v": 2, "identityId": "a:b", "observations": [{"id": "x"}]})),
        ("bad-old", json.dumps({"id": "x", "type": "tool_success"})),
    ]
    outcome = store_batch(one_call_each(behaviour.record), [*bad, *messages_of(queue)])
    assert sorted(outcome.failed) == sorted(name for name, _ in bad)
    assert outcome.stored == 2


class ManyStore(InMemoryBehaviourStore):
    """A store that appends several identities in one call (as a pipelined Redis store does);
    ``down`` identities fail."""

    def __init__(self, clock: FakeClock, down: Sequence[str] = ()) -> None:
        super().__init__(clock=clock)
        self.down = set(down)
        self.calls: list[list[str]] = []

    def append_many(self, groups: Any) -> dict[str, int | Exception]:
        self.calls.append(sorted(groups))
        out: dict[str, int | Exception] = {}
        for identity, observations in groups.items():
            if identity in self.down:
                out[identity] = ConnectionError("shard down")
            else:
                out[identity] = self.append(identity, observations)
        return out


def test_record_many_writes_every_identity_in_one_store_call(clock: FakeClock) -> None:
    store = ManyStore(clock, down=["acme:bob"])
    behaviour = BehaviourService(store, clock=clock)
    queue = Queue()
    service = ingest(queue, clock)
    for caller in (ALICE, BOB, CAROL, ALICE):
        service.accept_observations(caller, request(5).command())
        clock.advance(ms=600_001)
    outcome = store_batch(behaviour.record_many, messages_of(queue))
    assert store.calls == [["acme:alice", "acme:bob", "acme:carol"]]  # one call, all of them
    assert sorted(outcome.failed) == ["m1"]  # bob's message only
    assert isinstance(outcome.failed["m1"], Unavailable)  # a store error, as record raises it
    assert (outcome.stored, outcome.identities) == (15, 3)
    assert len(stored_ids(behaviour, "acme:alice")) == 10


def test_record_many_drops_aged_observations_and_refuses_another_identitys(
    clock: FakeClock, behaviour: BehaviourService
) -> None:
    old = Observation.model_validate(
        {**item(1), "id": "aged", "identityId": "acme:alice", "createdAt": 0}
    )
    mismatched = Observation.model_validate(
        {**item(2), "id": "x", "identityId": "acme:bob", "createdAt": clock.now_ms()}
    )
    fresh = Observation.model_validate(
        {**item(3), "id": "y", "identityId": "acme:carol", "createdAt": clock.now_ms()}
    )
    written = behaviour.record_many(
        {"acme:alice": [old], "acme:dave": [mismatched], "acme:carol": [fresh]}
    )
    assert written["acme:alice"] == 0  # older than retention: dropped, not an error
    assert isinstance(written["acme:dave"], InvalidInput)  # not this identity's observation
    assert written["acme:carol"] == 1
