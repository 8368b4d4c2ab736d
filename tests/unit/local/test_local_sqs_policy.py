"""The SQS stand-in's retry policy, aligned with AWS: 5 receives before the dead-letter list,
and a visibility timeout that doubles with each failed receive, so a ~10 s outage of the
consumer's backend dead-letters nothing. Driven with a fake clock and ``process_once``."""

from __future__ import annotations

from typing import Any

import pytest

from engram.local.sqs import DEFAULT_MAX_RECEIVE_COUNT, LocalQueue


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Backend:
    """A consumer whose backend is down until ``up_at`` (clock time): fails every record."""

    def __init__(self, clock: Clock, up_at: float) -> None:
        self.clock = clock
        self.up_at = up_at
        self.deliveries: list[tuple[float, str, int]] = []
        self.stored: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        failures = []
        for r in event["Records"]:
            count = int(r["attributes"]["ApproximateReceiveCount"])
            self.deliveries.append((self.clock.now, r["body"], count))
            if self.clock.now < self.up_at:
                failures.append({"itemIdentifier": r["messageId"]})
            else:
                self.stored.append(r["body"])
        return {"batchItemFailures": failures}


def run_until_idle(q: LocalQueue, clock: Clock, horizon_s: float, step_s: float = 0.25) -> None:
    """Advance the fake clock in steps, delivering whatever is visible, up to ``horizon_s``."""
    end = clock.now + horizon_s
    while clock.now <= end:
        while q.process_once():
            pass
        clock.now += step_s


def queue_during_outage(
    down_s: float, body: str, **policy: Any
) -> tuple[LocalQueue, Backend, Clock]:
    """A queue (with ``policy``) holding ``body``, whose consumer's backend is down for
    ``down_s`` seconds from now."""
    clock = Clock()
    backend = Backend(clock, up_at=clock.now + down_s)
    q = LocalQueue("q", backend, clock=clock, **policy)
    q.send_message_batch([{"Id": "1", "MessageBody": body}])
    return q, backend, clock


def test_defaults_match_the_aws_redrive_policy() -> None:
    q = LocalQueue("q")
    assert q.max_receive_count == DEFAULT_MAX_RECEIVE_COUNT == 5
    assert [q.retry_delay_s(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert q.retry_delay_s(20) == 60.0  # capped


def test_a_ten_second_outage_dead_letters_nothing() -> None:
    q, backend, clock = queue_during_outage(10.0, "obs-1")
    run_until_idle(q, clock, horizon_s=40)
    assert backend.stored == ["obs-1"]
    assert q.dead_letters == []
    assert q.pending() == 0
    # delivered at +0, +1, +3, +7 (down), then +15 (up): the doubling visibility timeout
    start = backend.deliveries[0][0]
    offsets = [(round(t - start, 2), n) for t, _, n in backend.deliveries]
    assert offsets == [(0.0, 1), (1.0, 2), (3.0, 3), (7.0, 4), (15.0, 5)]


def test_a_longer_outage_dead_letters_after_five_receives() -> None:
    q, backend, clock = queue_during_outage(3600, "obs-1")
    run_until_idle(q, clock, horizon_s=60)
    assert [n for _, _, n in backend.deliveries] == [1, 2, 3, 4, 5]
    (dead,) = q.dead_letters
    assert (dead["body"], dead["attributes"]["ApproximateReceiveCount"]) == ("obs-1", "5")
    assert q.pending() == 0
    assert backend.stored == []


def test_a_retried_record_is_hidden_for_its_backoff() -> None:
    q, _, clock = queue_during_outage(3600, "x", visibility_timeout_s=2.0, backoff_factor=3.0)
    assert q.process_once() == 1
    clock.now += 1.99
    assert q.process_once() == 0  # still hidden
    clock.now += 0.01
    assert q.process_once() == 1  # second receive after 2 s
    clock.now += 5.99
    assert q.process_once() == 0
    clock.now += 0.01
    assert q.process_once() == 1  # third after 2 x 3 = 6 s


@pytest.mark.parametrize(
    "kwargs",
    [{"visibility_timeout_s": -1}, {"backoff_factor": 0.5}, {"max_visibility_timeout_s": -1}],
)
def test_bad_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="visibility timeouts"):
        LocalQueue("q", **kwargs)


def test_a_failed_send_commits_nothing() -> None:
    q = LocalQueue("q")
    q.fail_sends = lambda entry: entry["MessageBody"] == "bad"
    result = q.send_message_batch(
        [{"Id": "a", "MessageBody": "good"}, {"Id": "b", "MessageBody": "bad"}]
    )
    assert [s["Id"] for s in result["Successful"]] == ["a"]
    assert [f["Id"] for f in result["Failed"]] == ["b"]
    assert [m.body for m in q.messages()] == ["good"]
    assert q.stats.sent == 1
