from __future__ import annotations

from engram.local.serve import recall_mode
from engram.settings import Settings


def test_the_banner_says_recall_is_keyword_only_and_how_to_turn_hybrid_on() -> None:
    line = recall_mode(Settings(embedder="none"))
    assert "keyword only" in line
    assert "ENGRAM_EMBEDDER=local" in line


def test_the_banner_names_the_embedder_of_hybrid_recall() -> None:
    line = recall_mode(Settings(embedder="local"))
    assert line.startswith("recall: hybrid")
    assert "local" in line
