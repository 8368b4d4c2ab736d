"""The table of observation kinds: the built-in entries agree with the public enums, a
registration that would make a name, letter or category ambiguous is refused, and a registered
pair of kinds (two outcomes of one thing) is grouped and judged like the tools are."""

from __future__ import annotations

from typing import get_args

import pytest

from engram.adapters.redis_behaviour.log_codec import decode_pending, encode_member
from engram.api.behaviour_inputs import ObservationTypeName
from engram.api.models import FactCategoryName
from engram.behaviour import kinds
from engram.behaviour.kinds import (
    BUILT_IN,
    UNPRODUCED,
    FactKind,
    Metadata,
    ObservationKind,
    PromptGroup,
    fact_content,
    register_kind,
    registered,
    unregister_kind,
)
from engram.behaviour.models import (
    METADATA,
    Fact,
    FactCategory,
    Observation,
    ObservationType,
    metadata_to_fact_key,
)
from engram.behaviour.ports import KeyGroup, aggregate
from engram.fields import Name


class BuildMetadata(Metadata):
    pipeline: Name


def _kind(name: str = "document_open", letter: str = "o", **changes: object) -> ObservationKind:
    values: dict[str, object] = {
        "name": name,
        "letter": letter,
        "metadata": BuildMetadata,
        "key_fields": ("pipeline",),
        "fact": FactKind(f"{name}_fact", PromptGroup("Builds", 35), "Builds {name}"),
        **changes,
    }
    return ObservationKind(**values)  # type: ignore[arg-type]


PASSED = _kind(
    "build_passed",
    "p",
    fact=FactKind("build_trust", PromptGroup("Builds", 35), "Pipeline {name} passes"),
    counterpart="build_failed",
)
FAILED = _kind(
    "build_failed",
    "x",
    fact=FactKind("build_doubt", PromptGroup("Builds", 35), "Pipeline {name} fails"),
    counterpart="build_passed",
    succeeds=False,
)


def test_the_built_in_entries_are_the_enum_members() -> None:
    assert [k.name for k in BUILT_IN] == list(ObservationType)
    assert all(type(k.name) is ObservationType for k in BUILT_IN)
    categories = [k.category for k in BUILT_IN] + [f.category for f in UNPRODUCED]
    assert sorted(categories) == sorted(FactCategory)
    assert all(type(c) is FactCategory for c in categories)
    assert [k.letter for k in BUILT_IN] == ["s", "f", "e", "d"]  # the stored log's letters
    assert {t: METADATA[t] for t in ObservationType} == {k.name: k.metadata for k in BUILT_IN}
    assert kinds.Derived.now.labelled_letters == "e"  # only an entity's label is not its key
    assert [title for title, _ in kinds.Derived.now.groups] == [
        "Tool preferences",
        "Frequent entities",
        "Domain focus",
        "Known issues",
    ]


def test_built_in_names_come_back_as_enum_members_and_serialise_as_before() -> None:
    obs = Observation.model_validate(
        {
            "id": "o1",
            "identityId": "t:u",
            "type": "tool_success",
            "metadata": {"toolName": "search", "durationMs": 3},
            "createdAt": 7,
        }
    )
    assert obs.type is ObservationType.TOOL_SUCCESS
    assert obs.to_storage_json() == (
        '{"id":"o1","identityId":"t:u","type":"tool_success","content":"",'
        '"metadata":{"toolName":"search","durationMs":3},"createdAt":7}'
    )
    assert encode_member(obs).split("\n")[0] == "s\x1fsearch\x1fsearch\x1f7"
    fact = Fact.model_validate_json(
        '{"id":"fact:x","identityId":"t:u","category":"tool_affinity","subject":"x",'
        '"content":"c","confidence":0.5,"reinforcementCount":1,"lastReinforcedAt":1,'
        '"createdAt":1,"updatedAt":1}'
    )
    assert fact.category is FactCategory.TOOL_AFFINITY
    assert metadata_to_fact_key("entity_access", {"entityType": "a", "entityId": "1"}) == (
        FactCategory.ENTITY_FREQUENCY,
        "entity_frequency:a:1",
    )


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        (_kind(letter="s"), "letter"),  # tool_success's
        (_kind(letter="l"), "letter"),  # marks a stored label
        (_kind(letter="ab"), "letter"),
        (_kind(name="tool_success"), "taken"),
        (_kind(fact=FactKind("tool_affinity", PromptGroup("B", 99), "x")), "taken"),
        (_kind(fact=FactKind("c", PromptGroup("Tool preferences", 99), "x")), "order"),
        (_kind(fact=FactKind("c", PromptGroup("Other", 10), "x")), "order"),
        (_kind(key_fields=("nope",)), "key field"),
        (_kind(key_fields=()), "key fields"),
        (_kind(name="Not Snake"), "snake_case"),
        (_kind(counterpart="tool_failure"), "counterpart"),
        (_kind(fact=FactKind("c", PromptGroup("Builds", 35), "Builds {title}")), "fact text"),
    ],
)
def test_an_ambiguous_registration_is_refused(kind: ObservationKind, why: str) -> None:
    before = dict(kinds.KINDS)
    with pytest.raises(ValueError, match=why):
        register_kind(kind)
    assert before == kinds.KINDS


def test_two_kinds_sharing_a_letter_or_a_pair_half_alone_are_refused() -> None:
    with pytest.raises(ValueError, match="share"):
        register_kind(_kind("a_kind", "o"), _kind("b_kind", "o"))
    with pytest.raises(ValueError, match="counterpart"):
        register_kind(PASSED)  # its counterpart is registered with it
    with pytest.raises(ValueError, match="not a registered"):
        unregister_kind("tool_success")  # built in
    with registered(_kind()) as (kind,):
        assert kinds.KINDS["document_open"] is kind
        with pytest.raises(ValueError, match="taken"):
            register_kind(_kind(letter="q"))
    assert "document_open" not in kinds.KINDS
    assert "o" not in kinds.LETTERS


def test_a_registered_pair_is_grouped_and_judged_like_the_tools() -> None:
    with registered(PASSED, FAILED):
        observations = [
            Observation(
                identity_id="t:u",
                type=name,
                metadata={"pipeline": "deploy"},
                created_at=1,
                seq=seq,
            )
            for seq, name in enumerate(["build_passed", "build_passed", "build_failed"], 1)
        ]
        groups = sorted(aggregate(observations))
        assert groups == [
            KeyGroup("build_doubt", "build_doubt:deploy", "deploy", 1, 2, 1, 3),
            KeyGroup("build_trust", "build_trust:deploy", "deploy", 2, 2, 1, 3),  # the pair's
        ]
        assert [g.quality() for g in groups] == [1 / 3, 2 / 3]
        members = [encode_member(o).split("\n")[0] for o in observations]
        assert members[0] == "p\x1fdeploy\x1fdeploy\x1f1"
        pending = {b"p\x1fdeploy": b"2", b"x\x1fdeploy": b"1"}
        decoded = sorted(decode_pending(pending, 3)[0])
        assert [g._replace(max_seq=0) for g in decoded] == [g._replace(max_seq=0) for g in groups]
        assert [title for title, _ in kinds.Derived.now.groups][-2:] == ["Builds", "Known issues"]
    assert [title for title, _ in kinds.Derived.now.groups][-2:] == ["Domain focus", "Known issues"]


def test_the_http_api_names_exactly_the_built_in_kinds_and_categories() -> None:
    # the API's names are fixed (the OpenAPI document states them); a registered kind is
    # recorded through the ingest path, not POST /v1/observations
    assert get_args(ObservationTypeName) == tuple(k.name for k in BUILT_IN)
    assert get_args(FactCategoryName) == tuple(FactCategory)


def test_a_pair_keeps_no_label_and_a_fact_text_may_name_only_a_key_field() -> None:
    labelled = _kind("build_passed", "p", counterpart="build_failed", label=lambda md: "x")
    with pytest.raises(ValueError, match="no stored label"):
        register_kind(labelled, FAILED)
    text = FactKind("build_count", PromptGroup("Builds", 35), "Runs pipeline {pipeline} a lot")
    with registered(_kind(fact=text)):
        assert fact_content("build_count", "ci", "build_count:ci") == 'Runs pipeline "ci" a lot'
