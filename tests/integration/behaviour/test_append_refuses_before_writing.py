"""An append that cannot complete writes nothing, so its redelivery stores every observation."""

from __future__ import annotations

import pytest
import redis
from tests.support.observations import IDENTITY, MakeObs

from engram.adapters.redis_behaviour import RedisBehaviourStore

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("broken", ["obs", "obsts", "pending"])
def test_a_wrong_type_key_refuses_the_append_and_the_redelivery_loses_nothing(
    store: RedisBehaviourStore, client: redis.Redis, make_obs: MakeObs, broken: str
) -> None:
    identity = IDENTITY
    store.append(identity, [make_obs("tool_success", "search")])
    key = getattr(store.keys(identity), broken)
    client.delete(key)
    client.set(key, "not a collection")  # a key of the wrong type, written by something else
    batch = [make_obs("tool_success", f"tool-{i}") for i in range(3)]

    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        store.append(identity, batch)
    assert not any(client.hexists(store.keys(identity).obsid, o.id) for o in batch)

    client.delete(key)  # repaired; SQS redelivers the same observations
    assert store.append(identity, batch) == 3
    stored = {o.id for o in store.since(identity, None)}
    assert {o.id for o in batch} <= stored
