"""Review, as an admin uses it in Chromium: proposals made from a user's transcripts are
listed with where they came from; one approved (the user can then recall it), one edited and
approved (recalled as edited), one rejected — and the same transcript sent again brings no
new pending item. A non-admin has no Review or Settings page, and the API refuses them the
very calls those pages make (403)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import Browser, expect
from tests.browser.ui import (
    NetworkLog,
    fetch,
    nav,
    open_context,
    pending_proposals,
    sign_in,
    stored_token,
    user_client,
)
from tests.e2e.harness import LocalEngram, eventually

from engram.client import EngramAPIError, EngramClient

SENTENCES = {
    "conv-keep": "My favourite editor is helix.",
    "conv-edit": "I live in Lisbon.",
    "conv-drop": "I prefer tea over coffee.",
}


def read(client: EngramClient, memory: dict[str, Any]) -> object:
    """The memory as ``client`` reads it now, or the error it gets (for a failure message)."""
    try:
        return client.get_memory(memory["id"])
    except EngramAPIError as error:
        return error


def test_an_admin_approves_edits_and_rejects_proposals(browser: Browser, engram: LocalEngram):
    tenant = engram.tenant()
    alice = user_client(engram, tenant.user, tenant.team)
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    proposals = pending_proposals(engram, tenant, SENTENCES)
    keys = {conversation: m["key"] for conversation, m in proposals.items()}
    assert len(set(keys.values())) == 3, keys

    context = open_context(browser)
    page = context.new_page()
    sign_in(page, engram, tenant.admin, tenant.team, admin=True)
    nav(page, "Review")
    expect(page.get_by_role("heading", name="Review", level=1)).to_be_visible()
    queue = page.get_by_role("list", name="Pending proposals")
    for conversation, key in keys.items():
        item = queue.get_by_role("listitem", name=f"Proposal {key}", exact=True)
        expect(item).to_contain_text(proposals[conversation]["value"])
        expect(item).to_contain_text(conversation)  # where it came from

    # approve one: the user recalls it
    page.get_by_role("button", name=f"Approve {keys['conv-keep']}", exact=True).click()
    expect(queue.get_by_role("listitem", name=f"Proposal {keys['conv-keep']}")).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="Approved")).to_be_visible()
    assert proposals["conv-keep"]["value"] in [m["value"] for m in alice.recall()]

    # edit and approve another: recalled as edited
    edited = keys["conv-edit"]
    page.get_by_role("button", name=f"Edit {edited} and approve", exact=True).click()
    editor = page.get_by_role("form", name=f"Edit {edited}")
    editor.get_by_label("Value").fill("Lisbon, Portugal")
    editor.get_by_role("button", name="Approve with changes").click()
    expect(queue.get_by_role("listitem", name=f"Proposal {edited}")).to_have_count(0)
    # the flash is shown once the approval has been answered (the first one's may still show)
    expect(
        page.get_by_role("status").filter(has_text=f"Approved “{edited}” with your changes")
    ).to_be_visible()
    recalled = {m["key"]: m["value"] for m in alice.recall()}
    assert recalled.get(edited) == "Lisbon, Portugal", (
        recalled,
        read(alice, proposals["conv-edit"]),
    )

    # reject a third: the same transcript again proposes nothing new
    rejected = keys["conv-drop"]
    page.get_by_role("button", name=f"Reject {rejected}", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Rejected")).to_be_visible()
    expect(page.get_by_text("Nothing to review")).to_be_visible()
    assert rejected not in {m["key"] for m in alice.recall()}

    alice.send_transcript("conv-drop-again", [{"role": "user", "content": SENTENCES["conv-drop"]}])
    alice.send_transcript("conv-marker", [{"role": "user", "content": "My name is Ally."}])
    # the marker is extracted after the repeat: once it is pending, the repeat was processed
    eventually(
        lambda: any(m["sourceChannelId"] == "conv-marker" for m in admin.review_queue()),
        timeout_s=90,
        every_s=0.5,
    )
    page.reload()
    expect(queue.get_by_role("listitem")).to_have_count(1)
    expect(queue.get_by_role("listitem")).to_contain_text("conv-marker")
    expect(queue).not_to_contain_text("coffee")
    assert [m["sourceChannelId"] for m in admin.review_queue()] == ["conv-marker"]
    context.close()


def test_a_non_admin_has_no_review_or_settings_and_is_refused_their_calls(
    browser: Browser, engram: LocalEngram
):
    tenant = engram.tenant()
    pending = pending_proposals(engram, tenant, {"conv-x": "My favourite colour is teal."})
    pending_id = pending["conv-x"]["id"]

    # what the Review and Settings pages call, as an admin's browser calls it
    admin_context = open_context(browser)
    admin_page = admin_context.new_page()
    log = NetworkLog.of(admin_page)
    sign_in(admin_page, engram, tenant.admin, tenant.team, admin=True)
    nav(admin_page, "Review")
    expect(admin_page.get_by_role("list", name="Pending proposals")).to_be_visible()
    nav(admin_page, "Settings")
    expect(admin_page.get_by_role("form", name="Team settings")).to_be_visible()
    expect(admin_page.get_by_role("form", name="Add a persona")).to_be_visible()
    admin_calls = set()
    for response in log.responses:
        url = urlsplit(response.url)
        if response.ok and re.match(r"/v1/(review|personas|settings)", url.path):
            admin_calls.add((response.request.method, f"{url.path}?{url.query}".rstrip("?")))
    assert any(path.startswith("/v1/review") for _, path in admin_calls), admin_calls
    assert any(path.startswith("/v1/settings") for _, path in admin_calls), admin_calls
    admin_context.close()

    context = open_context(browser)
    page = context.new_page()
    sign_in(page, engram, tenant.user, tenant.team)
    pages = page.get_by_role("navigation", name="Pages")
    expect(pages.get_by_role("link", name="My memory")).to_be_visible()
    expect(pages.get_by_role("link", name="Review")).to_have_count(0)
    expect(pages.get_by_role("link", name="Settings")).to_have_count(0)
    for route in ("/#/review", "/#/settings"):
        page.goto(f"{engram.url}{route}")
        expect(page.get_by_role("heading", name="Page not available")).to_be_visible()
        expect(page.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)

    token = stored_token(page)
    calls: set[tuple[str, str, Any]] = {(m, p, None) for m, p in admin_calls}
    calls |= {
        ("POST", f"/v1/review/{pending_id}/approve", "{}"),
        ("POST", f"/v1/review/{pending_id}/reject", None),
        ("POST", "/v1/review/bulk", json.dumps({"action": "approve", "ids": [pending_id]})),
        ("PUT", "/v1/personas/helpdesk", json.dumps({"memoryEnabled": False})),
        ("PUT", "/v1/settings/team", json.dumps({"memoryEnabled": False})),
    }
    refused = {
        (method, path): fetch(page, method, path, token, json.loads(body) if body else None)
        for method, path, body in sorted(calls, key=str)
    }
    assert set(refused.values()) == {403}, refused
    # nothing was decided
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    assert [m["id"] for m in admin.review_queue()] == [pending_id]
    context.close()


def test_a_concurrent_edit_by_another_admin_is_a_conflict(browser: Browser, engram: LocalEngram):
    tenant = engram.tenant()
    proposal = pending_proposals(engram, tenant, {"conv-c": "My favourite editor is helix."})
    memory = proposal["conv-c"]
    key = memory["key"]
    context = open_context(browser)
    page = context.new_page()
    sign_in(page, engram, tenant.admin, tenant.team, admin=True)
    nav(page, "Review")
    page.get_by_role("button", name=f"Edit {key} and approve", exact=True).click()
    page.get_by_role("form", name=f"Edit {key}").get_by_label("Value").fill("vim")

    # meanwhile another admin edits the same proposal (as their console does: If-Match)
    other = engram.headers(
        engram.token(f"{tenant.admin}-b", tenant.team, admin=True),
        **{"If-Match": f'"{memory["version"]}"'},
    )
    with engram.http() as http:
        edited = http.patch(
            f"/v1/memories/{memory['id']}", json={"value": "helix 24"}, headers=other
        )
        assert edited.status_code == 200, edited.text

    page.get_by_role("button", name="Approve with changes").click()
    expect(page.get_by_role("alert").filter(has_text="Conflict")).to_be_visible()
    # nothing of the late edit was written or approved: the other admin's edit is pending
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    assert [(m["id"], m["value"]) for m in admin.review_queue()] == [(memory["id"], "helix 24")]
    assert key not in {m["key"] for m in user_client(engram, tenant.user, tenant.team).recall()}
    page.get_by_role("button", name="Reload").click()
    proposal_item = page.get_by_role("listitem", name=f"Proposal {key}", exact=True)
    expect(proposal_item).to_contain_text("helix 24")

    # its history: proposed by extraction, edited by the other admin; restoring the proposal
    # as extracted is a new version by this admin, through the console
    proposal_item.get_by_role("button", name=f"History of {key}").click()
    versions = proposal_item.get_by_role("list", name=f"Versions of {key}")
    proposed = versions.get_by_role("listitem", name="Version 1", exact=True)
    expect(proposed).to_contain_text("as the extraction job, through extraction")
    expect(proposed).to_contain_text("Waiting for review")
    other_edit = versions.get_by_role("listitem", name=f"Version {memory['version'] + 1}")
    expect(other_edit).to_contain_text(f"By {tenant.admin}-b, as an admin, through the API")
    expect(other_edit.locator("ins")).to_contain_text("24")
    proposed.get_by_role("button", name="Restore version 1").click()
    restored = versions.get_by_role("listitem", name=f"Version {memory['version'] + 2}")
    expect(restored).to_contain_text(f"By {tenant.admin}, as an admin, through the console")
    expect(proposal_item.locator(".item-title")).to_have_text(f"{key} {memory['value']}")
    assert [(m["id"], m["value"]) for m in admin.review_queue()] == [
        (memory["id"], memory["value"])
    ]
    context.close()
