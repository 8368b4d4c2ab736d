"""Engram's Python client for chat backends (httpx + pydantic; nothing of the server).

::

    from engram_client import EngramClient

    engram = EngramClient("http://127.0.0.1:8000", token=token)
    context = engram.start_session(persona_id="helpdesk", query="royalty report for ACME")
    system_prompt = context.system_prompt(base_prompt)
    tools = context.rank_tools([t.name for t in my_tools])  # the user's affinities first
    engram.emit_tool("get_account", ok=True, duration_ms=120)
    ...
    report = engram.drain()  # at exit: deliver what emit() queued; counts what happened
    engram.close()

``AsyncEngramClient`` has the same operations as coroutines (``await engram.recall("q")``),
``await drain()`` and ``await aclose()``.

Answers are typed models (``engram_client.models``): attributes in snake_case, and items under
their JSON names for code written against the JSON (``context["prompt"]``).

Every request but a read carries a fresh ``Idempotency-Key``, reused on its own retries. 429,
503 and connection errors are retried with exponential backoff and jitter, never earlier than
``Retry-After``, within the bounds of a ``RetryPolicy`` (count and total time; see
``engram_client._retry`` for exactly what is retried).

``emit`` never blocks and never raises: events go to a bounded queue that a background worker
(a thread; a task of the event loop for the async client) posts to ``POST /v1/events`` in
batches of up to 100 (with the same retries); when the queue is full the event is dropped and
counted (``dropped``), and a batch the service refused or that exhausted its retries is
counted in ``failed_events`` (the latter also in ``gave_up_events``); ``drain()`` returns
these counts as a ``DrainReport``. Every other method raises ``EngramAPIError`` (with
``status``, ``code``, ``message``, ``details``) for an error response,
``EngramTransportError`` when the service could not be reached, ``EngramResponseError`` when
the answer has another shape; each says how many ``attempts`` were made and whether the
client ``gave_up`` retrying.

A service token acts for a user of its team with ``act_as=`` (or ``client.for_user(user)``).
"""

from __future__ import annotations

from engram_client import models
from engram_client._async import AsyncEngramClient
from engram_client._base import DEFAULT_ACT_AS_HEADER, IDEMPOTENCY_HEADER
from engram_client._client import EngramClient
from engram_client._emitter import MAX_EVENTS_PER_REQUEST, DrainReport
from engram_client._errors import (
    EngramAPIError,
    EngramError,
    EngramResponseError,
    EngramTransportError,
)
from engram_client._retry import RetryPolicy
from engram_client.models import SessionContext

__all__ = [
    "DEFAULT_ACT_AS_HEADER",
    "IDEMPOTENCY_HEADER",
    "MAX_EVENTS_PER_REQUEST",
    "AsyncEngramClient",
    "DrainReport",
    "EngramAPIError",
    "EngramClient",
    "EngramError",
    "EngramResponseError",
    "EngramTransportError",
    "RetryPolicy",
    "SessionContext",
    "models",
]
