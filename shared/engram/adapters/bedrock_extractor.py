"""Extractor adapter: Amazon Bedrock Converse API (boto3 ``bedrock-runtime``).

The persona's extraction prompt (or :data:`engram.extraction.llm.DEFAULT_EXTRACTION_PROMPT`)
and the fixed output rules are the system prompt; the transcript travels as delimited data in
the one user message, never concatenated into the system prompt. The model is forced to call
the ``record_memories`` tool whose input schema is the output contract; a plain JSON text answer
is accepted as a fallback (for models without forced tool choice). Anything malformed raises
``ExtractionError``; throttling, service unavailability, model timeouts and connection errors
raise ``ExtractionThrottled``. The client is created lazily on first use (inject one in tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.adapters.lazy import Lazy
from engram.extraction.llm import (
    TOOL_NAME,
    memory_output_schema,
    parse_json_text,
    proposals_from_output,
    render_transcript,
    system_prompts,
)
from engram.extraction.models import ExtractionResult, TranscriptJob, Usage
from engram.extraction.ports import ExtractionError, ExtractionThrottled, Extractor
from engram.extraction.rules import RuleBasedExtractor

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

    from engram.settings import Settings

EXTRACTOR_NAME = "bedrock"

TRANSIENT_ERROR_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "InternalServerException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
# A model that refused (content filter / guardrail) will refuse again: no memories, no retry.
_REFUSALS = frozenset({"guardrail_intervened", "content_filtered"})


def _default_client_factory(region: str) -> BedrockRuntimeClient:
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"max_attempts": 2, "mode": "standard"},
    )
    return boto3.client("bedrock-runtime", region_name=region, config=config)


class BedrockConverseExtractor:
    """``Extractor`` backed by Bedrock Converse with a forced ``record_memories`` tool call."""

    name = EXTRACTOR_NAME

    def __init__(
        self,
        *,
        model_id: str,
        region: str = "us-east-1",
        client: BedrockRuntimeClient | None = None,
        client_factory: Callable[[str], BedrockRuntimeClient] | None = None,
        max_tokens: int = 2048,
        force_tool: bool = True,
    ) -> None:
        if not model_id:
            raise ValueError("model_id is required")
        if not 1 <= max_tokens <= 64_000:
            raise ValueError("max_tokens must be within 1..64000")
        self._model_id = model_id
        factory = client_factory or _default_client_factory
        self._client = Lazy(lambda: factory(region), client)
        self._max_tokens = max_tokens
        self._force_tool = force_tool

    @property
    def client(self) -> BedrockRuntimeClient:
        return self._client.get()

    def request(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> dict[str, Any]:
        """The exact Converse request this extractor sends for ``job`` (public for tests/docs)."""
        tool_config: dict[str, Any] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": TOOL_NAME,
                        "description": "Record the long-term memories found in the transcript.",
                        "inputSchema": {"json": memory_output_schema()},
                    }
                }
            ]
        }
        if self._force_tool:
            tool_config["toolChoice"] = {"tool": {"name": TOOL_NAME}}
        return {
            "modelId": self._model_id,
            "system": [
                {"text": text}
                for text in system_prompts(persona_prompt, persona_scope=persona_scope)
            ],
            "messages": [{"role": "user", "content": [{"text": render_transcript(job)}]}],
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": 0},
            "toolConfig": tool_config,
        }

    def extract(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> ExtractionResult:
        request = self.request(job, persona_prompt=persona_prompt, persona_scope=persona_scope)
        response = self._call(request)
        usage = _usage(response)
        stop_reason = response.get("stopReason")
        if stop_reason in _REFUSALS:
            return ExtractionResult(proposals=[], usage=usage, extractor=self.name)
        if stop_reason in ("max_tokens", "model_context_window_exceeded"):
            raise ExtractionError(f"model output truncated (stopReason={stop_reason})")
        if stop_reason in ("malformed_model_output", "malformed_tool_use"):
            raise ExtractionError(f"model output rejected by Bedrock (stopReason={stop_reason})")
        payload = _payload(response)
        return proposals_from_output(
            payload, job, persona_scope=persona_scope, extractor=self.name, usage=usage
        )

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )

        try:
            response: Any = self.client.converse(**request)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in TRANSIENT_ERROR_CODES or status in (429, 500, 502, 503, 504):
                raise ExtractionThrottled(f"bedrock converse: {code or status}") from exc
            raise ExtractionError(f"bedrock converse failed: {code or status}") from exc
        except (
            ConnectionError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        ) as exc:
            raise ExtractionThrottled(f"bedrock unreachable: {type(exc).__name__}") from exc
        except BotoCoreError as exc:
            raise ExtractionError(f"bedrock converse failed: {type(exc).__name__}") from exc
        if not isinstance(response, dict):
            raise ExtractionError("bedrock converse returned no response")
        return response


def _usage(response: dict[str, Any]) -> Usage | None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    try:
        return Usage(
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
        )
    except (TypeError, ValueError):
        return None


def _payload(response: dict[str, Any]) -> Any:
    """The tool-call input if the model called ``record_memories``, else JSON from its text."""
    message = (response.get("output") or {}).get("message") or {}
    content = message.get("content")
    if not isinstance(content, list):
        raise ExtractionError("model answer has no content")
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        tool_use = block.get("toolUse")
        if isinstance(tool_use, dict):
            if tool_use.get("name") != TOOL_NAME:
                raise ExtractionError(f"model called an unknown tool {tool_use.get('name')!r}")
            return tool_use.get("input")
        text = block.get("text")
        if isinstance(text, str):
            texts.append(text)
    if not texts:
        raise ExtractionError("model answer has neither a tool call nor text")
    return parse_json_text("\n".join(texts))


def build_extractor(settings: Settings) -> Extractor:
    """The extractor ``settings.extractor`` names: ``rules`` (default) or ``bedrock`` (model
    ``settings.bedrock_extraction_model_id`` in ``settings.aws_region``). For composition roots."""
    if settings.extractor == "bedrock":
        return BedrockConverseExtractor(
            model_id=settings.bedrock_extraction_model_id, region=settings.aws_region
        )
    return RuleBasedExtractor()
