from __future__ import annotations

import subprocess
import sys

from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.clock import FakeClock
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory
from engram.memories.recall import HashingEmbedder
from engram.memories.service import MemoryService
from engram.settings import Settings

ALICE = Caller(user_id="alice", team_id="t1")


class BrokenEmbedder:
    dimensions = 8

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("bedrock is down")


def service(embedder: object = None) -> MemoryService:
    store = InMemoryMemoryStore(FakeClock())
    return MemoryService(store, embedder=embedder, settings=Settings(), clock=FakeClock())  # type: ignore[arg-type]


def test_embedder_outage_degrades_to_keyword_recall() -> None:
    svc = service(BrokenEmbedder())
    svc.save(ALICE, SaveMemory(key="city", value="lives in Lyon"))
    assert [m.value for m in svc.recall(ALICE, Recall(query="lyon"))] == ["lives in Lyon"]


def test_vector_and_keyword_agree_with_the_test_embedder() -> None:
    svc = service(HashingEmbedder(32))
    svc.save(ALICE, SaveMemory(key="city", value="lives in Lyon"))
    svc.save(ALICE, SaveMemory(key="pet", value="a cat"))
    assert [m.value for m in svc.recall(ALICE, Recall(query="Lyon city"))] == ["lives in Lyon"]


def test_domain_imports_no_infrastructure_and_connects_nothing() -> None:
    code = (
        "import sys; import engram.memories.service, engram.memories.tools, "
        "engram.memories.hint, engram.memories.scopes, engram.memories.privacy, "
        "engram.adapters.postgres.store, engram.adapters.bedrock_embedder; "
        "bad = [m for m in ('boto3', 'botocore', 'redis', 'aws_lambda_powertools') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    domain = (
        "import sys; import engram.memories.service; "
        "print([m for m in sys.modules if m.split('.')[0] in "
        "('boto3','botocore','redis','psycopg','psycopg_pool','aws_lambda_powertools')])"
    )
    out2 = subprocess.run(
        [sys.executable, "-c", domain], capture_output=True, text=True, check=True
    )
    assert out2.stdout.strip() == "[]"
