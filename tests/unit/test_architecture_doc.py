"""docs/architecture.md's table of layers is the one tests/unit/test_layering.py enforces, and
every package of ``engram`` has its row: a new package, or a package moved between layers,
fails here until the page says so."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_layering import DOMAIN, OUTER, PACKAGE

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
BLOCK = re.compile(r"<!-- layers:.*?-->\n(?P<table>.*?)<!-- /layers -->", re.DOTALL)


def layers_of(text: str) -> dict[str, list[str]]:
    """``{layer: [package, ...]}`` from the marked table (its second column, in order)."""
    found = BLOCK.search(text)
    assert found, "docs/architecture.md has no <!-- layers --> ... <!-- /layers --> table"
    rows: dict[str, list[str]] = {}
    for line in found["table"].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        rows[cells[0]] = re.findall(r"`([\w.]+)`", cells[1])
    return rows


def test_the_page_lists_the_layers_the_layering_test_enforces() -> None:
    layers = layers_of(DOC.read_text())
    assert layers.get("domain") == list(DOMAIN)
    assert layers.get("outer") == [name.removeprefix("engram.") for name in OUTER]


def test_every_package_of_engram_is_in_one_layer() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(DOMAIN) | {name.removeprefix("engram.") for name in OUTER}


def test_the_table_reader_sees_a_missing_or_changed_row() -> None:
    table = (
        "<!-- layers: x -->\n| layer | packages | may not import |\n|---|---|---|\n"
        "| domain | `behaviour`, `memories` | `engram.adapters` |\n<!-- /layers -->\n"
    )
    assert layers_of(table) == {"domain": ["behaviour", "memories"]}
