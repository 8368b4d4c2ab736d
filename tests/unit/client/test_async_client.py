"""The async client over a mock transport: the same operations, typed answers, keys and
retries as the sync one, and emission on the event loop with the same counts."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from tests.unit.client.bodies import Script, Step, respond

from engram_client import (
    AsyncEngramClient,
    DrainReport,
    EngramAPIError,
    EngramResponseError,
    EngramTransportError,
    RetryPolicy,
)
from engram_client.models import Memory, SessionContext

FAST = RetryPolicy(max_retries=3, backoff_s=0.001, max_backoff_s=0.004, max_elapsed_s=5)


def status(code: int) -> Step:
    return lambda request: httpx.Response(code, json={"error": {"code": "x", "message": "m"}})


def refuse_connection(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("injected", request=request)


def client(script: Script, policy: RetryPolicy = FAST, **kwargs: object) -> AsyncEngramClient:
    transport = httpx.MockTransport(script)
    return AsyncEngramClient(
        "http://engram.test", "tok", transport=transport, retry=policy, **kwargs
    )  # type: ignore[arg-type]


def test_operations_answer_typed_models_readable_by_json_name() -> None:
    async def run() -> None:
        async with client(Script(respond)) as c:
            context = await c.start_session(persona_id="p1", query="q")
            assert isinstance(context, SessionContext)
            assert (
                context["toolAffinities"]
                == context.tool_affinities
                == {
                    "get_account": 0.8,
                    "search": 0.3,
                }
            )
            assert context.rank_tools(["search", "other", "get_account"]) == [
                "get_account",
                "search",
                "other",
            ]
            assert context.system_prompt("Be brief.").startswith("Be brief.\n\n## What")
            saved = await c.save("k", "v")
            assert isinstance(saved, Memory)
            assert (saved.owner_id, saved["ownerId"]) == ("alice", "alice")
            assert [m.key for m in await c.recall("q")] == ["k"]
            assert await c.delete_memory("m1") is None

    asyncio.run(run())


def test_a_503_is_retried_with_the_same_key_and_the_next_call_gets_a_new_one() -> None:
    script = Script(status(503), respond, respond)

    async def run() -> None:
        async with client(script) as c:
            assert (await c.post_events([{"kind": "query", "text": "q"}])).ids == ["o1"]
            await c.post_events([{"kind": "query", "text": "q"}])
            assert c.retries == 1

    asyncio.run(run())
    first, retry, second = script.keys()
    assert first is not None
    assert retry == first
    assert second not in (None, first)


def test_what_may_have_been_done_is_not_retried_unless_repeatable_and_bounds_hold() -> None:
    async def run() -> None:
        script = Script(status(502), respond)
        async with client(script) as c:
            with pytest.raises(EngramAPIError) as err:
                await c.save("k", "v")
            assert (err.value.status, err.value.attempts, err.value.gave_up) == (502, 1, False)
            assert len(await c.recall("q")) == 1  # a read is repeated
        down = Script(refuse_connection)
        async with client(down) as c:
            with pytest.raises(EngramTransportError) as lost:
                await c.facts()
            assert (lost.value.attempts, lost.value.gave_up) == (FAST.max_retries + 1, True)

    asyncio.run(run())


def test_an_answer_of_another_shape_is_an_error_not_a_half_model() -> None:
    def wrong(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"unexpected": True})

    async def run() -> None:
        async with client(Script(wrong)) as c:
            with pytest.raises(EngramResponseError, match="POST /v1/memories"):
                await c.save("k", "v")

    asyncio.run(run())


def test_emit_batches_counts_and_drains_on_the_event_loop() -> None:
    script = Script(status(503), respond)

    async def run() -> None:
        c = client(script, queue_size=150)
        assert c.emit(*({"kind": "query", "text": f"q{i}"} for i in range(160))) == 150
        report = await c.drain(5)
        assert report == DrainReport(
            done=True, sent=150, failed=0, gave_up=0, dropped=10, pending=0
        )
        await c.aclose()

    asyncio.run(run())
    batches = [r for r in script.requests if r.url.path == "/v1/events"]
    assert len(batches) == 3  # 100 + 50, the first one retried once
    assert batches[0].headers["idempotency-key"] == batches[1].headers["idempotency-key"]

    async def refused_and_lost() -> None:
        c = client(Script(status(422)))
        c.emit({"kind": "nope"})
        assert ((await c.drain(5)).failed, c.gave_up_events) == (1, 0)
        await c.aclose()
        c = client(Script(refuse_connection))
        c.emit_query("lost")
        report = await c.drain(5)
        assert (report.sent, report.failed, report.gave_up) == (0, 1, 1)
        await c.aclose()

    asyncio.run(refused_and_lost())


def test_aclose_stops_a_batch_waiting_to_retry_and_counts_it() -> None:
    script = Script(status(503))

    async def run() -> None:
        c = client(script, RetryPolicy(max_retries=10, backoff_s=30, max_elapsed_s=600))
        c.emit_tool("get_account", ok=True, duration_ms=5)
        assert not await c.drain(0.2)  # waiting 15-30 s before its first retry
        report = await c.aclose(timeout=0)
        assert report.pending == 1
        assert (c.failed_events, c.gave_up_events) == (1, 1)

    asyncio.run(run())
    assert len(script.requests) == 1


def test_for_user_acts_for_the_user_with_its_own_counters() -> None:
    script = Script(respond)

    async def run() -> None:
        async with client(script) as parent:
            bob = parent.for_user("bob")
            bob.emit_query("q")
            assert (await bob.drain(5)).sent == 1
            assert (await parent.drain(5)).sent == 0
            await bob.facts()

    asyncio.run(run())
    assert {r.headers["x-engram-user"] for r in script.requests} == {"bob"}


def test_a_client_made_before_the_event_loop_runs_works_on_it() -> None:
    c = client(Script(respond))

    async def run() -> None:
        c.emit_query("q")
        assert (await c.drain(5)).sent == 1
        assert (await c.health()).status == "ok"
        await c.aclose()

    asyncio.run(run())
