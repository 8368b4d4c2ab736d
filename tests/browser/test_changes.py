"""Change proposals in Review, in Chromium against ``engram serve``: a new value learnt from a
transcript for a key whose memory is active waits beside that memory. Review shows it as a
change of an existing memory: the current value and its version, the proposed value, and what
changes word by word (removed words struck through, added ones marked). Approving it makes the
proposed value the memory's next version under the memory's own id. A change of a value the
user wrote themselves shows that value as withheld, with nothing to compare, and rejecting it
keeps the memory as it was; only a change's value can be edited before it is approved, and a
change another admin decided first is a conflict. axe-core finds nothing serious on the page
at either width."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, expect
from tests.browser.ui import (
    WIDTHS,
    assert_accessible,
    open_review,
    pending_proposals,
    photograph,
    user_client,
)
from tests.e2e.harness import LocalEngram, Tenant, eventually

EDITOR = "preferred editor"
FIRST = "My favourite editor is helix with vim keys."
CHANGED = "My favourite editor is kakoune with vim keys."
LOCATION = "location"
MOVED = "I live in Porto."
WITHHELD = "(the user's own value — not shown)"


def changes_pending(
    engram: LocalEngram, tenant: Tenant, sentences: dict[str, str]
) -> dict[str, Any]:
    """``{conversation: sentence}`` sent as the user's transcripts, each a new value for a key
    whose memory is active; returns ``{conversation: review item}`` once each is a change
    (``current`` set) in the queue."""
    alice = user_client(engram, tenant.user, tenant.team)
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    for conversation, sentence in sentences.items():
        alice.send_transcript(conversation, [{"role": "user", "content": sentence}])

    def probe() -> dict[str, Any] | None:
        queue = {m["sourceChannelId"]: m for m in admin.review_queue() if m["current"]}
        return queue if set(sentences) <= set(queue) else None

    queue = eventually(probe, timeout_s=90, every_s=0.5)
    return {c: queue[c] for c in sentences}


def test_an_admin_sees_a_change_as_current_to_proposed_and_approves_it(
    browser: Browser, engram: LocalEngram
):
    tenant = engram.tenant()
    alice = user_client(engram, tenant.user, tenant.team)
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    # an approved proposal (its value the reviewers saw) and a value the user saved themselves
    proposal = pending_proposals(engram, tenant, {"conv-first": FIRST})["conv-first"]
    assert proposal["key"] == EDITOR, proposal
    editor = admin.approve(proposal["id"])
    own = alice.save(LOCATION, "Lisbon")
    changes = changes_pending(engram, tenant, {"conv-change": CHANGED, "conv-moved": MOVED})
    change, moved = changes["conv-change"], changes["conv-moved"]
    assert change["current"].to_json() == {
        "id": editor["id"],
        "version": editor["version"],
        "value": "helix with vim keys",
    }
    assert moved["current"].to_json() == {
        "id": own["id"],
        "version": own["version"],
        "value": None,
    }

    for width in WIDTHS:
        if width == "desktop":
            continue
        other = open_review(browser, engram, tenant, width)
        assert_accessible(other, f"review with changes, {width}")
        photograph(other, f"review-changes-{width}")
        other.context.close()

    page = open_review(browser, engram, tenant, "desktop")
    queue = page.get_by_role("list", name="Pending proposals")
    item = queue.get_by_role("listitem", name=f"Change to {EDITOR}", exact=True)
    expect(item).to_contain_text("Change to an existing memory")
    expect(item).to_contain_text(f"Current (version {editor['version']})")
    current = item.locator("dl dd").nth(0)
    proposed = item.locator("dl dd").nth(1)
    changed = item.locator("dl dd").nth(2)
    expect(current).to_have_text("helix with vim keys")
    expect(proposed).to_have_text("kakoune with vim keys")
    expect(changed.locator("del")).to_have_text("[removed: helix]")
    expect(changed.locator("ins")).to_have_text("[added: kakoune]")
    expect(item).to_contain_text("conv-change")  # where it came from

    withheld = queue.get_by_role("listitem", name=f"Change to {LOCATION}", exact=True)
    expect(withheld).to_contain_text(f"Current (version {own['version']})")
    expect(withheld.locator("dl dd").nth(0)).to_have_text(WITHHELD)
    expect(withheld.locator("dl dd").nth(1)).to_have_text("Porto")
    expect(withheld.locator("del, ins")).to_have_count(0)
    expect(withheld).not_to_contain_text("Lisbon")
    assert_accessible(page, "review with changes, desktop")
    photograph(page, "review-changes-desktop")

    # approving: the proposed value is the memory's next version, under its own id
    page.get_by_role("button", name=f"Approve {EDITOR}", exact=True).click()
    expect(item).to_have_count(0)
    expect(
        page.get_by_role("status").filter(
            has_text=f"Approved the change to “{EDITOR}”: it is version {editor['version'] + 1}"
        )
    ).to_be_visible()
    now = alice.get_memory(editor["id"])
    assert (now["id"], now["value"], now["version"], now["status"]) == (
        editor["id"],
        "kakoune with vim keys",
        editor["version"] + 1,
        "active",
    )
    assert {m["key"]: m["value"] for m in alice.recall()}[EDITOR] == "kakoune with vim keys"

    # rejecting the withheld one: the user's own value stays
    page.get_by_role("button", name=f"Reject {LOCATION}", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="the memory keeps its value")).to_be_visible()
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    kept = alice.get_memory(own["id"])
    assert (kept["value"], kept["version"]) == ("Lisbon", own["version"])
    assert admin.review_queue() == []

    # a later value of the same key: edited, then approved; only its value can be edited
    changes_pending(engram, tenant, {"conv-moved-again": "I live in Faro."})
    page.reload()
    page.get_by_role("button", name=f"Edit {LOCATION} and approve", exact=True).click()
    editor_form = page.get_by_role("form", name=f"Edit {LOCATION}")
    expect(editor_form.get_by_label("Key")).to_have_count(0)
    expect(editor_form.get_by_label("Value")).to_be_focused()
    editor_form.get_by_label("Value").fill("Faro, Portugal")
    assert_accessible(page, "review, a change being edited, desktop")
    editor_form.get_by_role("button", name="Approve with changes").click()
    expect(
        page.get_by_role("status").filter(
            has_text=f"Approved the change to “{LOCATION}” with your changes"
        )
    ).to_be_visible()
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    faro = alice.get_memory(own["id"])
    assert (faro["value"], faro["version"]) == ("Faro, Portugal", own["version"] + 1)

    # a change another admin decided first: a conflict; Reload reads the queue again
    braga = changes_pending(engram, tenant, {"conv-braga": "I live in Braga."})["conv-braga"]
    page.reload()
    expect(queue.get_by_role("listitem", name=f"Change to {LOCATION}")).to_be_visible()
    admin.reject(braga["id"])
    page.get_by_role("button", name=f"Approve {LOCATION}", exact=True).click()
    expect(page.get_by_role("alert").filter(has_text="Conflict")).to_be_visible()
    page.get_by_role("button", name="Reload").click()
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    assert alice.get_memory(own["id"])["value"] == "Faro, Portugal"
    page.context.close()
