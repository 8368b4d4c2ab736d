"""Every page of the console has its committed screenshot at both widths under docs/console/
(``make screenshots`` refreshes them from the browser tests' build/screenshots/), each a PNG
as wide as its viewport, and the README links each one."""

from __future__ import annotations

import struct

import pytest
from tests.browser.test_accessibility import PAGES
from tests.browser.ui import REPO, WIDTHS

DOCS = REPO / "docs" / "console"


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("width", list(WIDTHS))
def test_every_page_has_a_committed_screenshot_at_both_widths(page: str, width: str):
    path = DOCS / f"{page}-{width}.png"
    assert path.is_file(), f"{path} is missing: run `make screenshots` and commit docs/console/"
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    (pixels_wide,) = struct.unpack(">I", head[16:20])
    assert pixels_wide == WIDTHS[width], (path, pixels_wide)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"docs/console/{page}-{width}.png" in readme
