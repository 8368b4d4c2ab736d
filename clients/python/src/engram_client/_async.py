"""``AsyncEngramClient``: the same operations, retries and emission on asyncio."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, Unpack

import httpx

from engram_client import _calls
from engram_client._base import (
    ClientBase,
    ClientOptions,
    RequestOptions,
    async_operation,
    decode,
    read,
    send_kwargs,
)
from engram_client._calls import Call
from engram_client._emitter import AsyncEmitter, DrainReport
from engram_client._retry import asend_with_retries

T = TypeVar("T")


class AsyncEngramClient(ClientBase):
    """The async client: ``EngramClient``'s operations as coroutines, with the same
    ``Idempotency-Key`` and retry rules. ``emit`` queues without waiting; a task of the
    running event loop delivers the batches, and ``await drain()`` reports the counts."""

    _emitter: AsyncEmitter

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(base_url, token, **options)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport)
        self._owns_http = True
        self._reset_emitter(self.queue_size)

    def _reset_emitter(self, queue_size: int) -> None:
        self._closing = asyncio.Event()  # set by aclose(): waiting retries give up
        self._emitter = AsyncEmitter(self._post_batch, queue_size=queue_size)
        self._reset_counters()

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Any:
        """One call; the decoded JSON body (``None`` for 204). Raises on an error status
        (options: ``json``, ``params``, ``act_as``, ``idempotency_key``, ``repeatable``)."""
        planned = self._plan(method, path, **options)

        async def send() -> httpx.Response:
            return await self._http.request(planned.method, planned.path, **send_kwargs(planned))

        sent = await asend_with_retries(send, self._attempts(planned), stop=self._closing)
        return decode(sent)

    async def call(self, call: Call[T], *, act_as: str | None = None) -> T:
        body = await self.request(call.method, call.path, **self._call_options(call, act_as))
        return read(call, body)

    def for_user(self, user_id: str) -> AsyncEngramClient:
        """A client sharing this one's token and pool that acts for ``user_id``."""
        clone = AsyncEngramClient.__new__(AsyncEngramClient)
        clone.__dict__.update(self.__dict__)
        clone.act_as = user_id
        clone._owns_http = False
        clone._reset_emitter(self.queue_size)
        return clone

    async def _post_batch(self, batch: list[dict[str, Any]]) -> None:
        await self.request("POST", "/v1/events", json={"events": batch})

    async def drain(self, timeout: float = 10.0) -> DrainReport:
        return await self._emitter.drain(timeout)

    async def aclose(self, timeout: float = 10.0) -> DrainReport:
        """Drain (at most ``timeout`` seconds), then stop the worker and close the pool."""
        report = await self.drain(timeout)
        self._closing.set()
        await self._emitter.stop()
        if self._owns_http:
            await self._http.aclose()
        return report

    async def __aenter__(self) -> AsyncEngramClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the v1 API (one definition per operation, in engram_client._calls) --------------
    health = async_operation(_calls.health)
    post_observations = async_operation(_calls.post_observations)
    post_events = async_operation(_calls.post_events)
    start_session = async_operation(_calls.start_session)
    send_transcript = async_operation(_calls.send_transcript)
    facts = async_operation(_calls.facts)
    forget_fact = async_operation(_calls.forget_fact)
    save = async_operation(_calls.save)
    recall = async_operation(_calls.recall)
    get_memory = async_operation(_calls.get_memory)
    update_memory = async_operation(_calls.update_memory)
    delete_memory = async_operation(_calls.delete_memory)
    archive_memory = async_operation(_calls.archive_memory)
    memory_history = async_operation(_calls.memory_history)
    memory_versions = async_operation(_calls.memory_versions)
    restore_memory = async_operation(_calls.restore_memory)
    merge_memory = async_operation(_calls.merge_memory)
    tools = async_operation(_calls.tools)
    execute_tool = async_operation(_calls.execute_tool)
    provider_tools = async_operation(_calls.provider_tools)
    call_tool = async_operation(_calls.call_tool)
    rank_tools = async_operation(_calls.rank_tools)
    review_queue = async_operation(_calls.review_queue)
    review_page = async_operation(_calls.review_page)
    approve = async_operation(_calls.approve)
    reject = async_operation(_calls.reject)
    put_persona = async_operation(_calls.put_persona)
    get_persona = async_operation(_calls.get_persona)
    set_team_memory = async_operation(_calls.set_team_memory)
    export = async_operation(_calls.export)
    erase = async_operation(_calls.erase)
