from __future__ import annotations

import pytest
from pydantic import ValidationError
from tests.unit.extraction.fakes import make_job

from engram import limits
from engram.errors import InvalidInput
from engram.extraction import ConversationMessage, Proposal, ProposalScope, TranscriptJob
from engram.extraction.drain import parse_job


def test_transcript_job_round_trips_as_camel_case_json() -> None:
    job = make_job("I live in Oslo", persona_id="helpdesk")
    data = job.model_dump(by_alias=True, exclude_none=True)
    assert set(data) == {
        "jobId",
        "conversationId",
        "teamId",
        "userId",
        "personaId",
        "messages",
        "queuedAt",
    }
    assert TranscriptJob.model_validate_json(job.to_json()) == job


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ([], "messages"),
        ([{"role": "user", "content": "x"}] * 501, "messages"),
        ([{"role": "robot", "content": "x"}], "messages.0.role"),
        ([{"role": "user", "content": "x" * (limits.MAX_MESSAGE_CHARS + 1)}], "messages.0.content"),
        ([{"role": "user", "content": "a\x00b"}], "messages.0.content"),
        ([{"role": "user", "content": ""}], "messages.0.content"),
        ([{"role": "user", "content": "x", "at": -1}], "messages.0.at"),
    ],
)
def test_bad_transcripts_are_rejected_naming_the_field(
    messages: list[dict[str, object]], field: str
) -> None:
    body = {
        "jobId": "j",
        "conversationId": "c",
        "teamId": "t",
        "userId": "u",
        "messages": messages,
        "queuedAt": 1,
    }
    with pytest.raises(ValidationError) as info:
        TranscriptJob.model_validate(body)
    assert ".".join(str(p) for p in info.value.errors()[0]["loc"]) == field


def test_parse_job_raises_invalid_input_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_job('{"jobId": "j", "conversationId": "c", "teamId": "t", "messages": []}')
    assert info.value.field in {"userId", "messages", "queuedAt"}
    with pytest.raises(InvalidInput):
        parse_job("not json")


def test_message_content_limit_is_8000_characters() -> None:
    assert ConversationMessage(role="user", content="x" * 8000).content == "x" * 8000


def test_proposal_normalises_key_and_sanitises_value() -> None:
    p = Proposal(
        key="  Preferred_Editor:  ",
        value="vim\x00\u200b and\n\tneovim\x1b[31m",
        confidence=0.8,
        scope=ProposalScope.USER,
        source_channel_id="conv-1",
    )
    assert p.key == "preferred editor"
    assert p.value == "vim and neovim[31m"
    assert p.model_dump(by_alias=True)["sourceChannelId"] == "conv-1"


def test_proposal_key_keeps_at_most_six_words() -> None:
    p = Proposal(
        key="one two three four five six seven eight",
        value="v",
        confidence=1,
        scope="user",
        source_channel_id="c",
    )
    assert p.key == "one two three four five six"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"key": "!!!"}, "key"),
        ({"value": " \x00 "}, "value"),
        ({"value": "x" * 2001}, "value"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"scope": "team"}, "scope"),
    ],
)
def test_bad_proposals_are_rejected(changes: dict[str, object], field: str) -> None:
    base: dict[str, object] = {
        "key": "name",
        "value": "Sam",
        "confidence": 0.9,
        "scope": "user",
        "sourceChannelId": "c",
    }
    with pytest.raises(ValidationError) as info:
        Proposal.model_validate({**base, **changes})
    assert info.value.errors()[0]["loc"][0] == field


def test_new_job_gets_a_fresh_id_and_validates() -> None:
    a = TranscriptJob.new(
        conversation_id="c",
        team_id="t",
        user_id="u",
        messages=[
            {"role": "user", "content": "hi", "at": 5},
            ConversationMessage(role="assistant", content="yo"),
        ],
        queued_at=10,
    )
    b = TranscriptJob.new(
        conversation_id="c", team_id="t", user_id="u", messages=a.messages, queued_at=10
    )
    assert a.job_id != b.job_id
    assert a.messages == b.messages
    assert a.persona_id is None
    assert TranscriptJob.model_validate_json(a.to_json()) == a
    with pytest.raises(ValidationError):
        TranscriptJob.new(conversation_id="", team_id="t", user_id="u", messages=[], queued_at=1)
