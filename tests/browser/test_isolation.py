"""A second user of the same team sees nothing of the first, in the page and on the wire:
every API response their console receives (the network log of the page) is free of the
first user's ids and memory values — while the first user's own console does receive them,
so the check can fail. A direct request for the first user's memory is 404."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Browser, expect
from tests.browser.ui import (
    NetworkLog,
    facts_from_events,
    fetch,
    open_context,
    sign_in,
    stored_token,
    user_client,
)
from tests.e2e.harness import LocalEngram


def test_a_second_user_sees_nothing_of_the_first(browser: Browser, engram: LocalEngram):
    tenant = engram.tenant()
    secret = f"alpaca-{uuid.uuid4().hex[:8]}"
    alice = user_client(engram, tenant.user, tenant.team)
    facts_from_events(engram, tenant)
    memory = alice.save("hidden_note", f"the vault code is {secret}")
    needles = [secret, memory["id"], tenant.user, tenant.identity]

    # the first user's console receives them: the same check on it finds every needle
    own_context = open_context(browser)
    own = own_context.new_page()
    own_log = NetworkLog.of(own)
    sign_in(own, engram, tenant.user, tenant.team)
    expect(own.get_by_role("listitem", name="Memory hidden_note")).to_contain_text(secret)
    expect(own.get_by_role("list", name="Learnt facts")).to_be_visible()
    own_bodies = " ".join(text for _, _, text in own_log.bodies())
    assert [n for n in needles if n not in own_bodies] == []
    own_context.close()

    context = open_context(browser)
    page = context.new_page()
    log = NetworkLog.of(page)
    sign_in(page, engram, tenant.other_user, tenant.team)
    expect(page.get_by_text("Engram has not learnt anything about you yet")).to_be_visible()
    expect(page.get_by_text(re.compile("^No memories yet"))).to_be_visible()
    page.get_by_role("searchbox", name="Search memories").fill("vault")
    page.get_by_role("searchbox", name="Search memories").press("Enter")
    expect(page.get_by_role("listitem", name="Memory hidden_note")).to_have_count(0)
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download my data (JSON)").click()
    exported = download_info.value.path().read_text(encoding="utf-8")
    status = fetch(page, "GET", f"/v1/memories/{memory['id']}", stored_token(page))
    assert status == 404

    text = page.locator("body").inner_text()
    bodies = log.bodies()
    assert len(bodies) >= 3, bodies  # facts, memories, export at least
    for needle in needles:
        assert needle not in text
        assert needle not in exported
        leaks = [(url, code) for url, code, body in bodies if needle in body]
        assert leaks == [], (needle, leaks)
    context.close()
