"""What Redis holds for one identity's behavioural memory, read straight from its keys, so a
test can reconcile every accepted id against what was stored."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engram.adapters.redis_behaviour import decode_member

PREFIX = "engram"


@dataclass
class Ledger:
    """What Redis holds for one identity's behavioural memory."""

    seq: int
    cursor: int
    ids_by_seq: dict[str, int]
    """``obsid`` hash: observation id -> arrival seq (0 = pruned tombstone)."""
    logged_ids: list[str]
    """Observation ids in the ``obs`` log, one per stored member (duplicates would repeat)."""
    facts: dict[str, dict[str, Any]]

    def consolidated(self, obs_id: str) -> bool:
        return 0 < self.ids_by_seq.get(obs_id, 0) <= self.cursor

    def pending(self, obs_id: str) -> bool:
        return self.ids_by_seq.get(obs_id, 0) > self.cursor


def ledger(client: Any, identity_id: str, prefix: str = PREFIX) -> Ledger:
    """One snapshot: the four keys are read in one MULTI/EXEC (they share the identity's hash
    tag, so one slot on a cluster too), so an observation the consumer appends meanwhile is
    in all of them or in none."""
    tag = "{" + identity_id + "}"
    tx = client.pipeline(transaction=True)
    tx.hgetall(f"{prefix}:state:{tag}")
    tx.hgetall(f"{prefix}:obsid:{tag}")
    tx.zrange(f"{prefix}:obs:{tag}", 0, -1)
    tx.hgetall(f"{prefix}:facts:{tag}")
    state, ids, members, facts = tx.execute()
    return Ledger(
        seq=int(state.get(b"seq", 0)),
        cursor=int(state.get(b"cursor", 0)),
        ids_by_seq={k.decode(): int(v) for k, v in ids.items()},
        logged_ids=[json.loads(decode_member(m))["id"] for m in members],
        facts={k.decode(): json.loads(v) for k, v in facts.items()},
    )


def assert_exactly_once(book: Ledger, accepted: list[str]) -> None:
    """Every accepted id is stored once (consolidated or pending), and nothing else is."""
    assert len(set(accepted)) == len(accepted), "the service handed out the same id twice"
    assert sorted(book.logged_ids) == sorted(accepted), "log differs from the accepted ids"
    assert set(book.ids_by_seq) == set(accepted)
    seqs = [book.ids_by_seq[i] for i in accepted]
    assert len(set(seqs)) == len(seqs)
    assert all(book.consolidated(i) or book.pending(i) for i in accepted)
