"""``EngramClient``: the HTTP API as methods, and fire-and-forget event emission."""

from __future__ import annotations

import threading
from typing import Any, TypeVar, Unpack

import httpx

from engram_client import _calls
from engram_client._base import (
    ClientBase,
    ClientOptions,
    RequestOptions,
    decode,
    read,
    send_kwargs,
    sync_operation,
)
from engram_client._calls import Call
from engram_client._emitter import DrainReport, Emitter
from engram_client._retry import send_with_retries

T = TypeVar("T")


class EngramClient(ClientBase):
    """The sync client. Every operation returns a typed model (``engram_client.models``) or
    raises ``EngramAPIError`` / ``EngramTransportError``; ``emit`` never blocks or raises."""

    _emitter: Emitter

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(base_url, token, **options)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._owns_http = True
        self._reset_emitter(self.queue_size)

    def _reset_emitter(self, queue_size: int) -> None:
        """Fresh emit state (a clone from ``for_user`` gets its own queue and counters)."""
        self._closing = threading.Event()  # set by close(): waiting retries give up
        self._emitter = Emitter(self._post_batch, queue_size=queue_size)
        self._reset_counters()

    # --- plumbing ------------------------------------------------------------------------
    def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Any:
        """One call; the decoded JSON body (``None`` for 204). Raises on an error status
        (options: ``json``, ``params``, ``act_as``, ``idempotency_key``, ``repeatable``)."""
        planned = self._plan(method, path, **options)

        def send() -> httpx.Response:
            return self._http.request(planned.method, planned.path, **send_kwargs(planned))

        return decode(send_with_retries(send, self._attempts(planned), stop=self._closing))

    def call(self, call: Call[T], *, act_as: str | None = None) -> T:
        """Make one operation of the API (``engram_client._calls``) and read its answer."""
        body = self.request(call.method, call.path, **self._call_options(call, act_as))
        return read(call, body)

    def for_user(self, user_id: str) -> EngramClient:
        """A client sharing this one's token and pool that acts for ``user_id`` (service
        tokens); it has its own emit queue and counters."""
        clone = EngramClient.__new__(EngramClient)
        clone.__dict__.update(self.__dict__)
        clone.act_as = user_id
        clone._owns_http = False  # the pool stays open until the parent closes it
        clone._reset_emitter(self.queue_size)
        return clone

    # --- fire-and-forget -----------------------------------------------------------------
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

    # --- the v1 API (one definition per operation, in engram_client._calls) --------------
    health = sync_operation(_calls.health)
    post_observations = sync_operation(_calls.post_observations)
    post_events = sync_operation(_calls.post_events)
    start_session = sync_operation(_calls.start_session)
    send_transcript = sync_operation(_calls.send_transcript)
    facts = sync_operation(_calls.facts)
    forget_fact = sync_operation(_calls.forget_fact)
    save = sync_operation(_calls.save)
    recall = sync_operation(_calls.recall)
    get_memory = sync_operation(_calls.get_memory)
    update_memory = sync_operation(_calls.update_memory)
    delete_memory = sync_operation(_calls.delete_memory)
    archive_memory = sync_operation(_calls.archive_memory)
    memory_history = sync_operation(_calls.memory_history)
    memory_versions = sync_operation(_calls.memory_versions)
    restore_memory = sync_operation(_calls.restore_memory)
    merge_memory = sync_operation(_calls.merge_memory)
    tools = sync_operation(_calls.tools)
    execute_tool = sync_operation(_calls.execute_tool)
    provider_tools = sync_operation(_calls.provider_tools)
    call_tool = sync_operation(_calls.call_tool)
    rank_tools = sync_operation(_calls.rank_tools)
    review_queue = sync_operation(_calls.review_queue)
    review_page = sync_operation(_calls.review_page)
    approve = sync_operation(_calls.approve)
    reject = sync_operation(_calls.reject)
    put_persona = sync_operation(_calls.put_persona)
    get_persona = sync_operation(_calls.get_persona)
    set_team_memory = sync_operation(_calls.set_team_memory)
    export = sync_operation(_calls.export)
    erase = sync_operation(_calls.erase)
