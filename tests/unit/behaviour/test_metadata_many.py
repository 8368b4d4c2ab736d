"""A request's observations have their metadata checked once for the whole list: the result
is what checking them one by one gives, value for value, and a request that breaks a rule gets
exactly the errors of its observations checked one by one (every one, naming its field)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from engram.api.behaviour_inputs import ObservationIn, ObservationsRequest
from engram.api.errors import error_response
from engram.behaviour.models import (
    MAX_METADATA_BYTES,
    ObservationType,
    validate_metadata,
    validate_metadata_many,
)

TYPES = list(ObservationType)
#: every ASCII character JSON writes unescaped, in a name
ASCII = "".join(map(chr, range(0x21, 0x7F)))


def good_metadata(obs_type: ObservationType, rng: random.Random) -> dict[str, Any]:
    name = rng.choice(["get_account", "  padded  ", "Zoë 😀", 'quote"d', "back\\slash", ASCII])
    if obs_type is ObservationType.TOOL_SUCCESS:
        return {"toolName": name, "durationMs": rng.choice([0, 12, 3.5])}
    if obs_type is ObservationType.TOOL_FAILURE:
        return {"toolName": name, "durationMs": 7, "error": rng.choice(["timeout", "a\nb", ""])}
    if obs_type is ObservationType.ENTITY_ACCESS:
        extra = {"entityName": " Acme "} if rng.random() < 0.5 else {}
        return {"entityType": "account", "entityId": name, **extra}
    return {"domain": name, "query": rng.choice(["royalty report", "tab\there", "{}"])}


def spoil(metadata: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``metadata`` broken by one rule: size, the text rule, a key of its type, JSON itself."""
    key = next(iter(metadata))
    return rng.choice(
        [
            {**metadata, "blob": "x" * MAX_METADATA_BYTES},
            {**metadata, "note": "a\x00b"},
            {**metadata, "no\x00te": 1},
            {**metadata, "note": "\ud800"},
            {k: v for k, v in metadata.items() if k != key},
            {**metadata, key: 5},
            {**metadata, key: "bad\u200bname"},
            {**metadata, key: "   "},
            {**metadata, "durationMs": -1} if "durationMs" in metadata else {**metadata, key: ""},
            {**metadata, "nan": float("nan")},
        ]
    )


def one_by_one(items: list[tuple[ObservationType, dict[str, Any]]]) -> list[dict[str, Any]] | None:
    out = []
    for obs_type, value in items:
        try:
            out.append(validate_metadata(obs_type, value))
        except (PydanticCustomError, TypeError, ValueError):
            return None
    return out


def test_the_whole_list_checked_at_once_is_the_list_checked_one_by_one() -> None:
    rng = random.Random(17)
    for _ in range(300):
        items = []
        for _ in range(rng.randint(1, 100)):
            obs_type = rng.choice(TYPES)
            value = good_metadata(obs_type, rng)
            if rng.random() < 0.02:
                value = spoil(value, rng)
            items.append((obs_type, value))
        assert validate_metadata_many(items) == one_by_one(items)


def exactly(size: int) -> dict[str, Any]:
    """Valid tool_success metadata of ``size`` bytes of compact JSON."""
    base = {"toolName": "t", "durationMs": 1, "pad": ""}
    pad = size - len(json.dumps(base, separators=(",", ":")))
    return {**base, "pad": "p" * pad}


def test_values_at_the_size_limit_pass_and_one_byte_over_fails_wherever_it_is() -> None:
    at_limit = [(ObservationType.TOOL_SUCCESS, exactly(MAX_METADATA_BYTES)) for _ in range(100)]
    checked = validate_metadata_many(at_limit)
    assert checked is not None
    assert checked[99] == exactly(MAX_METADATA_BYTES)
    for index in (0, 37, 63, 99):
        over = list(at_limit)
        over[index] = (ObservationType.TOOL_SUCCESS, exactly(MAX_METADATA_BYTES + 1))
        assert validate_metadata_many(over) is None


def obs(metadata: dict[str, Any], obs_type: str = "tool_success", **more: Any) -> dict[str, Any]:
    return {"type": obs_type, "content": "ran it", "metadata": metadata, **more}


def request_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as info:
        ObservationsRequest.model_validate(body, by_alias=True, by_name=False)
    return [{k: e[k] for k in ("loc", "msg", "type")} for e in info.value.errors()]


def item_errors(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for index, item in enumerate(items):
        try:
            ObservationIn.model_validate(item, by_alias=True, by_name=False)
        except ValidationError as exc:
            out += [
                {"loc": ("observations", index, *e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.errors()
            ]
    return out


def test_a_bad_request_gets_the_errors_of_its_observations_one_by_one() -> None:
    good = {"toolName": "get_account", "durationMs": 3}
    items = [obs(good) for _ in range(100)]
    items[3] = obs({"toolName": "t", "durationMs": 1, "k\x00": 1})
    items[41] = obs(exactly(MAX_METADATA_BYTES + 1))
    items[57] = obs({"durationMs": 1})  # toolName missing
    items[58] = obs({"entityType": "a", "entityId": "b"}, "query_pattern")
    items[90] = obs(good, content="")  # not metadata: checked by the model alone
    expected = item_errors(items)
    assert request_errors({"observations": items}) == expected
    assert [e["loc"][1] for e in expected] == [3, 41, 57, 58, 90]
    # the client sees each field, the metadata key included where the rule names one
    with pytest.raises(ValidationError) as info:
        ObservationsRequest.model_validate({"observations": items})
    fields = [d["field"] for d in error_response(info.value).details]
    assert fields == [
        "observations.3.metadata",
        "observations.41.metadata",
        "observations.57.metadata.toolName",
        "observations.58.metadata.domain",
        "observations.90.content",
    ]


def test_one_bad_metadata_among_valid_ones_is_the_only_error() -> None:
    items = [obs({"toolName": "t", "durationMs": 1}) for _ in range(100)]
    items[77] = obs({"toolName": "t", "durationMs": 1, "note": "\ud800"})
    assert request_errors({"observations": items}) == item_errors(items)
    assert [e["loc"] for e in item_errors(items)] == [("observations", 77, "metadata")]


def test_a_valid_request_carries_each_observations_metadata_as_checked_alone() -> None:
    rng = random.Random(5)
    items = []
    for _ in range(100):
        obs_type = rng.choice(TYPES)
        items.append(obs(good_metadata(obs_type, rng), obs_type.value))
    request = ObservationsRequest.model_validate({"observations": items})
    alone = [ObservationIn.model_validate(item).metadata for item in items]
    assert [o.metadata for o in request.observations] == alone
    padded = ObservationsRequest.model_validate(
        {"observations": [obs({"toolName": "  padded  ", "durationMs": 1, "extra": " kept "})]}
    )
    assert padded.observations[0].metadata == {
        "toolName": "padded",
        "durationMs": 1,
        "extra": " kept ",
    }
