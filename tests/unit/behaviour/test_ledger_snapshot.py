"""The tests' ledger of Redis (``tests.support.ledger``) is one snapshot: an observation the
consumer appends while it is read is in every part of it or in none. The e2e retry tests read
it while the service's consumer is still delivering, so a torn read would fail them at random.
"""

from __future__ import annotations

from typing import Any

import fakeredis
from tests.support.ledger import ledger
from tests.support.observations import IDENTITY, observation_factory

from engram.adapters.redis_behaviour import RedisObservationLog
from engram.clock import FakeClock


class WritesBetweenCalls:
    """A client whose every direct read is preceded by one more appended observation, as
    if the consumer wrote between two round trips; a MULTI/EXEC is one round trip."""

    def __init__(self, client: fakeredis.FakeRedis, log: RedisObservationLog) -> None:
        self._client = client
        self._log = log
        self._make = observation_factory(FakeClock())
        self.appended: list[str] = []

    def _append(self) -> None:
        obs = self._make("tool_success", f"tool-{len(self.appended)}")
        self._log.append(IDENTITY, [obs])
        self.appended.append(obs.id)

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        self._append()
        return self._client.pipeline(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        command = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self._append()
            return command(*args, **kwargs)

        return call


def test_the_ledger_is_read_in_one_snapshot() -> None:
    server = fakeredis.FakeRedis()
    log = RedisObservationLog(server)
    racing = WritesBetweenCalls(server, log)
    book = ledger(racing, IDENTITY)
    assert racing.appended  # a write raced the read
    assert sorted(book.logged_ids) == sorted(book.ids_by_seq) == sorted(racing.appended)
    assert book.seq == max(book.ids_by_seq.values())
