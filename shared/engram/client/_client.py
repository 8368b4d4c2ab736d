"""``EngramClient``: the HTTP API as methods, and fire-and-forget event emission."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from engram.client._emitter import DrainReport, Emitter
from engram.client._errors import api_error
from engram.client._retry import RetryPolicy, send_with_retries

DEFAULT_ACT_AS_HEADER = "x-engram-user"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Requests whose repetition is harmless, so a lost answer is retried: the ingest routes store
# a retried request once by its Idempotency-Key; a session start consolidates each
# observation once. Other POSTs, PATCH and DELETE are retried only when the service surely
# did not act on them (429, 503, no connection).
_REPEATABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})
_REPEATABLE_POSTS = frozenset({"/v1/events", "/v1/observations", "/v1/sessions"})
_NO_KEY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class EngramClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        token_provider: Callable[[], str] | None = None,
        timeout: float = 5.0,
        act_as: str | None = None,
        act_as_header: str = DEFAULT_ACT_AS_HEADER,
        queue_size: int = 1000,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if token is None and token_provider is None:
            raise ValueError("give a token or a token_provider")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._token_provider = token_provider
        self.act_as = act_as
        self.act_as_header = act_as_header
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._owns_http = True
        self._rng = random.Random()  # noqa: S311 - backoff jitter, not a secret
        self._reset_emitter(queue_size)

    def _reset_emitter(self, queue_size: int) -> None:
        """Fresh emit state (a clone from ``for_user`` gets its own queue and counters)."""
        self._closing = threading.Event()  # set by close(): waiting retries give up
        self._emitter = Emitter(self._post_batch, queue_size=queue_size)
        #: retries made (by every call of this client, emits included)
        self.retries = 0
        self._retries_lock = threading.Lock()

    @property
    def dropped(self) -> int:
        """Events dropped because the emit queue was full."""
        return self._emitter.dropped

    @property
    def failed_events(self) -> int:
        """Events the service refused, or that could not be delivered within the retries."""
        return self._emitter.failed

    @property
    def gave_up_events(self) -> int:
        """Of ``failed_events``: given up on after retrying 429, 503 or connection errors."""
        return self._emitter.gave_up

    @property
    def sent_events(self) -> int:
        """Emitted events the service accepted (202)."""
        return self._emitter.sent

    # --- plumbing ------------------------------------------------------------------------
    def _headers(self, act_as: str | None = None) -> dict[str, str]:
        token = self._token_provider() if self._token_provider is not None else self._token
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        user = act_as or self.act_as
        if user:
            headers[self.act_as_header] = user
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        act_as: str | None = None,
        idempotency_key: str | None = None,
        repeatable: bool | None = None,
    ) -> Any:
        """One call; the decoded JSON body (``None`` for 204). Raises on an error status.

        Every request but a read carries an ``Idempotency-Key`` (``idempotency_key``, else a
        fresh one), the same on its retries. ``repeatable`` says whether sending it twice is
        harmless (by default: reads, PUT, and the ingest and session POSTs).
        """
        method = method.upper()
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        headers = self._headers(act_as)
        if json is not None:  # the service answers 415 to a body that is not declared JSON
            headers["Content-Type"] = "application/json"
        if method not in _NO_KEY_METHODS:
            headers[IDEMPOTENCY_HEADER] = idempotency_key or uuid.uuid4().hex
        if repeatable is None:
            repeatable = method in _REPEATABLE_METHODS or (
                method == "POST" and path in _REPEATABLE_POSTS
            )

        def send() -> httpx.Response:
            return self._http.request(
                method, path, json=json, params=clean_params or None, headers=headers
            )

        sent = send_with_retries(
            send,
            what=f"{method} {path}",
            policy=self.retry,
            repeatable=repeatable,
            rng=self._rng,
            stop=self._closing,
            on_retry=self._count_retry,
        )
        response = sent.response
        if response.status_code >= 400:
            error = api_error(response)
            error.attempts, error.gave_up = sent.attempts, sent.gave_up
            raise error
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _count_retry(self) -> None:
        with self._retries_lock:
            self.retries += 1

    def for_user(self, user_id: str) -> EngramClient:
        """A client sharing this one's token and pool that acts for ``user_id`` (service
        tokens); it has its own emit queue and counters."""
        clone = EngramClient.__new__(EngramClient)
        clone.__dict__.update(self.__dict__)
        clone.act_as = user_id
        clone._owns_http = False  # the pool stays open until the parent closes it
        clone._reset_emitter(self._emitter.queue_size)
        return clone

    # --- fire-and-forget -----------------------------------------------------------------
    def emit(self, *events: Mapping[str, Any]) -> int:
        """Queue events for ``POST /v1/events``; never blocks or raises. Returns how many
        were queued (the rest were dropped and counted in ``dropped``)."""
        return self._emitter.emit(events)

    def emit_query(self, text: str) -> int:
        return self.emit({"kind": "query", "text": text})

    def emit_tool(
        self,
        tool_name: str,
        *,
        ok: bool,
        duration_ms: int,
        error: str | None = None,
        result: Any = None,
    ) -> int:
        event: dict[str, Any] = {
            "kind": "tool",
            "toolName": tool_name,
            "ok": ok,
            "durationMs": int(duration_ms),
        }
        if error is not None:
            event["error"] = error
        if result is not None:
            event["result"] = result
        return self.emit(event)

    def _post_batch(self, batch: list[dict[str, Any]]) -> None:
        # a fresh Idempotency-Key per batch, the same on its retries
        self.request("POST", "/v1/events", json={"events": batch})

    def drain(self, timeout: float = 10.0) -> DrainReport:
        """Wait until every emitted event was delivered or failed (retries included), at
        most ``timeout`` seconds; report the counts (true when all were settled in time)."""
        return self._emitter.drain(timeout)

    def close(self, timeout: float = 10.0) -> DrainReport:
        """Drain emitted events (at most ``timeout`` seconds), then stop: a batch still
        waiting to retry gives up (counted), the worker ends and the pool closes."""
        report = self.drain(timeout)
        self._closing.set()
        self._emitter.stop()
        if self._owns_http:
            self._http.close()
        return report

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the v1 API ----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/health")
        return result

    def post_observations(
        self, observations: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "POST",
            "/v1/observations",
            json={"observations": [dict(o) for o in observations]},
            idempotency_key=idempotency_key,
        )
        return result

    def post_events(
        self, events: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Synchronous ``POST /v1/events`` (``emit`` is the fire-and-forget one)."""
        result: dict[str, Any] = self.request(
            "POST",
            "/v1/events",
            json={"events": [dict(e) for e in events]},
            idempotency_key=idempotency_key,
        )
        return result

    def start_session(
        self, persona_id: str | None = None, query: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if persona_id is not None:
            body["personaId"] = persona_id
        if query is not None:
            body["query"] = query
        result: dict[str, Any] = self.request("POST", "/v1/sessions", json=body)
        return result

    def facts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/facts")["facts"]
        return result

    def forget_fact(self, fact_id: str) -> None:
        self.request("DELETE", f"/v1/facts/{_seg(fact_id)}")

    def save(
        self,
        key: str,
        value: str,
        *,
        confidence: float | None = None,
        persona_id: str | None = None,
        source_channel_id: str | None = None,
        scope: str | None = None,
    ) -> dict[str, Any]:
        body = _compact(
            key=key,
            value=value,
            confidence=confidence,
            personaId=persona_id,
            sourceChannelId=source_channel_id,
            scope=scope,
        )
        result: dict[str, Any] = self.request("POST", "/v1/memories", json=body)
        return result

    def recall(
        self,
        query: str | None = None,
        *,
        max_results: int | None = None,
        persona_id: str | None = None,
    ) -> list[dict[str, Any]]:
        params = _compact(query=query, maxResults=max_results, personaId=persona_id)
        result: list[dict[str, Any]] = self.request("GET", "/v1/memories", params=params)[
            "memories"
        ]
        return result

    def get_memory(self, memory_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/memories/{_seg(memory_id)}")
        return result

    def update_memory(
        self,
        memory_id: str,
        *,
        key: str | None = None,
        value: str | None = None,
        confidence: float | None = None,
    ) -> dict[str, Any]:
        body = _compact(key=key, value=value, confidence=confidence)
        result: dict[str, Any] = self.request("PATCH", f"/v1/memories/{_seg(memory_id)}", json=body)
        return result

    def delete_memory(self, memory_id: str) -> None:
        self.request("DELETE", f"/v1/memories/{_seg(memory_id)}")

    def archive_memory(self, memory_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", f"/v1/memories/{_seg(memory_id)}/archive")
        return result

    def memory_history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's audit trail, oldest first (404 for one the caller may not read)."""
        path = f"/v1/memories/{_seg(memory_id)}/history"
        result: list[dict[str, Any]] = self.request("GET", path)["actions"]
        return result

    def tools(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/tools")["tools"]
        return result

    def execute_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        persona_id: str | None = None,
        *,
        source_channel_id: str | None = None,
    ) -> dict[str, Any]:
        """Run a tool call exactly as the model produced it (``arguments`` may be a JSON
        string, as OpenAI-style tool calls carry it)."""
        body = _compact(
            arguments=arguments if isinstance(arguments, str) else dict(arguments),
            personaId=persona_id,
            sourceChannelId=source_channel_id,
        )
        result: dict[str, Any] = self.request("POST", f"/v1/tools/{_seg(name)}", json=body)
        return result

    def send_transcript(
        self,
        conversation_id: str,
        messages: Iterable[Mapping[str, Any]],
        *,
        persona_id: str | None = None,
    ) -> dict[str, Any]:
        body = _compact(personaId=persona_id, messages=[dict(m) for m in messages])
        result: dict[str, Any] = self.request(
            "POST", f"/v1/conversations/{_seg(conversation_id)}/transcript", json=body
        )
        return result

    def review_queue(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/review")["memories"]
        return result

    def review_page(
        self, *, persona_id: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """One page of pending memories: ``{memories, nextCursor}``."""
        params = {"personaId": persona_id, "limit": limit, "cursor": cursor}
        result: dict[str, Any] = self.request("GET", "/v1/review", params=params)
        return result

    def approve(
        self, memory_id: str, *, key: str | None = None, value: str | None = None
    ) -> dict[str, Any]:
        """Approve a pending memory, with ``key`` / ``value`` edited first when given."""
        edits = _compact(key=key, value=value)
        result: dict[str, Any] = self.request(
            "POST", f"/v1/review/{_seg(memory_id)}/approve", json=edits or None
        )
        return result

    def reject(self, memory_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", f"/v1/review/{_seg(memory_id)}/reject")
        return result

    def put_persona(
        self,
        persona_id: str,
        *,
        allowed_groups: Iterable[str] = (),
        memory_enabled: bool = True,
        extraction_enabled: bool = False,
        extraction_prompt: str | None = None,
        retention: Mapping[str, int | None] | None = None,
    ) -> dict[str, Any]:
        """``retention`` (``{archiveAfterDays, deleteArchivedAfterDays}``, each days or None)
        replaces the persona's retention rules; left out, they stay as they are."""
        body: dict[str, Any] = {
            "allowedGroups": list(allowed_groups),
            "memoryEnabled": memory_enabled,
            "extraction": _compact(enabled=extraction_enabled, prompt=extraction_prompt),
        }
        if retention is not None:
            body["retention"] = dict(retention)
        result: dict[str, Any] = self.request("PUT", f"/v1/personas/{_seg(persona_id)}", json=body)
        return result

    def get_persona(self, persona_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/personas/{_seg(persona_id)}")
        return result

    def set_team_memory(
        self, memory_enabled: bool, *, retention: Mapping[str, int | None] | None = None
    ) -> dict[str, Any]:
        """``retention`` as for :meth:`put_persona` (the team's rules)."""
        body: dict[str, Any] = {"memoryEnabled": memory_enabled}
        if retention is not None:
            body["retention"] = dict(retention)
        result: dict[str, Any] = self.request("PUT", "/v1/settings/team", json=body)
        return result

    def export(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/me/export")
        return result

    def erase(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", "/v1/me")
        return result


def _compact(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _seg(value: str) -> str:
    return quote(value, safe="")
