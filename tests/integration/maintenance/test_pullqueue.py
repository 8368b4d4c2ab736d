"""The local pull queue: SQS-shaped sends, visibility timeouts, receive counts, dead letters."""

from __future__ import annotations

import pytest

from engram.adapters.sqs import SqsSender
from engram.local.pullqueue import PullQueue, receiver_for
from engram.local.sqs import LocalQueue, LocalSqs, LocalSqsError
from engram.maintenance import QueueMessage


def sent(queue: LocalQueue, *bodies: str) -> None:
    sqs = LocalSqs()
    sqs.add_queue(queue)
    SqsSender(sqs, queue.url).send(list(bodies))


def test_sends_like_sqs_and_receives_in_order_with_counts() -> None:
    q = PullQueue("x")
    sent(q, "a", "b", "c")
    got = q.receive(2)
    assert [(m.body, m.receive_count) for m in got] == [("a", 1), ("b", 1)]
    assert q.pending() == 3
    assert [m.body for m in q.receive(10)] == ["c"]
    assert q.receive(10) == []  # all in flight
    q.release(got[0].receipt, 0)
    again = q.receive(10)
    assert [(m.body, m.receive_count, m.message_id) for m in again] == [("a", 2, got[0].message_id)]
    q.delete(got[1].receipt)
    assert q.pending() == 2


def test_release_with_delay_hides_the_message() -> None:
    q = PullQueue("x")
    sent(q, "a")
    (m,) = q.receive(1)
    q.release(m.receipt, 3600)
    assert q.receive(10) == []
    assert q.pending() == 1


def test_unacknowledged_messages_come_back_after_the_visibility_timeout() -> None:
    q = PullQueue("x", visibility_timeout_s=0)
    sent(q, "a")
    (first,) = q.receive(1)
    (second,) = q.receive(1)  # the timeout (0 s) has passed: visible again
    assert (second.message_id, second.receive_count) == (first.message_id, 2)
    with pytest.raises(LocalSqsError):
        q.delete(first.receipt)  # its receipt expired with the visibility timeout
    q.delete(second.receipt)
    assert q.pending() == 0


def test_dead_letter_and_the_redrive_backstop() -> None:
    q = PullQueue("x", visibility_timeout_s=0, max_receive_count=2)
    sent(q, "poison", "ok")
    m = q.receive(1)[0]
    q.dead_letter(m, "malformed")
    q.delete(m.receipt)
    assert [(d["body"], d["reason"]) for d in q.dead_letters] == [("poison", "malformed")]
    (ok,) = q.receive(1)
    assert q.receive(1)[0].receive_count == 2  # not deleted: received again
    assert q.receive(1) == []  # third receive: moved by the backstop
    assert [d["reason"] for d in q.dead_letters] == ["malformed", "maxReceiveCount exceeded"]
    assert ok.body == "ok"
    assert q.pending() == 0


def test_a_plain_local_queue_is_pulled_through_one_shared_receiver() -> None:
    q = LocalQueue("engram-extraction")
    sent(q, "a")
    r = receiver_for(q, visibility_timeout_s=600)
    assert receiver_for(q) is r
    (m,) = r.receive(5)
    assert isinstance(m, QueueMessage)
    assert receiver_for(q).receive(5) == []
    r.delete(m.receipt)
    assert q.pending() == 0
    pull = PullQueue("p")
    assert receiver_for(pull) is pull.receiver
