"""My memory, as a user uses it in Chromium against ``engram serve``: the facts their events
produced and the memories they saved are shown; they edit one and delete another (the API
then answers the same), download the export (the file holds what the page shows) and erase
everything (a confirmation naming what goes, then the receipt; the API then has nothing)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from tests.browser.ui import facts_from_events, open_context, sign_in, user_client
from tests.e2e.harness import LocalEngram

from engram.client import EngramAPIError


def test_a_user_sees_edits_deletes_exports_and_erases(
    browser: Browser, engram: LocalEngram, tmp_path: Path
):
    tenant = engram.tenant()
    alice = user_client(engram, tenant.user, tenant.team)
    facts = facts_from_events(engram, tenant)
    report = alice.save("favourite_report", "quarterly royalty statement, PDF")
    alice.save("timezone", "Europe/Paris")

    context = open_context(browser)
    page = context.new_page()
    sign_in(page, engram, tenant.user, tenant.team)
    expect(page.get_by_role("heading", name="My memory", level=1)).to_be_visible()

    learnt = page.get_by_role("list", name="Learnt facts")
    affinity = next(f for f in facts if f["subject"] == "tool_affinity:get_account")
    expect(learnt.get_by_text(affinity["content"])).to_be_visible()
    expect(learnt.get_by_role("meter").first).to_be_visible()
    memories = page.get_by_role("list", name="Memories")
    expect(memories.get_by_role("listitem", name="Memory favourite_report")).to_contain_text(
        "quarterly royalty statement, PDF"
    )
    expect(memories.get_by_role("listitem", name="Memory timezone")).to_contain_text("Europe/Paris")

    # edit one
    page.get_by_role("button", name="Edit timezone").click()
    editor = page.get_by_role("form", name="Edit timezone")
    editor.get_by_label("Value").fill("Europe/Lisbon")
    editor.get_by_role("button", name="Save").click()
    expect(memories.get_by_role("listitem", name="Memory timezone")).to_contain_text(
        "Europe/Lisbon"
    )
    assert {m["key"]: m["value"] for m in alice.recall()}["timezone"] == "Europe/Lisbon"

    # delete another
    page.get_by_role("button", name="Delete favourite_report").click()
    expect(page.get_by_role("status").filter(has_text="Deleted")).to_be_visible()
    expect(memories.get_by_role("listitem", name="Memory favourite_report")).to_have_count(0)
    with pytest.raises(EngramAPIError) as err:
        alice.get_memory(report["id"])
    assert err.value.status == 404

    # export: the download is the user's data as the API exports it
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download my data (JSON)").click()
    download = download_info.value
    assert re.fullmatch(
        rf"engram-export-{tenant.team}-{tenant.user}-\d{{4}}-\d{{2}}-\d{{2}}\.json",
        download.suggested_filename,
    ), download.suggested_filename
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    exported = json.loads(saved.read_text(encoding="utf-8"))
    assert {m["key"]: m["value"] for m in exported["memories"]} == {"timezone": "Europe/Lisbon"}
    assert "tool_affinity:get_account" in {f["subject"] for f in exported["facts"]}

    # erase everything: a confirmation naming what goes, then the receipt
    page.get_by_role("button", name=re.compile(r"^Erase everything")).click()
    confirm = page.get_by_role("group", name=f"Erase everything about {tenant.user}?")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("memor")
    expect(confirm).to_contain_text("fact")
    confirm.get_by_role("button", name="Yes, erase everything").click()
    receipt = page.get_by_role("region", name="Erasure receipt").or_(
        page.get_by_role("status", name="Erasure receipt")
    )
    expect(receipt).to_be_visible()
    expect(receipt).to_contain_text(f"{tenant.team}:{tenant.user}")
    counts = dict(
        zip(
            receipt.locator("dt").all_inner_texts(),
            receipt.locator("dd").all_inner_texts(),
            strict=True,
        )
    )
    assert counts["Memories"] == "1"  # the one left after the deletion
    assert int(counts["Facts"]) >= 1
    expect(page.get_by_role("list", name="Memories")).to_have_count(0)
    assert alice.recall() == []
    assert alice.facts() == []
    context.close()
