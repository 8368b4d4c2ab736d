"""Checks of tool definitions, calls and results by each provider's own SDK types.

OpenAI's and Anthropic's request types are ``TypedDict`` s: a value passes when pydantic
validates it strictly against the type *and* the validated value equals the value (a
``TypedDict`` drops keys it does not know, so an unknown or misspelt key shows as a
difference). Bedrock's are botocore's Converse shapes, checked by botocore's own parameter
validator, which refuses unknown keys itself. MCP's are the ``mcp`` SDK's models (``Tool``,
``CallToolRequestParams``, ``CallToolResult``). Each check returns the problems it found
(``[]``: the SDK accepts the value as it is).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import botocore.session
import mcp.types as mcp_types
from anthropic.types import ToolParam, ToolResultBlockParam, ToolUseBlock
from botocore.model import Shape
from botocore.validate import ParamValidator
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import BaseModel, TypeAdapter, ValidationError

#: the SDK request type each format's tool definition must be
DEFINITION_TYPES: dict[str, Any] = {
    "openai_chat": ChatCompletionFunctionToolParam,
    "openai_responses": FunctionToolParam,
    "anthropic": ToolParam,
}
#: the SDK request type each format's tool result must be
RESULT_TYPES: dict[str, Any] = {
    "openai_chat": ChatCompletionToolMessageParam,
    "openai_responses": FunctionCallOutput,
    "anthropic": ToolResultBlockParam,
}
#: the SDK response model a provider's tool call is parsed into
CALL_MODELS: dict[str, type[BaseModel]] = {
    "openai_chat": ChatCompletionMessageFunctionToolCall,
    "openai_responses": ResponseFunctionToolCall,
    "anthropic": ToolUseBlock,
    "mcp": mcp_types.CallToolRequestParams,
}


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def typed_dict_problems(tp: Any, value: Any) -> list[str]:
    """What keeps ``value`` from being exactly a ``tp`` (a provider SDK's ``TypedDict``)."""
    try:
        validated = _adapter(tp).validate_python(value, strict=True)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    if validated != value:
        return [f"{tp.__name__} differs at {key!r}" for key in _differences(validated, value)]
    return []


def _differences(kept: Any, sent: Any, where: str = "") -> Iterator[str]:
    if isinstance(kept, dict) and isinstance(sent, dict):
        for key in sorted(set(kept) | set(sent)):
            yield from _differences(kept.get(key), sent.get(key), f"{where}.{key}")
    elif kept != sent:
        yield where or "."


@cache
def converse_shape() -> Shape:
    """The input shape of Bedrock Runtime's ``Converse``, from botocore's service model."""
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape


def converse_problems(params: dict[str, Any]) -> list[str]:
    """botocore's own validation of a ``Converse`` request (what ``client.converse`` runs),
    plus the ``enum`` and ``pattern`` of each string shape, which botocore's validator leaves
    to the service (``status: "failed"`` would pass it and be refused by Bedrock)."""
    report = ParamValidator().validate(params, converse_shape())
    problems = [line for line in report.generate_report().splitlines() if line.strip()]
    return problems or list(_string_rules(converse_shape(), params, "params"))


def _string_rules(shape: Shape, value: Any, where: str) -> Iterator[str]:
    if shape.type_name == "structure" and isinstance(value, dict):
        if shape.metadata.get("document"):
            return
        for name, member in shape.members.items():  # type: ignore[attr-defined]
            if name in value:
                yield from _string_rules(member, value[name], f"{where}.{name}")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _string_rules(shape.member, item, f"{where}[{i}]")  # type: ignore[attr-defined]
    elif shape.type_name == "string" and isinstance(value, str):
        enum = shape.metadata.get("enum")
        if enum and value not in enum:
            yield f"{where}: {value!r} is not one of {enum}"
        pattern = shape.metadata.get("pattern")
        if pattern and not re.fullmatch(pattern, value):
            yield f"{where}: {value!r} does not match {pattern}"


def converse_request(
    tools: list[dict[str, Any]] | None = None,
    tool_use: dict[str, Any] | None = None,
    tool_result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Converse`` request with Engram's tools, the model's ``toolUse`` content block and
    the ``toolResult`` block Engram answered, where each is given."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "Remember this."}]}]
    if tool_use is not None:
        messages.append({"role": "assistant", "content": [tool_use]})
    if tool_result is not None:
        messages.append({"role": "user", "content": [tool_result]})
    params: dict[str, Any] = {"modelId": "anthropic.claude-3-haiku-20240307-v1:0"}
    params["messages"] = messages
    if tools is not None:
        params["toolConfig"] = {"tools": tools}
    return params


def mcp_problems(model: type[BaseModel], value: dict[str, Any]) -> list[str]:
    """What keeps ``value`` from being exactly an ``mcp`` SDK ``model`` (``Tool``,
    ``CallToolResult``): validated strictly, dumped back, equal to the value."""
    try:
        parsed = model.model_validate(value, strict=True)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    kept = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return [f"{model.__name__} differs at {key!r}" for key in _differences(kept, value)]


def definition_problems(fmt: str, definition: dict[str, Any]) -> list[str]:
    """The provider SDK's verdict on one tool definition of ``fmt``."""
    if fmt == "bedrock":
        return converse_problems(converse_request(tools=[definition]))
    if fmt == "mcp":
        return mcp_problems(mcp_types.Tool, definition)
    return typed_dict_problems(DEFINITION_TYPES[fmt], definition)


def result_problems(fmt: str, result: dict[str, Any], call: dict[str, Any]) -> list[str]:
    """The provider SDK's verdict on a tool result of ``fmt`` answering ``call``."""
    if fmt == "bedrock":
        return converse_problems(converse_request(tool_use=call, tool_result=result))
    if fmt == "mcp":
        return mcp_problems(mcp_types.CallToolResult, result)
    return typed_dict_problems(RESULT_TYPES[fmt], result)


def wire_call(fmt: str, wire: dict[str, Any]) -> dict[str, Any]:
    """A tool call as the provider's API sends it, parsed by the SDK's response model and
    dumped back as the SDK serialises it (what a caller forwards); Bedrock's is checked by
    botocore as the assistant turn of the next ``Converse`` request."""
    if fmt == "bedrock":
        problems = converse_problems(converse_request(tool_use=wire))
        assert not problems, problems
        return wire
    parsed = CALL_MODELS[fmt].model_validate(wire)
    dumped: dict[str, Any] = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped
