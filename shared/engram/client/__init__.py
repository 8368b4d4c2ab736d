"""The Python client for chat backends (httpx).

::

    from engram.client import EngramClient

    engram = EngramClient("http://127.0.0.1:8000", token=token)
    context = engram.start_session(persona_id="helpdesk", query="royalty report for ACME")
    system_prompt = base_prompt + "\\n\\n" + context["prompt"]
    engram.emit({"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 120})
    ...
    report = engram.drain()  # at exit: deliver what emit() queued; counts what happened
    engram.close()

Every request but a read carries a fresh ``Idempotency-Key``, reused on its own retries. 429,
503 and connection errors are retried with exponential backoff and jitter, never earlier than
``Retry-After``, within the bounds of a ``RetryPolicy`` (count and total time; see
``engram.client._retry`` for exactly what is retried).

``emit`` never blocks and never raises: events go to a bounded queue that a background thread
posts to ``POST /v1/events`` in batches of up to 100 (with the same retries); when the queue is
full the event is dropped and counted (``dropped``), and a batch the service refused or that
exhausted its retries is counted in ``failed_events`` (the latter also in ``gave_up_events``);
``drain()`` returns these counts as a ``DrainReport``. Every other method is synchronous and
raises ``EngramAPIError`` (with ``status``, ``code``, ``message``, ``details``) for an error
response, ``EngramTransportError`` when the service could not be reached; both say how many
``attempts`` were made and whether the client ``gave_up`` retrying.

A service token acts for a user of its team with ``act_as=`` (or ``client.for_user(user)``).

The package needs only httpx and the standard library.
"""

from __future__ import annotations

from engram.client._client import DEFAULT_ACT_AS_HEADER, IDEMPOTENCY_HEADER, EngramClient
from engram.client._emitter import MAX_EVENTS_PER_REQUEST, DrainReport
from engram.client._errors import EngramAPIError, EngramError, EngramTransportError
from engram.client._retry import RetryPolicy

__all__ = [
    "DEFAULT_ACT_AS_HEADER",
    "IDEMPOTENCY_HEADER",
    "MAX_EVENTS_PER_REQUEST",
    "DrainReport",
    "EngramAPIError",
    "EngramClient",
    "EngramError",
    "EngramTransportError",
    "RetryPolicy",
]
