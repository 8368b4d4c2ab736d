"""Possible duplicates and merging in Chromium, against an ``engram serve`` with the offline
embedder (``ENGRAM_EMBEDDER=local``), so that two memories of one owner and scope saying much
the same under different keys are flagged. Two proposals learnt from one user's transcripts,
"preferred editor: helix" and "editor of choice: helix", each say in Review that they may
duplicate the other; Merge folds one into the other (If-Match of the version shown): it leaves
the queue, the status says so, the survivor's history lists the folded version first, and the
folded id answers 404. A merge refused (a proposal edited meanwhile: 412; the memory it would
go into already merged away: 422) is an alert whose Reload reads the queue again. A memory
with a change learnt for it and waiting for review shows that change, current → proposed with
what changes word by word, at the top of its history in My memory. axe-core finds nothing
serious at either width in each of these states."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, Route, expect
from tests.browser.test_changes import changes_pending
from tests.browser.ui import (
    WIDTHS,
    assert_accessible,
    open_context,
    open_review,
    pending_proposals,
    photograph,
    sign_in,
    user_client,
)
from tests.e2e.harness import LocalEngram, Tenant

MERGE = re.compile(r"/v1/memories/[^/]+/merge$")

EDITOR = "preferred editor"
CHOICE = "editor of choice"
SAID = {
    "conv-editor": "My preferred editor is helix.",
    "conv-choice": "My editor of choice is helix.",
}
FIRST = "My favourite editor is helix with vim keys."
CHANGED = "My favourite editor is kakoune with vim keys."


@pytest.fixture(scope="module")
def embedded(engram_with: Callable[..., LocalEngram]) -> LocalEngram:
    """The service with the offline embedder: duplicates are flagged."""
    return engram_with(ENGRAM_EMBEDDER="local")


def call(
    engram: LocalEngram,
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    **headers: str,
) -> tuple[int, Any]:
    """A call of the API as an assistant's backend makes it: the status and the JSON answer."""
    with engram.http() as http:
        response = http.request(method, path, json=body, headers=engram.headers(token, **headers))
    return response.status_code, response.json() if response.content else None


def twins(engram: LocalEngram, tenant: Tenant) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user's two proposals of one value under two keys, each flagged as the other's
    possible duplicate in the queue: (preferred editor, editor of choice)."""
    proposals = pending_proposals(engram, tenant, SAID)
    editor, choice = proposals["conv-editor"], proposals["conv-choice"]
    assert (editor["key"], editor["value"]) == (EDITOR, "helix"), editor
    assert (choice["key"], choice["value"]) == (CHOICE, "helix"), choice
    assert choice["duplicateOf"].to_json() == {"id": editor["id"], "key": EDITOR}
    assert editor["duplicateOf"].to_json() == {"id": choice["id"], "key": CHOICE}
    return editor, choice


def proposal(page: Page, key: str) -> Locator:
    queue = page.get_by_role("list", name="Pending proposals")
    return queue.get_by_role("listitem", name=f"Proposal {key}", exact=True)


def test_an_admin_merges_a_proposal_into_its_duplicate(browser: Browser, embedded: LocalEngram):
    tenant = embedded.tenant()
    editor, choice = twins(embedded, tenant)
    admin_token = embedded.token(tenant.admin, tenant.team, admin=True)
    user_token = embedded.token(tenant.user, tenant.team)

    for width in WIDTHS:
        if width == "desktop":
            continue
        other = open_review(browser, embedded, tenant, width)
        expect(proposal(other, CHOICE)).to_contain_text(f"Possible duplicate of “{EDITOR}”")
        assert_accessible(other, f"review with possible duplicates, {width}")
        photograph(other, f"review-duplicates-{width}")
        other.context.close()

    page = open_review(browser, embedded, tenant, "desktop")
    folded, survivor = proposal(page, CHOICE), proposal(page, EDITOR)
    expect(folded).to_contain_text(f"Possible duplicate of “{EDITOR}”")
    expect(survivor).to_contain_text(f"Possible duplicate of “{CHOICE}”")
    assert_accessible(page, "review with possible duplicates, desktop")
    photograph(page, "review-duplicates-desktop")

    # Merge folds “editor of choice” into “preferred editor”, on the version shown (the body
    # of a request is read where it is routed: Chromium does not report it otherwise)
    sent: list[tuple[Any, str | None]] = []

    def merges(route: Route) -> None:
        sent.append((route.request.post_data_json, route.request.headers.get("if-match")))
        route.continue_()

    page.route(MERGE, merges)
    page.get_by_role("button", name=f"Merge {CHOICE} into {EDITOR}", exact=True).click()
    expect(folded).to_have_count(0)
    assert sent == [({"into": editor["id"]}, f'"{choice["version"]}"')]
    expect(
        page.get_by_role("status").filter(has_text=f"Merged “{CHOICE}” into “{EDITOR}”")
    ).to_be_visible()
    # the survivor stays in the queue, no longer naming the memory that is gone
    expect(survivor).to_be_visible()
    expect(survivor).not_to_contain_text("Possible duplicate")
    expect(survivor.get_by_role("button", name="Merge", exact=False)).to_have_count(0)
    assert_accessible(page, "review after a merge, desktop")

    # the API: the folded version is the survivor's first, and the folded id is gone
    status, history = call(embedded, admin_token, "GET", f"/v1/memories/{editor['id']}/history")
    assert status == 200, history
    assert [(v["version"], v["key"], v["value"]) for v in history["versions"]] == [
        (1, CHOICE, "helix"),
        (2, EDITOR, "helix"),
    ]
    assert history["actions"][-1]["action"] == "merge"
    for token in (admin_token, user_token):
        assert call(embedded, token, "GET", f"/v1/memories/{choice['id']}")[0] == 404
    admin = user_client(embedded, tenant.admin, tenant.team, admin=True)
    assert [m["id"] for m in admin.review_queue()] == [editor["id"]]

    # the survivor's history in Review shows the same
    survivor.get_by_role("button", name=f"History of {EDITOR}", exact=True).click()
    shown = survivor.get_by_role("region", name=f"History of {EDITOR}")
    versions = shown.get_by_role("list", name=f"Versions of {EDITOR}")
    first = versions.get_by_role("listitem", name="Version 1", exact=True)
    expect(first.locator("dl dd").nth(0)).to_have_text(CHOICE)
    second = versions.get_by_role("listitem", name="Version 2", exact=True)
    expect(second.locator("dl dd").nth(0)).to_have_text(f"[removed: {CHOICE}][added: {EDITOR}]")
    expect(shown).to_contain_text(f"merged a duplicate into it by {tenant.admin}")
    assert_accessible(page, "review, a merged proposal's history, desktop")
    page.context.close()


def test_a_refused_merge_is_an_alert_and_reload_reads_the_queue_again(
    browser: Browser, embedded: LocalEngram
):
    tenant = embedded.tenant()
    editor, choice = twins(embedded, tenant)
    admin = user_client(embedded, tenant.admin, tenant.team, admin=True)
    admin_token = embedded.token(tenant.admin, tenant.team, admin=True)
    page = open_review(browser, embedded, tenant, "desktop")

    # edited by another admin since the page read it (still close): 412, nothing merged
    status, edited = call(
        embedded, admin_token, "PATCH", f"/v1/memories/{choice['id']}", {"value": "Helix"}
    )
    assert status == 200, edited
    page.get_by_role("button", name=f"Merge {CHOICE} into {EDITOR}", exact=True).click()
    alert = proposal(page, CHOICE).get_by_role("alert")
    expect(alert).to_contain_text("Conflict: it changed since you opened it")
    expect(alert).to_contain_text("nothing was merged")
    assert_accessible(page, "review, a merge refused as stale, desktop")
    alert.get_by_role("button", name="Reload").click()
    expect(alert).to_have_count(0)
    expect(proposal(page, CHOICE)).to_contain_text("Helix")
    expect(proposal(page, CHOICE)).to_contain_text(f"Possible duplicate of “{EDITOR}”")
    assert call(embedded, admin_token, "GET", f"/v1/memories/{choice['id']}")[0] == 200

    # the memory it would go into was rejected by another admin meanwhile: 422 on into
    admin.reject(editor["id"])
    page.get_by_role("button", name=f"Merge {CHOICE} into {EDITOR}", exact=True).click()
    alert = proposal(page, CHOICE).get_by_role("alert")
    expect(alert).to_contain_text("Cannot merge these two")
    expect(alert).to_contain_text("Nothing was merged")
    assert_accessible(page, "review, a merge refused on into, desktop")
    alert.get_by_role("button", name="Reload").click()
    expect(proposal(page, EDITOR)).to_have_count(0)
    expect(proposal(page, CHOICE)).to_be_visible()
    expect(proposal(page, CHOICE)).not_to_contain_text("Possible duplicate")
    assert [m["id"] for m in admin.review_queue()] == [choice["id"]]
    page.context.close()


def test_a_memory_shows_the_change_waiting_for_review_in_its_history(
    browser: Browser, embedded: LocalEngram
):
    tenant = embedded.tenant()
    admin = user_client(embedded, tenant.admin, tenant.team, admin=True)
    learnt = pending_proposals(embedded, tenant, {"conv-first": FIRST})["conv-first"]
    assert learnt["key"] == EDITOR, learnt
    memory = admin.approve(learnt["id"])
    change = changes_pending(embedded, tenant, {"conv-change": CHANGED})["conv-change"]
    user_token = embedded.token(tenant.user, tenant.team)
    status, history = call(embedded, user_token, "GET", f"/v1/memories/{memory['id']}/history")
    assert status == 200, history
    assert history["pendingChange"]["id"] == change["id"]
    assert history["pendingChange"]["value"] == "kakoune with vim keys"
    sure = f"Confidence {round(history['pendingChange']['confidence'] * 100)}%"

    for width in WIDTHS:
        page = open_context(browser, width).new_page()
        sign_in(page, embedded, tenant.user, tenant.team)
        item = page.get_by_role("list", name="Memories").get_by_role(
            "listitem", name=f"Memory {EDITOR}"
        )
        expect(item).to_contain_text("helix with vim keys")
        item.get_by_role("button", name=f"History of {EDITOR}").click()
        shown = item.get_by_role("region", name=f"History of {EDITOR}")
        waiting = shown.get_by_role("region", name=f"Change waiting for review of {EDITOR}")
        expect(waiting.get_by_role("heading")).to_have_text("A change is waiting for review")
        expect(waiting).to_contain_text(f"Current (version {memory['version']})")
        expect(waiting.locator("dl dd").nth(0)).to_have_text("helix with vim keys")
        expect(waiting.locator("dl dd").nth(1)).to_have_text("kakoune with vim keys")
        expect(waiting.locator("dl dd").nth(2).locator("del")).to_have_text("[removed: helix]")
        expect(waiting.locator("dl dd").nth(2).locator("ins")).to_have_text("[added: kakoune]")
        expect(waiting.get_by_role("meter", name=sure)).to_be_visible()
        assert_accessible(page, f"a memory's history with a change waiting, {width}")
        photograph(page, f"my-memory-waiting-change-{width}")
        page.context.close()

    # approved, it is the memory's next version, and nothing waits any more
    admin.approve(change["id"])
    page = open_context(browser).new_page()
    sign_in(page, embedded, tenant.user, tenant.team)
    item = page.get_by_role("list", name="Memories").get_by_role(
        "listitem", name=f"Memory {EDITOR}"
    )
    expect(item).to_contain_text("kakoune with vim keys")
    item.get_by_role("button", name=f"History of {EDITOR}").click()
    shown = item.get_by_role("region", name=f"History of {EDITOR}")
    latest = shown.get_by_role("listitem", name=f"Version {memory['version'] + 1}", exact=True)
    expect(latest.locator("dl dd").nth(1).locator("ins")).to_have_text("[added: kakoune]")
    expect(shown.get_by_text("A change is waiting for review")).to_have_count(0)
    page.context.close()
