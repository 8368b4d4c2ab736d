"""A model's tool call in each provider's wire shape, and the tool result in that shape.

``POST /v1/tools/{name}?format=…`` takes the call exactly as the provider's API hands it to the
caller, so the caller forwards it unchanged, and answers with what that provider's next request
takes as the tool's result, so the caller appends it unchanged:

- ``openai_chat``: an item of a Chat Completions message's ``tool_calls``
  (``{id, type: "function", function: {name, arguments}}``, ``arguments`` a JSON string) →
  a ``tool`` message ``{role: "tool", tool_call_id, content}``;
- ``openai_responses``: a Responses ``function_call`` item (``{type, call_id, name, arguments,
  …}``) → a ``function_call_output`` item ``{type, call_id, output}``;
- ``anthropic``: a ``tool_use`` content block (``{type, id, name, input}``) → a ``tool_result``
  content block ``{type, tool_use_id, content, is_error}``;
- ``bedrock``: a Converse ``toolUse`` content block (``{toolUse: {toolUseId, name, input}}``)
  → a ``toolResult`` content block ``{toolResult: {toolUseId, content: [{text}], status}}``,
  ``status`` ``success`` or ``error``;
- ``mcp``: the params of ``tools/call`` (``{name, arguments}``) → a ``CallToolResult``
  ``{content: [{type: "text", text}], isError}``.

Each call model takes the fields of that provider's call and no others; Engram reads the call
id, the name and the arguments and ignores the rest (``status``, ``caller``, …). What the model
got wrong — arguments that are not JSON or that the tool's arguments model refuses, a full quota
— is a result the model can read (``is_error``, ``status: "error"``, ``isError``), not a 422. The
caller's errors stay HTTP errors: a body that is not the provider's shape (422 naming the field),
a ``name`` in the body other than the one in the path (422), an unknown tool (404).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from engram.api.errors import InvalidJsonError
from engram.api.http import decode_json
from engram.api.tools import TOOL_ARGUMENTS, ToolFormat, tool_command
from engram.errors import InvalidInput
from engram.fields import Identifier, InputModel, Name, QueryInput
from engram.memories.commands import Recall, SaveMemory
from engram.memories.models import ToolResult
from engram.memories.tools import argument_error, unknown_tool

#: the formats whose calls arrive in a provider's shape (``json_schema`` is ``ToolCallRequest``)
ProviderFormat = Literal["openai_chat", "openai_responses", "anthropic", "bedrock", "mcp"]


class ToolsQuery(QueryInput):
    """``GET /v1/tools?format=``: the tools in one provider's shape (default ``json_schema``)."""

    format: ToolFormat = "json_schema"


class ToolCallQuery(QueryInput):
    """``POST /v1/tools/{name}?format=&personaId=&sourceChannelId=``: the call's shape, and the
    Engram context a provider's call does not carry (for ``json_schema`` the body may carry the
    same two ids; both given, they must agree)."""

    format: ToolFormat = "json_schema"
    persona_id: Identifier | None = None
    source_channel_id: Identifier | None = None


class _WireModel(InputModel):
    """A provider's own field names, as its API spells them (no camelCase aliases)."""

    model_config = ConfigDict(alias_generator=None)


class _ProviderCall(InputModel):
    """What Engram reads from every provider's call."""

    def call_id(self) -> str | None:
        raise NotImplementedError

    def named(self) -> tuple[str, str | None]:
        """The body's field that names the tool, and the name it gives (``None``: none)."""
        raise NotImplementedError

    def arguments(self) -> dict[str, Any]:
        """The arguments as an object; ``InvalidInput`` when the model's are not one."""
        raise NotImplementedError


class _WireCall(_ProviderCall):
    model_config = ConfigDict(alias_generator=None)


class _NamedCall(_WireCall):
    """A call that names its tool in a top-level ``name``."""

    name: Name | None = None

    def named(self) -> tuple[str, str | None]:
        return "name", self.name


def _decoded(arguments: str) -> dict[str, Any]:
    """A JSON-string ``arguments`` (OpenAI's) as an object; ``""`` is no arguments."""
    if not arguments.strip():
        return {}
    try:  # the request decoder: the same depth, digit and NaN rules as a body
        value = decode_json(arguments)
    except InvalidJsonError:
        raise InvalidInput("arguments", "is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidInput("arguments", "must be a JSON object")
    return value


class OpenAIFunction(_WireModel):
    name: Name | None = None
    arguments: str = ""


class OpenAIChatToolCall(_WireCall):
    """An item of a Chat Completions message's ``tool_calls``."""

    id: Identifier
    type: Literal["function"]
    function: OpenAIFunction

    def call_id(self) -> str | None:
        return self.id

    def named(self) -> tuple[str, str | None]:
        return "function.name", self.function.name

    def arguments(self) -> dict[str, Any]:
        return _decoded(self.function.arguments)


class OpenAIResponsesFunctionCall(_NamedCall):
    """A ``function_call`` output item of the Responses API."""

    type: Literal["function_call"]
    call_id_: Identifier = Field(alias="call_id")
    arguments_: str = Field(default="", alias="arguments")
    id: str | None = None
    async_: JsonValue = Field(default=None, alias="async")
    caller: JsonValue = None
    namespace: JsonValue = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    def call_id(self) -> str | None:
        return self.call_id_

    def arguments(self) -> dict[str, Any]:
        return _decoded(self.arguments_)


class AnthropicToolUse(_NamedCall):
    """A ``tool_use`` content block of an Anthropic Messages response."""

    type: Literal["tool_use"]
    id: Identifier
    input: dict[str, JsonValue]
    caller: JsonValue = None
    toolset_name: JsonValue = None

    def call_id(self) -> str | None:
        return self.id

    def arguments(self) -> dict[str, Any]:
        return dict(self.input)


class BedrockToolUseBlock(InputModel):
    """Converse's ``ToolUseBlock`` (``toolUseId``, ``name``, ``input``)."""

    tool_use_id: Identifier
    name: Name | None = None
    input: dict[str, JsonValue]
    type: Literal["server_tool_use"] | None = None


class BedrockToolUse(_ProviderCall):
    """A ``toolUse`` content block of a Bedrock Converse response."""

    tool_use: BedrockToolUseBlock

    def call_id(self) -> str | None:
        return self.tool_use.tool_use_id

    def named(self) -> tuple[str, str | None]:
        return "toolUse.name", self.tool_use.name

    def arguments(self) -> dict[str, Any]:
        return dict(self.tool_use.input)


class McpToolCall(_NamedCall):
    """The params of an MCP ``tools/call`` request."""

    arguments_: dict[str, JsonValue] | None = Field(default=None, alias="arguments")
    meta: JsonValue = Field(default=None, alias="_meta")
    input_responses: JsonValue = Field(default=None, alias="inputResponses")
    request_state: JsonValue = Field(default=None, alias="requestState")
    task: JsonValue = None

    def call_id(self) -> str | None:
        return None  # the JSON-RPC id travels outside the params

    def arguments(self) -> dict[str, Any]:
        return dict(self.arguments_ or {})


#: each provider format's call model
CALL_MODELS: dict[ProviderFormat, type[_ProviderCall]] = {
    "openai_chat": OpenAIChatToolCall,
    "openai_responses": OpenAIResponsesFunctionCall,
    "anthropic": AnthropicToolUse,
    "bedrock": BedrockToolUse,
    "mcp": McpToolCall,
}


def checked_name(call: _ProviderCall, path_name: str) -> None:
    """The path names the tool; a body naming another one is the caller's mistake (422)."""
    field, name = call.named()
    if name is not None and name != path_name:
        raise InvalidInput(field, f"names {name[:60]!r} but the path names {path_name!r}")


def agreed(field: str, in_body: str | None, in_query: str | None) -> str | None:
    """One id given in the body, the query or both; both must agree (422 naming it)."""
    if in_body is not None and in_query is not None and in_body != in_query:
        raise InvalidInput(field, "the body and the query string give different values")
    return in_body if in_body is not None else in_query


def provider_call_command(
    call: _ProviderCall, name: str, persona_id: str | None, source_channel_id: str | None
) -> SaveMemory | Recall | ToolResult:
    """The command a provider's call of tool ``name`` asks for (``engram.api.tools``), or the
    result the model reads when its arguments are refused (not a JSON object, or not what the
    tool's arguments model accepts). An unknown tool raises ``NotFound``: the caller's error."""
    try:
        arguments = call.arguments()
    except InvalidInput as exc:
        return argument_error(name, exc)
    if name not in TOOL_ARGUMENTS:
        raise unknown_tool(name)
    try:
        return tool_command(
            name, arguments, persona_id=persona_id, source_channel_id=source_channel_id
        )
    except InvalidInput as exc:
        return argument_error(name, exc)


# --- results ---------------------------------------------------------------------------------
class _WireOut(BaseModel):
    """A result in a provider's own field names (camelCase where the provider's are)."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True)


class OpenAIChatToolMessage(_WireOut):
    """A Chat Completions ``tool`` message (OpenAI's results have no error flag: the text
    says what went wrong)."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str


class OpenAIResponsesFunctionCallOutput(_WireOut):
    """A Responses ``function_call_output`` input item."""

    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str


class AnthropicToolResult(_WireOut):
    """A ``tool_result`` content block (for the next user message)."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool


class BedrockTextContent(_WireOut):
    text: str


class BedrockToolResultBlock(_WireOut):
    tool_use_id: str = Field(alias="toolUseId")
    content: list[BedrockTextContent]
    status: Literal["success", "error"]


class BedrockToolResult(_WireOut):
    """A Converse ``toolResult`` content block (for the next user message)."""

    tool_result: BedrockToolResultBlock = Field(alias="toolResult")


class McpTextContent(_WireOut):
    type: Literal["text"] = "text"
    text: str


class McpCallToolResult(_WireOut):
    """An MCP ``CallToolResult``."""

    content: list[McpTextContent]
    is_error: bool = Field(alias="isError")


#: each provider format's result model
RESULT_MODELS: dict[ProviderFormat, type[_WireOut]] = {
    "openai_chat": OpenAIChatToolMessage,
    "openai_responses": OpenAIResponsesFunctionCallOutput,
    "anthropic": AnthropicToolResult,
    "bedrock": BedrockToolResult,
    "mcp": McpCallToolResult,
}


def render_result(fmt: ProviderFormat, call_id: str | None, result: ToolResult) -> _WireOut:
    """``result`` as the provider's next request takes a tool's result; ``call_id`` is the
    provider's id of the call (every format but ``mcp`` has one)."""
    text, failed = result.text, not result.ok
    if fmt == "mcp":
        return McpCallToolResult(content=[McpTextContent(text=text)], is_error=failed)
    if call_id is None:
        raise ValueError(f"a {fmt} call has an id")
    if fmt == "openai_chat":
        return OpenAIChatToolMessage(tool_call_id=call_id, content=text)
    if fmt == "openai_responses":
        return OpenAIResponsesFunctionCallOutput(call_id=call_id, output=text)
    if fmt == "anthropic":
        return AnthropicToolResult(tool_use_id=call_id, content=text, is_error=failed)
    block = BedrockToolResultBlock(
        tool_use_id=call_id,
        content=[BedrockTextContent(text=text)],
        status="error" if failed else "success",
    )
    return BedrockToolResult(tool_result=block)
