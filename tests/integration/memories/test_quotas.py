"""Quotas hold, on both stores: every row a user can create counts (``user`` and
``persona_user``, whatever the persona id), the check is inside the write (concurrent saves at
the limit cannot both land), and per-team and per-persona quotas name themselves when refused.
Each test ends by counting what is stored (SQL on PostgreSQL)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from tests.integration.memories.conftest import ADMIN, ALICE, BOB, EVERY_VERSION, Backend
from tests.support import memory_rows

from engram.errors import QuotaExceeded
from engram.identity import Caller
from engram.memories.commands import Approve, EditMemory, SaveMemory
from engram.memories.models import MemoryFilter, Scope, Status
from engram.memories.privacy import system_context

pytestmark = pytest.mark.integration


CONCURRENT = 20


def stored(backend: Backend, where: str = "TRUE", *params: Any) -> int:
    """Rows really stored: SQL as the owner on PostgreSQL, the store's own list otherwise."""
    if backend.url is not None:
        with psycopg.connect(backend.url) as conn:
            row = conn.execute(f"SELECT count(*) FROM memories WHERE {where}", params).fetchone()
        assert row is not None
        return int(row[0])
    assert where == "TRUE"
    return sum(
        len(
            memory_rows.list_memories(
                backend.store, system_context(team), MemoryFilter(team_id=team, limit=1000)
            ).memories
        )
        for team in ("t1", "t2")
    )


@EVERY_VERSION
def test_concurrent_saves_at_limit_minus_one_create_exactly_one_row(backend: Backend) -> None:
    limit = 5
    svc = backend.service(max_memories_per_user=limit)
    for i in range(limit - 1):
        svc.save(ALICE, SaveMemory(key=f"k{i}", value="v"))
    barrier = threading.Barrier(CONCURRENT)
    accepted: list[str] = []
    refused: list[QuotaExceeded] = []
    lock = threading.Lock()

    def save(i: int) -> None:
        barrier.wait()
        try:
            memory, created = svc.save(ALICE, SaveMemory(key=f"new{i}", value="racing"))
        except QuotaExceeded as exc:
            with lock:
                refused.append(exc)
            return
        assert created
        with lock:
            accepted.append(memory.id)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(accepted) == 1
    assert len(refused) == CONCURRENT - 1
    assert {e.details["quota"] for e in refused} == {"memoriesPerUser"}
    assert {e.details["limit"] for e in refused} == {limit}
    assert stored(backend) == limit - 1 + len(accepted)


@EVERY_VERSION
def test_persona_user_rows_with_made_up_persona_ids_count_toward_the_user(
    backend: Backend,
) -> None:
    svc = backend.service(max_memories_per_user=4)
    svc.save(ALICE, SaveMemory(key="a", value="user scope"))
    for i in range(3):
        svc.save(
            ALICE,
            SaveMemory(key="k", value=f"persona {i}", persona_id=f"never-configured-{i}"),
        )
    with pytest.raises(QuotaExceeded) as err:
        svc.save(ALICE, SaveMemory(key="k", value="one more", persona_id="never-configured-99"))
    assert err.value.details == {
        "quota": "memoriesPerUser",
        "limit": 4,
        "setting": "ENGRAM_MAX_MEMORIES_PER_USER",
    }
    with pytest.raises(QuotaExceeded):
        svc.save(ALICE, SaveMemory(key="b", value="nor in user scope"))
    assert svc.save(ALICE, SaveMemory(key="a", value="updates still work"))[1] is False
    assert svc.save(BOB, SaveMemory(key="a", value="bob has his own quota"))[1] is True
    # a proposal past the quota is dropped, never stored
    assert svc.jobs.propose("t1", "alice", None, "learnt", "x", 0.8, "c1") is None
    assert stored(backend) == 5
    if backend.url is not None:
        assert stored(backend, "owner_id = %s OR user_id = %s", "alice", "alice") == 4


@EVERY_VERSION
def test_a_rejected_proposal_does_not_count_but_a_pending_one_does(backend: Backend) -> None:
    svc = backend.service(max_memories_per_user=2)
    p = svc.jobs.propose("t1", "alice", None, "hobby", "chess", 0.8, "c1")
    assert p is not None
    svc.save(ALICE, SaveMemory(key="a", value="v"))
    with pytest.raises(QuotaExceeded):
        svc.save(ALICE, SaveMemory(key="b", value="v"))
    svc.review.reject(ADMIN, p.id)
    assert svc.save(ALICE, SaveMemory(key="b", value="v"))[1] is True
    assert stored(backend) == 3


@EVERY_VERSION
def test_per_persona_and_per_team_quotas_name_themselves(backend: Backend) -> None:
    svc = backend.service(max_memories_per_persona=2, max_memories_per_team=5)
    svc.save(ADMIN, SaveMemory(key="menu", value="soup", persona_id="chef", scope=Scope.PERSONA))
    svc.save(ALICE, SaveMemory(key="diet", value="vegan", persona_id="chef"))
    with pytest.raises(QuotaExceeded) as persona:
        svc.save(BOB, SaveMemory(key="diet", value="keto", persona_id="chef"))
    assert persona.value.details == {
        "quota": "memoriesPerPersona",
        "limit": 2,
        "setting": "ENGRAM_MAX_MEMORIES_PER_PERSONA",
    }
    assert svc.jobs.propose("t1", "bob", "chef", "pet", "dog", 0.8, "c1") is None  # dropped
    svc.save(BOB, SaveMemory(key="diet", value="keto", persona_id="tutor"))
    svc.save(BOB, SaveMemory(key="a", value="v"))
    svc.save(ALICE, SaveMemory(key="a", value="v"))
    with pytest.raises(QuotaExceeded) as team:
        svc.save(ALICE, SaveMemory(key="b", value="v"))
    assert team.value.details == {
        "quota": "memoriesPerTeam",
        "limit": 5,
        "setting": "ENGRAM_MAX_MEMORIES_PER_TEAM",
    }
    # another team is not affected
    assert svc.save(Caller(user_id="alice", team_id="t2"), SaveMemory(key="b", value="v"))[1]
    assert stored(backend) == 6
    if backend.url is not None:
        assert stored(backend, "team_id = %s", "t1") == 5
        assert stored(backend, "status = %s", Status.ACTIVE.value) == 6


def test_usage_counters_match_a_recount_after_every_kind_of_write(pg_backend: Backend) -> None:
    """The triggers keep memory_usage exact: saves (new and updates), proposals (new,
    refreshed, revived), approve, reject, edits, deletes, retention and erasure."""
    svc = pg_backend.service()
    saved, _ = svc.save(ALICE, SaveMemory(key="a", value="1"))
    svc.save(ALICE, SaveMemory(key="a", value="2"))
    svc.save(ALICE, SaveMemory(key="b", value="1", persona_id="chef"))
    svc.save(ADMIN, SaveMemory(key="menu", value="soup", persona_id="chef", scope=Scope.PERSONA))
    one = svc.jobs.propose("t1", "bob", "chef", "k", "v", 0.8, "c1")
    two = svc.jobs.propose("t1", "bob", None, "k", "v", 0.8, "c1")
    three = svc.jobs.propose("t1", "alice", "chef", "faq", "x", 0.8, "c1", "persona")
    assert one is not None
    assert two is not None
    assert three is not None
    svc.jobs.propose("t1", "bob", "chef", "k", "v2", 0.8, "c2")  # refreshed
    svc.review.approve(ADMIN, one.id, Approve(value="edited"))
    svc.review.reject(ADMIN, two.id)
    svc.review.reject(ADMIN, three.id)
    svc.update(ALICE, saved.id, EditMemory(value="3"))
    svc.archive(ALICE, saved.id)
    svc.delete(BOB, one.id)
    pg_backend.clock.advance(days=100)
    now = pg_backend.clock.now_ms()
    svc.jobs.apply_retention("t1", archive_after_days=30, delete_archived_after_days=None, now=now)
    svc.jobs.propose("t1", "alice", None, "a", "revived", 0.8, "c3")
    svc.save(Caller(user_id="alice", team_id="t2"), SaveMemory(key="a", value="1"))
    svc.erase(ALICE)
    with psycopg.connect(pg_backend.url or "") as conn:
        recount = conn.execute(
            "SELECT m.team_id, s.kind, s.subject, count(*) FROM memories m"
            " CROSS JOIN LATERAL engram_usage_subjects(m.scope, m.owner_id, m.user_id) s"
            " WHERE m.status <> 'rejected' AND s.subject IS NOT NULL"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ).fetchall()
        usage = conn.execute(
            "SELECT team_id, kind, subject, used FROM memory_usage WHERE used <> 0 ORDER BY 1, 2, 3"
        ).fetchall()
        assert usage == recount
        assert ("t1", "user", "alice") not in {u[:3] for u in usage}
        assert conn.execute(
            "SELECT count(*) FROM memory_usage WHERE team_id = 't1' AND subject = 'alice'"
        ).fetchone() == (0,)
