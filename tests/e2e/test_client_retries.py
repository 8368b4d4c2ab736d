"""The Python client against `engram serve`: repeats count, retries are stored once.

Requests go over real HTTP to the service; ``FaultyTransport`` injects a lost answer (503
after the service acted) or a 429 on chosen requests. Every test ends by reading the
identity's behavioural store straight from the service's Redis: stored = accepted, once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from tests.e2e.harness import LocalEngram, Tenant, eventually
from tests.support.httpfaults import FaultyTransport
from tests.support.ledger import Ledger, assert_exactly_once, ledger

from engram.client import DrainReport, EngramClient

pytestmark = pytest.mark.e2e

ROYALTIES = "show my royalties"
SUBJECT = "domain_preference:royalty"


@pytest.fixture
def store(service: LocalEngram) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(service.redis_url, socket_timeout=5)
    yield client
    client.close()


def faulty_client(
    service: LocalEngram, tenant: Tenant, plan: list[str]
) -> tuple[EngramClient, FaultyTransport]:
    transport = FaultyTransport(plan, path="/v1/events")
    client = service.client(service.token(tenant.user, tenant.team), transport=transport)
    return client, transport


def accepted_ids(transport: FaultyTransport) -> list[str]:
    """Every id the service answered 202 with, once (a retry answers the same ids)."""
    ids: list[str] = []
    for seen in transport.seen:
        if seen.server_status == 202:
            ids += [i for i in seen.server_body["ids"] if i not in ids]
    return ids


def assert_stored_once(
    service: LocalEngram, store: redis.Redis, tenant: Tenant, transport: FaultyTransport
) -> None:
    """Once every accepted observation reached Redis (the consumer runs on the local SQS
    stand-in's worker), the identity's log holds exactly the accepted ids, once each."""
    accepted = accepted_ids(transport)

    def probe() -> Ledger | None:
        book = ledger(store, tenant.identity, service.key_prefix)
        return book if len(book.logged_ids) >= len(accepted) else None

    assert_exactly_once(eventually(probe, timeout_s=45), accepted)


def emit_and_drain(client: EngramClient) -> DrainReport:
    client.emit_query(ROYALTIES)
    report = client.drain(30)
    assert report.failed == 0
    return report


def reinforcements(client: EngramClient) -> int:
    facts = {f["subject"]: f for f in client.start_session()["facts"]}
    return int(facts[SUBJECT]["reinforcementCount"]) if SUBJECT in facts else 0


def test_the_same_event_emitted_in_two_sessions_counts_twice(
    service: LocalEngram, tenant: Tenant, store: redis.Redis
) -> None:
    alice, transport = faulty_client(service, tenant, [])
    emit_and_drain(alice)
    assert_stored_once(service, store, tenant, transport)
    assert reinforcements(alice) == 1
    assert emit_and_drain(alice).sent == 2  # the next session: the same event, a new request
    first, second = (s.key for s in transport.seen)
    assert first != second
    assert len(accepted_ids(transport)) == 2
    assert_stored_once(service, store, tenant, transport)
    assert reinforcements(alice) == 2


def test_a_lost_answer_then_success_is_stored_exactly_once(
    service: LocalEngram, tenant: Tenant, store: redis.Redis
) -> None:
    alice, transport = faulty_client(service, tenant, ["lose-503"])
    assert emit_and_drain(alice).sent == 1
    lost, retry = transport.seen
    assert lost.key == retry.key  # the retry is the same request
    assert lost.server_status == retry.server_status == 202  # the service took both
    assert lost.server_body["ids"] == retry.server_body["ids"]
    assert alice.retries == 1
    assert_stored_once(service, store, tenant, transport)
    assert reinforcements(alice) == 1


def test_a_429_is_retried_no_earlier_than_its_retry_after(
    service: LocalEngram, tenant: Tenant, store: redis.Redis
) -> None:
    alice, transport = faulty_client(service, tenant, ["429"])
    assert emit_and_drain(alice).sent == 1
    refused, retry = transport.seen
    assert refused.server_status is None  # answered by the fault, never reached the service
    assert retry.key == refused.key
    assert retry.at - refused.at >= 1.0  # Retry-After: 1 was honoured
    assert_stored_once(service, store, tenant, transport)
