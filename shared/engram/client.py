"""The Python client for chat backends (httpx).

::

    from engram.client import EngramClient

    engram = EngramClient("http://127.0.0.1:8000", token=token)
    context = engram.start_session(persona_id="helpdesk", query="royalty report for ACME")
    system_prompt = base_prompt + "\\n\\n" + context["prompt"]
    engram.emit({"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 120})
    ...
    engram.drain()  # at exit: deliver what emit() queued
    engram.close()

``emit`` never blocks and never raises: events go to a bounded queue that a background thread
posts to ``POST /v1/events`` in batches of up to 100; when the queue is full the event is
dropped and counted (``dropped``), and a batch the service refused is counted in
``failed_events``. Every other method is synchronous and raises ``EngramAPIError`` (with
``status``, ``code``, ``message``, ``details``) for an error response, ``EngramTransportError``
when the service could not be reached.

A service token acts for a user of its team with ``act_as=`` (or ``client.for_user(user)``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

_log = logging.getLogger("engram.client")

MAX_EVENTS_PER_REQUEST = 100
DEFAULT_ACT_AS_HEADER = "x-engram-user"


class EngramError(Exception):
    """Base of the client's errors."""


class EngramTransportError(EngramError):
    """The request did not get an HTTP response (connection refused, timeout...)."""


class EngramAPIError(EngramError):
    """An error response: ``status`` and the body's ``error.code``/``message``/``details``."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


_STOP = object()


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
    ) -> None:
        if token is None and token_provider is None:
            raise ValueError("give a token or a token_provider")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._token_provider = token_provider
        self.act_as = act_as
        self.act_as_header = act_as_header
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._owns_http = True
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._pending = 0
        self._pending_cond = threading.Condition()
        #: events dropped because the queue was full
        self.dropped = 0
        #: events the service refused or that could not be sent
        self.failed_events = 0
        #: events the service accepted (202)
        self.sent_events = 0

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
    ) -> Any:
        """One call; the decoded JSON body (``None`` for 204). Raises on an error status."""
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        headers = self._headers(act_as)
        if json is not None:  # the service answers 415 to a body that is not declared JSON
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(
                method, path, json=json, params=clean_params or None, headers=headers
            )
        except httpx.HTTPError as exc:
            raise EngramTransportError(f"{method} {path}: {exc}") from exc
        if response.status_code >= 400:
            raise _api_error(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def for_user(self, user_id: str) -> EngramClient:
        """A client sharing this one's token that acts for ``user_id`` (service tokens)."""
        clone = EngramClient.__new__(EngramClient)
        clone.__dict__.update(self.__dict__)
        clone.act_as = user_id
        clone._owns_http = False  # the pool stays open until the parent closes it
        clone._queue = queue.Queue(maxsize=self._queue.maxsize)
        clone._worker = None
        clone._worker_lock = threading.Lock()
        clone._pending = 0
        clone._pending_cond = threading.Condition()
        clone.dropped = clone.failed_events = clone.sent_events = 0
        return clone

    # --- fire-and-forget -----------------------------------------------------------------
    def emit(self, *events: Mapping[str, Any]) -> int:
        """Queue events for ``POST /v1/events``; never blocks or raises. Returns how many
        were queued (the rest were dropped and counted in ``dropped``)."""
        self._ensure_worker()
        queued = 0
        for event in events:
            with self._pending_cond:
                self._pending += 1
            try:
                self._queue.put_nowait(dict(event))
                queued += 1
            except queue.Full:
                with self._pending_cond:
                    self._pending -= 1
                    self._pending_cond.notify_all()
                self.dropped += 1
        return queued

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

    def _ensure_worker(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        with self._worker_lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="engram-emit", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            batch: list[dict[str, Any]] = [item]  # type: ignore[list-item]
            stop_after = False
            while len(batch) < MAX_EVENTS_PER_REQUEST:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop_after = True
                    break
                batch.append(more)  # type: ignore[arg-type]
            try:
                self.request("POST", "/v1/events", json={"events": batch})
                self.sent_events += len(batch)
            except Exception as exc:
                self.failed_events += len(batch)
                _log.warning("engram: %d events not delivered: %s", len(batch), exc)
            finally:
                with self._pending_cond:
                    self._pending -= len(batch)
                    self._pending_cond.notify_all()
            if stop_after:
                return

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every emitted event was delivered (or failed). True if done in time."""
        deadline = time.monotonic() + timeout
        with self._pending_cond:
            while self._pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._pending_cond.wait(remaining)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Drain emitted events, stop the worker and close the connection pool."""
        self.drain(timeout)
        worker = self._worker
        if worker is not None and worker.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=1)
            worker.join(timeout=2)
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the v1 API ----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/health")
        return result

    def post_observations(self, observations: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "POST", "/v1/observations", json={"observations": [dict(o) for o in observations]}
        )
        return result

    def post_events(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """Synchronous ``POST /v1/events`` (``emit`` is the fire-and-forget one)."""
        result: dict[str, Any] = self.request(
            "POST", "/v1/events", json={"events": [dict(e) for e in events]}
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


def _api_error(response: httpx.Response) -> EngramAPIError:
    code, message, details = "http_error", response.reason_phrase or "error", None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = str(err.get("code", code))
        message = str(err.get("message", message))
        details = err.get("details")
    elif isinstance(body, dict) and "message" in body:
        message = str(body["message"])
    return EngramAPIError(response.status_code, code, message, details)
