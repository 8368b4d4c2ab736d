"""The maintenance models take ids by the one id limit (``engram.limits.MAX_ID_CHARS``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram import limits
from engram.maintenance import ErasureRecord, RetentionPolicy

LONGEST = "t" * limits.MAX_ID_CHARS
TOO_LONG = LONGEST + "t"


def test_a_retention_policy_takes_ids_up_to_the_id_limit() -> None:
    assert RetentionPolicy(team_id=LONGEST, persona_id=LONGEST).team_id == LONGEST
    for fields in ({"team_id": TOO_LONG}, {"team_id": "acme", "persona_id": TOO_LONG}):
        with pytest.raises(ValidationError):
            RetentionPolicy(**fields)  # type: ignore[arg-type]


def test_an_erasure_record_takes_ids_up_to_the_id_limit() -> None:
    assert ErasureRecord(team_id=LONGEST, user_id=LONGEST, erased_at_ms=0).user_id == LONGEST
    for team, user in ((TOO_LONG, "alice"), ("acme", TOO_LONG)):
        with pytest.raises(ValidationError):
            ErasureRecord(team_id=team, user_id=user, erased_at_ms=0)
