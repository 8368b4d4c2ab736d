"""A deterministic, rule-based extractor: the local default (no model, no network).

It reads USER messages only (plus, when persona scope is enabled, assistant statements of
policy and users' how-to questions) and recognises a fixed set of first-person statements.
Every rule is anchored at the start of a clause, so reported speech ("he said I live in …")
does not match. See ``docs/extraction.md`` for the table of patterns, keys and confidences.

Skipped on purpose:

* questions (a sentence ending in "?" or opening with an interrogative) — except a polite
  "can you remember that …?" request;
* hypotheticals and hedges ("if", "suppose", "imagine", "what if", "maybe", "might", "wish", …);
* negated values ("my name is not …") and desires ("I would love to …");
* anything whose key or value looks like an instruction to the assistant
  (:func:`engram.extraction.sanitize.looks_like_instruction`);
* secrets: passwords, PINs, API keys, tokens, card/account numbers
  (:func:`engram.extraction.sanitize.looks_secret`).

Within one transcript the last statement of a key wins.
"""

from __future__ import annotations

from pydantic import ValidationError

from engram.extraction.clauses import HYPOTHETICAL, Candidate, sentences
from engram.extraction.models import ExtractionResult, Proposal, ProposalScope, TranscriptJob
from engram.extraction.persona_rules import rule_faq, rule_policy
from engram.extraction.personal_rules import first_match, rule_remember
from engram.extraction.sanitize import bound, looks_like_instruction, looks_secret, sanitise_value

EXTRACTOR_NAME = "rules"
DEFAULT_MAX_VALUE_CHARS = 500


class RuleBasedExtractor:
    """Deterministic extraction from first-person statements. Thread-safe, stateless."""

    name = EXTRACTOR_NAME

    def __init__(self, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> None:
        if not 1 <= max_value_chars <= 2000:
            raise ValueError("max_value_chars must be within 1..2000")
        self._max_value_chars = max_value_chars

    def extract(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> ExtractionResult:
        del persona_prompt  # rules do not read prompts
        personal = ProposalScope.PERSONA_USER if job.persona_id else ProposalScope.USER
        learn_persona = persona_scope and job.persona_id is not None
        found: dict[tuple[ProposalScope, str], Proposal] = {}

        def add(candidate: Candidate | None, scope: ProposalScope) -> None:
            if candidate is None:
                return
            proposal = self._proposal(candidate, scope, job.conversation_id)
            if proposal is None:
                return
            slot = (proposal.scope, proposal.key)
            found.pop(slot, None)  # last statement wins, and keeps its place in time
            found[slot] = proposal

        for message in job.messages:
            if message.role == "user":
                for sentence in sentences(message.content):
                    for clause in sentence.clauses:
                        remembered = rule_remember(clause)
                        if remembered is not None:
                            if not HYPOTHETICAL.search(clause):
                                add(remembered, personal)
                            continue
                        if sentence.question:
                            if learn_persona:
                                add(rule_faq(clause), ProposalScope.PERSONA)
                            continue
                        if HYPOTHETICAL.search(clause):
                            continue
                        add(first_match(clause), personal)
            elif message.role == "assistant" and learn_persona:
                for sentence in sentences(message.content):
                    if sentence.question:
                        continue
                    for clause in sentence.clauses:
                        if not HYPOTHETICAL.search(clause):
                            add(rule_policy(clause), ProposalScope.PERSONA)
        return ExtractionResult(proposals=list(found.values()), usage=None, extractor=self.name)

    def _proposal(
        self, candidate: Candidate, scope: ProposalScope, conversation_id: str
    ) -> Proposal | None:
        value = bound(sanitise_value(candidate.value), self._max_value_chars)
        if looks_like_instruction(candidate.key) or looks_like_instruction(value):
            return None
        if looks_secret(candidate.key, value):
            return None
        try:
            return Proposal(
                key=candidate.key,
                value=value,
                confidence=candidate.confidence,
                scope=scope,
                source_channel_id=conversation_id,
            )
        except ValidationError:
            return None
