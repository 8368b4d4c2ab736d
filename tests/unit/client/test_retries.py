"""The Python client's retries over a scripted transport: which failures are retried, with
which Idempotency-Key, within which bounds, and what emit counts instead of raising.
(Waits with real seconds, Retry-After included, are checked against `engram serve` in the
e2e tier.)"""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from tests.unit.client.bodies import Script, Step, respond

from engram_client import (
    DrainReport,
    EngramAPIError,
    EngramClient,
    EngramTransportError,
    RetryPolicy,
)
from engram_client._retry import retry_after_s

FAST = RetryPolicy(max_retries=3, backoff_s=0.001, max_backoff_s=0.004, max_elapsed_s=5)


def answer(status: int, headers: dict[str, str] | None = None, **body: Any) -> Step:
    def step(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, json=body or {"ok": True})

    return step


def ok(request: httpx.Request) -> httpx.Response:
    """The answer the service gives the request when all goes well."""
    return respond(request)


def fail(exc: type[httpx.TransportError]) -> Step:
    def step(request: httpx.Request) -> httpx.Response:
        raise exc("injected", request=request)

    return step


ACCEPTED = ok


def client(script: Script, policy: RetryPolicy = FAST) -> EngramClient:
    return EngramClient(
        "http://engram.test", "tok", transport=httpx.MockTransport(script), retry=policy
    )


def test_a_503_then_202_is_retried_with_the_same_key_and_the_next_request_gets_a_new_one() -> None:
    script = Script(answer(503), ACCEPTED, ACCEPTED)
    c = client(script)
    assert c.post_events([{"kind": "query", "text": "q"}]).ids == ["o1"]
    c.post_events([{"kind": "query", "text": "q"}])
    first, retry, second = script.keys()
    assert first is not None
    assert len(first) >= 16
    assert retry == first
    assert second not in (None, first)
    assert c.retries == 1


def test_reads_carry_no_key_and_a_chosen_key_is_sent_as_given() -> None:
    script = Script(ok)
    c = client(script)
    c.facts()
    c.post_events([{"kind": "query", "text": "q"}], idempotency_key="turn-42")
    assert script.keys() == [None, "turn-42"]


@pytest.mark.parametrize(
    "first",
    [
        answer(429, {"Retry-After": "0"}),
        answer(503),
        fail(httpx.ConnectError),
        fail(httpx.ConnectTimeout),
    ],
    ids=["429", "503", "connect-error", "connect-timeout"],
)
def test_what_the_service_surely_did_not_do_is_retried_for_any_method(first: Step) -> None:
    script = Script(first, ok)
    saved = client(script).save("k", "v")
    assert (saved.key, saved.value) == ("k", "v")
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "first", [answer(502), answer(504), fail(httpx.ReadTimeout), fail(httpx.RemoteProtocolError)]
)
def test_what_the_service_may_have_done_is_retried_only_when_repeating_is_harmless(
    first: Step,
) -> None:
    script = Script(first, ok)
    with pytest.raises((EngramAPIError, EngramTransportError)) as err:
        client(script).save("k", "v")  # a memory save is not repeatable
    assert (err.value.attempts, err.value.gave_up) == (1, False)
    for call in (
        lambda c: c.post_events([{"kind": "query", "text": "q"}]),
        lambda c: c.start_session(),
        lambda c: c.recall("q"),
    ):
        script = Script(first, ok)
        call(client(script))
        assert len(script.requests) == 2


def test_other_answers_are_final() -> None:
    for status in (400, 401, 403, 404, 409, 413, 422, 500):
        script = Script(answer(status), ACCEPTED)
        with pytest.raises(EngramAPIError) as err:
            client(script).post_events([{"kind": "query", "text": "q"}])
        assert err.value.status == status
        assert (err.value.attempts, err.value.gave_up) == (1, False)


def test_retries_are_bounded_in_count() -> None:
    script = Script(answer(503, error={"code": "unavailable", "message": "down"}))
    with pytest.raises(EngramAPIError) as err:
        client(script).post_events([{"kind": "query", "text": "q"}])
    assert err.value.code == "unavailable"
    assert (err.value.attempts, err.value.gave_up) == (4, True)
    assert len(set(script.keys())) == 1


def test_a_retry_after_beyond_the_time_budget_gives_up_at_once() -> None:
    script = Script(answer(429, {"Retry-After": "30"}), ACCEPTED)
    policy = RetryPolicy(max_retries=5, max_elapsed_s=10)
    with pytest.raises(EngramAPIError) as err:
        client(script, policy).post_events([{"kind": "query", "text": "q"}])
    assert (err.value.status, err.value.attempts, err.value.gave_up) == (429, 1, True)
    assert len(script.requests) == 1


def test_no_retries_policy_sends_once() -> None:
    script = Script(answer(503), ACCEPTED)
    with pytest.raises(EngramAPIError):
        client(script, RetryPolicy(max_retries=0)).post_events([{"kind": "query", "text": "q"}])
    assert len(script.requests) == 1


def test_emit_retries_then_counts_what_exhausted_its_retries_never_raising() -> None:
    script = Script(answer(503), ACCEPTED)
    c = client(script)
    c.emit_query("first")
    report = c.drain(5)
    assert report == DrainReport(done=True, sent=1, failed=0, gave_up=0, dropped=0, pending=0)
    assert script.keys()[0] == script.keys()[1]

    down = Script(fail(httpx.ConnectError))
    c = client(down)
    assert c.emit_query("lost") == 1
    report = c.drain(5)
    assert report
    assert (report.sent, report.failed, report.gave_up) == (0, 1, 1)
    assert (c.failed_events, c.gave_up_events) == (1, 1)
    assert len(down.requests) == FAST.max_retries + 1

    refused = Script(answer(422))
    c = client(refused)
    c.emit({"kind": "nope"})
    assert (c.drain(5).failed, c.gave_up_events) == (1, 0)  # refused, not given up


def test_close_stops_a_batch_waiting_to_retry() -> None:
    script = Script(answer(503))
    c = client(script, RetryPolicy(max_retries=10, backoff_s=30, max_elapsed_s=600))
    c.emit_query("q")
    assert not c.drain(0.2)  # waiting 15-30 s before its first retry
    report = c.close(timeout=0)
    assert report.pending == 1
    assert (c.failed_events, c.gave_up_events) == (1, 1)
    assert len(script.requests) == 1


def test_for_user_clones_have_their_own_counters() -> None:
    script = Script(ACCEPTED)
    parent = client(script)
    bob = parent.for_user("bob")
    bob.emit_query("q")
    assert bob.drain(5).sent == 1
    assert parent.drain(5).sent == 0
    assert script.requests[0].headers["x-engram-user"] == "bob"


def test_the_backoff_grows_with_jitter_and_never_undercuts_retry_after() -> None:
    policy = RetryPolicy(backoff_s=0.25, max_backoff_s=8)
    rng = random.Random(7)
    for retry, ceiling in [(0, 0.25), (1, 0.5), (3, 2.0), (9, 8.0)]:
        delays = [policy.delay_s(retry, None, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
        assert all(policy.delay_s(retry, 1.0, rng) >= 1.0 + ceiling / 2 for _ in range(20))


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    def after(value: str) -> float | None:
        return retry_after_s(httpx.Response(429, headers={"Retry-After": value}), now=1_000_000)

    assert after("3") == 3.0
    assert after("Mon, 12 Jan 1970 13:46:50 GMT") == pytest.approx(10.0)
    assert after("Thu, 01 Jan 1970 00:00:00 GMT") == 0.0
    assert after("soon") is None
    assert retry_after_s(httpx.Response(503)) is None
