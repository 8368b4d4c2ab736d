"""Change proposals and merges through ``engram serve`` as the Python client meets them: a
transcript teaching a new value for an approved memory reaches the review queue with the value
it would replace; approving it is the memory's next version under its id; a rejected change
never comes back; a merge folds one memory into another, keeping both histories."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.harness import LocalEngram, Tenant, eventually, pending_from_transcript

from engram.client import EngramAPIError


def change_of(admin: Any, memory_id: str, needle: str) -> Any:
    def probe() -> Any:
        found = [
            item
            for item in admin.review_queue()
            if item.current is not None and item.current.id == memory_id and needle in item.value
        ]
        return found[0] if found else None

    return eventually(probe, timeout_s=60, every_s=0.5)


def test_a_new_value_in_a_transcript_is_a_change_proposal_of_the_same_memory(
    service: LocalEngram, tenant: Tenant
) -> None:
    alice = service.user_client(tenant.user, tenant.team)
    admin = service.user_client(tenant.admin, tenant.team, admin=True)
    first = pending_from_transcript(
        service, tenant, "conv-1", "My favourite editor is helix.", "helix"
    )
    editor = admin.approve(first["id"])

    alice.send_transcript(
        "conv-2", [{"role": "user", "content": "My favourite editor is kakoune."}]
    )
    change = change_of(admin, editor.id, "kakoune")
    assert (change.current.value, change.current.version) == ("helix", editor.version)
    assert change.id != editor.id
    assert alice.memory_versions(editor.id).pending_change.id == change.id
    assert [m.value for m in alice.recall("editor")] == ["helix"]  # until a reviewer decides

    approved = admin.approve(change.id)
    assert (approved.id, approved.value, approved.version) == (
        editor.id,
        "kakoune",
        editor.version + 1,
    )
    assert [m.value for m in alice.recall("editor")] == ["kakoune"]
    with pytest.raises(EngramAPIError) as err:
        admin.reject(change.id)
    assert err.value.status == 409

    alice.send_transcript("conv-3", [{"role": "user", "content": "My favourite editor is zed."}])
    refused = change_of(admin, editor.id, "zed")
    assert admin.reject(refused.id).status == "rejected"
    assert alice.get_memory(editor.id).value == "kakoune"
    alice.send_transcript("conv-4", [{"role": "user", "content": "My favourite editor is zed."}])
    alice.send_transcript("conv-5", [{"role": "user", "content": "I prefer tea over coffee."}])
    eventually(lambda: any("tea" in m.value for m in admin.review_queue()), timeout_s=60)
    assert not any("zed" in m.value for m in admin.review_queue())


def test_a_merge_keeps_both_histories(service: LocalEngram, tenant: Tenant) -> None:
    alice = service.user_client(tenant.user, tenant.team)
    kept = alice.save("preferred editor", "vim")
    kept = alice.save("preferred editor", "helix")
    folded = alice.save("editor of choice", "helix")
    merged = alice.merge_memory(folded.id, kept.id)
    assert (merged.id, merged.version) == (kept.id, kept.version + 1)
    history = alice.memory_versions(kept.id)
    assert [(v.version, v.key, v.value) for v in history.versions] == [
        (1, "editor of choice", "helix"),
        (2, "preferred editor", "vim"),
        (3, "preferred editor", "helix"),
    ]
    with pytest.raises(EngramAPIError) as err:
        alice.get_memory(folded.id)
    assert err.value.status == 404
    bob = service.user_client(tenant.other_user, tenant.team)
    theirs = bob.save("editor", "helix")
    with pytest.raises(EngramAPIError) as err:
        alice.merge_memory(kept.id, theirs.id)
    assert err.value.status == 422
    assert "into" in str(err.value.details)
    assert alice.get_memory(kept.id).version == merged.version
