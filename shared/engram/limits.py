"""Every limit on what a client may send, in one place.

The HTTP models (``engram.api.models``), the domain models (memories, behaviour, extraction),
the services, the tool schemas and the OpenAPI document all read their numbers from here, so
one value cannot drift from another. docs/api.md states them in its "Limits" table. Lengths
count Unicode characters (code points); sizes count bytes of compact UTF-8 JSON.

This module imports nothing: any package may use it without breaking the layering rule.
"""

from __future__ import annotations

#: Largest request body (``Settings.max_body_bytes`` defaults to it; 413 past it).
MAX_BODY_BYTES = 256 * 1024
#: Observations or events per request.
MAX_BATCH_ITEMS = 100

#: Every id a client sends or a token carries: ``id``, ``personaId``, ``sourceChannelId``,
#: ``conversationId`` and every other path id, ``sub``, the team, the act-as user, the
#: ``Idempotency-Key`` header.
MAX_ID_CHARS = 128
#: Names: ``toolName``, entity types and names, domains, group names.
MAX_NAME_CHARS = 100
#: A memory's ``key``.
MAX_KEY_CHARS = 100
#: A memory's ``value``.
MAX_VALUE_CHARS = 2000
#: Observation ``content``, a query event's ``text``, a session's and a recall's ``query``.
MAX_CONTENT_CHARS = 1000
#: A failed tool event's ``error``.
MAX_ERROR_CHARS = 1000
#: Observation ``metadata`` as compact UTF-8 JSON.
MAX_METADATA_BYTES = 4 * 1024
#: A tool event's ``result`` as compact UTF-8 JSON.
MAX_TOOL_RESULT_BYTES = 64 * 1024
#: A tool event's ``durationMs`` (one day).
MAX_DURATION_MS = 86_400_000
#: Messages of one transcript.
MAX_TRANSCRIPT_MESSAGES = 500
#: One transcript message's ``content``.
MAX_MESSAGE_CHARS = 16_000
#: A persona's extraction ``prompt``.
MAX_PROMPT_CHARS = 8000
#: A persona's ``allowedGroups``.
MAX_GROUPS = 100
#: ``maxResults`` of a recall, and its default.
MAX_RECALL_RESULTS = 100
DEFAULT_RECALL_RESULTS = 20
#: Candidates of one ``POST /v1/tools/rank``.
MAX_RANK_CANDIDATES = 200
#: ``limit`` of one page of a listing (the review queue, the memory listing), and its default.
MAX_PAGE = 100
DEFAULT_PAGE = 50
#: Ids of one bulk review.
MAX_BULK_REVIEW_IDS = 100
#: A page ``cursor`` (the service signs what it issues; see ``engram.memories.cursors``).
MAX_CURSOR_CHARS = 256
#: Retention rules, in days.
MAX_RETENTION_DAYS = 36_500
#: Epoch-millisecond times (``createdAt``, ``at``): 9999-12-31T23:59:59.999Z.
MAX_EPOCH_MS = 253_402_300_799_999
#: Arrays and objects nested in request JSON.
MAX_JSON_DEPTH = 64

# --- derived: ids the service builds from the values above --------------------------------
#: A fact id: ``fact:entity_frequency:<entityType>:<entityId>`` is the longest shape.
MAX_FACT_ID_CHARS = len("fact:entity_frequency::") + MAX_NAME_CHARS + MAX_ID_CHARS
#: A behavioural identity ``<team>:<user>``: the team matches the team-id pattern (nothing to
#: escape), each user character may become a three-character percent escape.
MAX_IDENTITY_CHARS = MAX_ID_CHARS + 1 + 3 * MAX_ID_CHARS

# --- the ingest queue: the service's own messages (not a client's input) --------------------
#: ``Settings.ingest_max_message_bytes`` (the queue's ``MaximumMessageSize``): its default
#: (SQS's default) and bounds. SQS accepts 1 KiB to 1 MiB; below 16 KiB one observation at the
#: limits above (content, metadata, id) might not fit in a message of its own.
DEFAULT_QUEUE_MESSAGE_BYTES = 256 * 1024
MIN_QUEUE_MESSAGE_BYTES = 16 * 1024
MAX_QUEUE_MESSAGE_BYTES = 1024 * 1024
