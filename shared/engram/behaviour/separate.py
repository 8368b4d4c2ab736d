"""Three separately given stores as one ``BehaviourStore`` (what ``engram.consolidate`` takes).

``resolve_store`` answers the one store the three are parts of when they share one backing
(``store, store, store.checkpoints``; the Redis classes on one server and key prefix, through
any clients), else ``SeparateStores`` over the three.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.behaviour.models import Fact, Observation
from engram.behaviour.ports import (
    BehaviourStore,
    CheckpointStore,
    FactRepository,
    ObservationLog,
    whole_store,
)


def resolve_store(
    observations: ObservationLog, facts: FactRepository, checkpoints: CheckpointStore
) -> BehaviourStore:
    """The one store behind the three parts, or a ``SeparateStores`` over them."""
    store = whole_store(observations)
    if store is None or not store.shares_backing_with(facts):
        return SeparateStores(observations, facts, checkpoints)
    if not store.shares_backing_with(checkpoints):
        return SeparateStores(observations, facts, checkpoints)
    return store


class SeparateStores(BehaviourStore):
    """An observation log, a fact repository and a checkpoint store with the primitives of
    one ``BehaviourStore``; rounds use the derived (unfenced) read and commit. There is no
    identity index and no erasure across separate stores."""

    def __init__(
        self, observations: ObservationLog, facts: FactRepository, checkpoints: CheckpointStore
    ) -> None:
        self.observations = observations
        self.facts = facts
        self.checkpoint_store = checkpoints

    def append(self, identity_id: str, observations: Sequence[Observation]) -> int:
        return self.observations.append(identity_id, observations)

    def since(self, identity_id: str, checkpoint: int | None) -> list[Observation]:
        return self.observations.since(identity_id, checkpoint)

    def prune(self, identity_id: str, before_ms: int, *, up_to_seq: int | None = None) -> int:
        return self.observations.prune(identity_id, before_ms, up_to_seq=up_to_seq)

    def get(self, identity_id: str) -> list[Fact]:
        return self.facts.get(identity_id)

    def upsert_batch(self, identity_id: str, facts: Sequence[Fact]) -> None:
        self.facts.upsert_batch(identity_id, facts)

    def delete(self, identity_id: str, fact_ids: Sequence[str]) -> int:
        return self.facts.delete(identity_id, fact_ids)

    def get_checkpoint(self, identity_id: str) -> int | None:
        return self.checkpoint_store.get(identity_id)

    def set_checkpoint(self, identity_id: str, value: int) -> None:
        self.checkpoint_store.set(identity_id, value)

    def erase(self, identity_id: str) -> dict[str, int]:
        raise NotImplementedError("separate stores have no erasure: use one BehaviourStore")

    def remove_if_empty(self, identity_id: str) -> bool:
        raise NotImplementedError("separate stores have no identity index")

    def identities_at(
        self, offset: int, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], int]:
        raise NotImplementedError("separate stores have no identity index")

    def identities_after(
        self, cursor: str, *, limit: int, active_before_ms: int | None
    ) -> tuple[list[str], str]:
        raise NotImplementedError("separate stores have no identity index")
