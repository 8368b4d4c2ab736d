"""The behavioural identity id is unambiguous across team/user ids containing ':'."""

from __future__ import annotations

from engram.identity import Caller, identity_id_for
from engram.maintenance import identity_id


def test_colon_in_team_or_user_cannot_collide() -> None:
    a = Caller(team_id="acme", user_id="eu:bob")
    b = Caller(team_id="acme:eu", user_id="bob")
    assert a.identity_id != b.identity_id


def test_ordinary_ids_are_unchanged() -> None:
    assert Caller(team_id="acme", user_id="alice").identity_id == "acme:alice"
    assert identity_id_for("team-1", "user_2.x@example.com") == "team-1:user_2.x@example.com"


def test_special_characters_are_percent_encoded() -> None:
    assert identity_id_for("a%3Ab", "c") == "a%253Ab:c"
    assert identity_id_for("a:b", "c") == "a%3Ab:c"
    assert identity_id_for("{t}", "u}") == "%7Bt%7D:u%7D"
    # an id that already looks escaped does not collide with the one it mimics
    assert identity_id_for("a%3Ab", "c") != identity_id_for("a:b", "c")


def test_maintenance_uses_the_same_identity_id() -> None:
    assert identity_id("acme:eu", "bob") == Caller(team_id="acme:eu", user_id="bob").identity_id
