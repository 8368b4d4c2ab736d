"""Ingest ids for retries and repeats over in-memory fakes with a fake clock, and the
``IdempotencyKeys`` adapters (in memory, and the Redis script on fakeredis; the integration
tier runs it on a real redis-server)."""

from __future__ import annotations

import json

import fakeredis
import pytest
from tests.unit.functions.test_use_cases import Queue

from engram.adapters.idempotency_keys import InMemoryIdempotencyKeys, RedisIdempotencyKeys
from engram.api.models import EventsRequest, ObservationsRequest
from engram.clock import MS_PER_DAY, FakeClock
from engram.errors import IdempotencyKeyReused, InvalidInput, Unavailable
from engram.identity import Caller
from engram.use_cases.ingest import IngestService, _event_body
from engram.use_cases.ports import KeyClaim

ALICE = Caller(user_id="alice", team_id="acme")
MINUTE = 60_000
ROYALTIES = EventsRequest.model_validate({"events": [{"kind": "query", "text": "royalties?"}]})
CONTRACTS = EventsRequest.model_validate({"events": [{"kind": "query", "text": "contracts?"}]})
OK = {"type": "tool_success", "content": "ok", "metadata": {"toolName": "t", "durationMs": 1}}


class DownKeys:
    def claim(self, scope: str, digest: str, *, now_ms: int, ttl_ms: int) -> KeyClaim:
        raise Unavailable("redis is down")


def service(
    clock: FakeClock, keys: object | None = None, queue: Queue | None = None
) -> IngestService:
    return IngestService(
        queue or Queue(),
        clock=clock,
        keys=InMemoryIdempotencyKeys() if keys is None else keys,  # type: ignore[arg-type]
        observation_retention_days=30,
        retry_window_s=600,
    )


def test_keyless_ids_are_stable_within_a_window_and_new_in_the_next() -> None:
    clock = FakeClock()
    ingest = service(clock)
    first = ingest.accept_events(ALICE, ROYALTIES.command()).ids
    clock.advance(ms=10 * MINUTE - 1)
    assert ingest.accept_events(ALICE, ROYALTIES.command()).ids == first
    clock.advance(ms=1)
    assert set(ingest.accept_events(ALICE, ROYALTIES.command()).ids).isdisjoint(first)


def test_a_key_keeps_its_ids_for_24_hours_then_is_free() -> None:
    clock = FakeClock()
    queue = Queue()
    ingest = service(clock, queue=queue)
    clock.advance(ms=MS_PER_DAY - MINUTE)  # 23:59 UTC: the retry below crosses midnight
    first = ingest.accept_events(ALICE, ROYALTIES.command(), idempotency_key="k").ids
    clock.advance(ms=MS_PER_DAY - 1)
    assert ingest.accept_events(ALICE, ROYALTIES.command(), idempotency_key="k").ids == first
    sent = len(queue.bodies)
    with pytest.raises(IdempotencyKeyReused) as err:
        ingest.accept_events(ALICE, CONTRACTS.command(), idempotency_key="k")
    assert (err.value.code, err.value.field) == ("idempotency_key_reused", "Idempotency-Key")
    assert len(queue.bodies) == sent  # nothing queued
    clock.advance(ms=1)  # 24 hours after the first use
    assert set(
        ingest.accept_events(ALICE, CONTRACTS.command(), idempotency_key="k").ids
    ).isdisjoint(first)


def test_keys_are_per_caller_and_route_and_ignore_surrounding_space() -> None:
    clock = FakeClock()
    ingest = service(clock)
    first = ingest.accept_events(ALICE, ROYALTIES.command(), idempotency_key="k").ids
    assert ingest.accept_events(ALICE, ROYALTIES.command(), idempotency_key=" k ").ids == first
    bob = Caller(user_id="bob", team_id="acme")
    assert ingest.accept_events(bob, CONTRACTS.command(), idempotency_key="k").accepted == 1
    observations = ObservationsRequest.model_validate({"observations": [OK]})
    assert (
        ingest.accept_observations(ALICE, observations.command(), idempotency_key="k").accepted == 1
    )


def test_a_request_refused_for_its_input_does_not_take_the_key() -> None:
    clock = FakeClock()
    ingest = service(clock)
    bad = ObservationsRequest.model_validate(
        {"observations": [{**OK, "createdAt": clock.now_ms() - 31 * MS_PER_DAY}]}
    )
    with pytest.raises(InvalidInput):
        ingest.accept_observations(ALICE, bad.command(), idempotency_key="k")
    good = ObservationsRequest.model_validate({"observations": [OK]})
    assert ingest.accept_observations(ALICE, good.command(), idempotency_key="k").accepted == 1


def test_a_client_observation_id_is_kept_whatever_the_key() -> None:
    clock = FakeClock()
    ingest = service(clock)
    request = ObservationsRequest.model_validate({"observations": [{**OK, "id": "mine"}, OK]})
    ids = ingest.accept_observations(ALICE, request.command(), idempotency_key="k").ids
    assert ids[0] == "mine"
    assert ids[1] != "mine"


def test_a_key_store_outage_fails_open_with_the_same_ids_that_day() -> None:
    clock = FakeClock()
    keys = InMemoryIdempotencyKeys()
    clock.advance(ms=3 * 3_600_000)
    first = service(clock, keys).accept_events(ALICE, ROYALTIES.command(), idempotency_key="k").ids
    clock.advance(ms=MINUTE)
    down = service(clock, DownKeys())
    # a retry while the store is down: accepted with the ids of the key's day, stored once
    assert down.accept_events(ALICE, ROYALTIES.command(), idempotency_key="k").ids == first
    # the other-body check cannot run: accepted, as new observations (documented)
    assert set(down.accept_events(ALICE, CONTRACTS.command(), idempotency_key="k").ids).isdisjoint(
        first
    )


@pytest.mark.parametrize("route", ["observations", "events"])
def test_two_bodies_under_one_key_never_share_ids_while_the_store_is_down(route: str) -> None:
    # bodies of the same shape: ids from the key and the position alone would be equal
    clock = FakeClock()
    down = service(clock, DownKeys())
    if route == "observations":

        def send(text: str) -> list[str]:
            meta = {"toolName": "t", "durationMs": 1}
            item = {"type": "tool_success", "content": text, "metadata": meta}
            request = ObservationsRequest.model_validate({"observations": [item, item]})
            return down.accept_observations(ALICE, request.command(), idempotency_key="k").ids
    else:

        def send(text: str) -> list[str]:
            request = EventsRequest.model_validate({"events": [{"kind": "query", "text": text}]})
            return down.accept_events(ALICE, request.command(), idempotency_key="k").ids

    first = send("my royalties?")
    clock.advance(ms=MINUTE)
    other = send("royalties for march?")
    assert len(first) == len(other) >= 1
    assert set(other).isdisjoint(first)  # both kept: nothing merged into the first
    assert send("my royalties?") == first  # a retry of the first keeps its ids


def test_a_bad_key_is_422_naming_the_header() -> None:
    ingest = service(FakeClock())
    for key in ("", "   ", "x" * 129, "tab\there"):
        with pytest.raises(InvalidInput) as err:
            ingest.accept_events(ALICE, ROYALTIES.command(), idempotency_key=key)
        assert err.value.field == "Idempotency-Key"


@pytest.mark.parametrize("make", ["memory", "redis"])
def test_claims_hold_for_their_lifetime_by_the_callers_clock(make: str) -> None:
    keys = (
        InMemoryIdempotencyKeys()
        if make == "memory"
        else RedisIdempotencyKeys(fakeredis.FakeRedis(), prefix="t")
    )
    a, b = "a" * 64, "b" * 64
    assert keys.claim("s", a, now_ms=1000, ttl_ms=100) == KeyClaim(a, 1000)
    assert keys.claim("s", b, now_ms=1099, ttl_ms=100) == KeyClaim(a, 1000)
    assert keys.claim("other", b, now_ms=1099, ttl_ms=100) == KeyClaim(b, 1099)
    assert keys.claim("s", b, now_ms=1100, ttl_ms=100) == KeyClaim(b, 1100)


def test_the_redis_claim_is_one_hashed_key_with_a_ttl() -> None:
    client = fakeredis.FakeRedis()
    keys = RedisIdempotencyKeys(client, prefix="t")
    scope = json.dumps(["acme:alice", "events", "k"])
    keys.claim(scope, "c" * 64, now_ms=5, ttl_ms=MS_PER_DAY)
    [name] = client.keys("*")
    assert name.startswith(b"t:idem:{")
    assert b"alice" not in name
    assert client.get(name) == b"5:" + str(5 + MS_PER_DAY).encode() + b":" + b"c" * 64
    assert 0 < client.pttl(name) <= MS_PER_DAY


@pytest.mark.parametrize("key", [None, "k"])
def test_a_retry_sending_its_keys_in_another_order_gets_the_same_ids(key: str | None) -> None:
    # the ids hash the request's canonical JSON (sorted keys); integers beyond 64 bits, which
    # the fast encoder refuses, take the standard library's encoder and are canonical all the same
    metadata = {"toolName": "t", "durationMs": 1, "extra": {"b": 2**70, "a": [1, {"y": 1, "x": 2}]}}
    reordered = {
        "extra": {"a": [1, {"x": 2, "y": 1}], "b": 2**70},
        "durationMs": 1,
        "toolName": "t",
    }
    ingest = service(FakeClock())

    def ids(meta: dict[str, object], content: str = "ok") -> list[str]:
        body = {"observations": [{"metadata": meta, "content": content, "type": "tool_success"}]}
        request = ObservationsRequest.model_validate(body)
        return ingest.accept_observations(ALICE, request.command(), idempotency_key=key).ids

    first = ids(metadata)
    assert ids(reordered) == first
    if key is None:  # another body is another request (under one key it is refused)
        assert set(ids(metadata, content="other")).isdisjoint(first)


def test_an_observation_item_is_its_dump() -> None:
    bodies = [
        OK,
        {**OK, "id": "mine", "createdAt": 5},
        {
            "type": "entity_access",
            "content": " x ",
            "metadata": {"entityType": " t ", "entityId": "i"},
        },
    ]
    request = ObservationsRequest.model_validate({"observations": bodies})
    dumped = request.model_dump(by_alias=True, exclude_none=True)["observations"]
    assert [o.item() for o in request.observations] == dumped


def test_one_command_sent_twice_under_a_key_is_one_request() -> None:
    # the use case completes copies of the items (id, arrival time), never the command's own:
    # a caller retrying the very command it built is a retry, not another body under the key
    ingest = service(FakeClock())
    command = ObservationsRequest.model_validate({"observations": [OK]}).command()
    first = ingest.accept_observations(ALICE, command, idempotency_key="k").ids
    assert ingest.accept_observations(ALICE, command, idempotency_key="k").ids == first
    assert dict(command.items[0]).keys() == {"type", "content", "metadata"}


@pytest.mark.parametrize(
    "event",
    [
        {"kind": "query", "text": "royalties?"},
        {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 1},
        {"kind": "tool", "toolName": "t", "ok": False, "durationMs": 0, "error": "timeout"},
        {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 5, "result": {"a": [1, None]}},
        {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 5, "result": None},
    ],
)
def test_an_events_ids_derive_from_its_body_as_the_request_gave_it(
    event: dict[str, object],
) -> None:
    # the command drops the request model; the body the ids hash must stay what it dumped
    request = EventsRequest.model_validate({"events": [event]})
    dumped = request.events[0].model_dump(by_alias=True, exclude_none=True)
    assert _event_body(request.command().events[0]) == dumped
