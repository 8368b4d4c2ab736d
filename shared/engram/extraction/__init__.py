"""Extraction: turning queued conversation transcripts into ``pending_review`` memory proposals.

Pure domain (no SDKs): models, the ``Extractor`` and ``ProposalSink`` ports, the rule-based
extractor (the local default), the model-agnostic LLM prompt/parse helpers, and the drain
policy the maintenance job uses. The Bedrock adapter lives in
``engram.adapters.bedrock_extractor``. See ``docs/extraction.md``.
"""

from __future__ import annotations

from engram.extraction.drain import (
    BatchOutcome,
    Disposition,
    ExtractionConfig,
    JobOutcome,
    ReceivedJob,
    effective_scope,
    parse_job,
    process_batch,
)
from engram.extraction.models import (
    ConversationMessage,
    ExtractionResult,
    Proposal,
    ProposalScope,
    TranscriptJob,
    Usage,
)
from engram.extraction.ports import (
    ExtractionError,
    ExtractionThrottled,
    Extractor,
    ProposalSink,
    SinkOutcome,
)
from engram.extraction.rules import RuleBasedExtractor
from engram.extraction.sanitize import (
    looks_like_instruction,
    looks_secret,
    normalise_key,
    sanitise_value,
)

__all__ = [
    "BatchOutcome",
    "ConversationMessage",
    "Disposition",
    "ExtractionConfig",
    "ExtractionError",
    "ExtractionResult",
    "ExtractionThrottled",
    "Extractor",
    "JobOutcome",
    "Proposal",
    "ProposalScope",
    "ProposalSink",
    "ReceivedJob",
    "RuleBasedExtractor",
    "SinkOutcome",
    "TranscriptJob",
    "Usage",
    "effective_scope",
    "looks_like_instruction",
    "looks_secret",
    "normalise_key",
    "parse_job",
    "process_batch",
    "sanitise_value",
]
