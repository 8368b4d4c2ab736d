from __future__ import annotations

import pytest

from engram.api.tools import parse_recall_args, parse_save_args, tool_definitions
from engram.errors import InvalidInput


def test_json_schema_definitions() -> None:
    defs = tool_definitions()
    assert [d["name"] for d in defs] == ["memory_save", "memory_recall"]
    save = defs[0]["parameters"]
    assert save["required"] == ["key", "value"]
    assert save["properties"]["key"]["maxLength"] == 100
    assert save["properties"]["value"]["maxLength"] == 2000
    assert (
        save["properties"]["confidence"]["minimum"],
        save["properties"]["confidence"]["maximum"],
    ) == (0, 1)
    assert defs[1]["parameters"]["properties"]["max_results"]["maximum"] == 100


def test_provider_formats() -> None:
    openai = tool_definitions("openai_chat")
    assert openai[0]["type"] == "function"
    assert openai[0]["function"]["name"] == "memory_save"
    assert openai[0]["function"]["parameters"]["type"] == "object"
    responses = tool_definitions("openai_responses")
    assert (responses[0]["name"], responses[0]["strict"]) == ("memory_save", False)
    mcp = tool_definitions("mcp")
    assert mcp[0]["inputSchema"]["required"] == ["key", "value"]
    assert [t["annotations"]["readOnlyHint"] for t in mcp] == [False, True]
    anthropic = tool_definitions("anthropic")
    assert set(anthropic[1]) == {"name", "description", "input_schema"}
    bedrock = tool_definitions("bedrock")
    spec = bedrock[0]["toolSpec"]
    assert spec["name"] == "memory_save"
    assert spec["inputSchema"]["json"]["required"] == ["key", "value"]
    with pytest.raises(InvalidInput) as err:
        tool_definitions("gemini")  # type: ignore[arg-type]
    assert err.value.field == "format"


def test_definitions_are_fresh_copies() -> None:
    tool_definitions()[0]["parameters"]["required"].append("x")
    assert tool_definitions()[0]["parameters"]["required"] == ["key", "value"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"value": "v"}, "key"),
        ({"key": "k" * 101, "value": "v"}, "key"),
        ({"key": "k", "value": ""}, "value"),
        ({"key": "k", "value": "v", "confidence": 1.01}, "confidence"),
        ({"key": "k", "value": "v", "confidence": "0.5"}, "confidence"),
        ({"key": "k", "value": "v", "extra": 1}, "extra"),
        ({"key": ["k"], "value": "v"}, "key"),
    ],
)
def test_save_arguments_are_validated(args: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_save_args(args)
    assert err.value.field == field


def test_recall_arguments() -> None:
    assert parse_recall_args({}).max_results == 20
    assert parse_recall_args({"query": "x", "max_results": 3}).query == "x"
    for bad, field in (
        ({"max_results": 101}, "max_results"),
        ({"max_results": True}, "max_results"),
        ({"query": 3}, "query"),
    ):
        with pytest.raises(InvalidInput) as err:
            parse_recall_args(bad)
        assert err.value.field == field
    with pytest.raises(InvalidInput) as err2:
        parse_recall_args("not an object")
    assert err2.value.field == "arguments"
    assert parse_save_args({"key": "k", "value": "v", "confidence": 1}).confidence == 1.0
