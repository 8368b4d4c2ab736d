"""Pages of the identity index (``P:identities``: identity ids scored by last activity)."""

from __future__ import annotations

from engram.adapters.redis_behaviour.log_codec import as_text
from engram.adapters.redis_client import RedisClient
from engram.behaviour.ports import decode_identity_cursor, keyset_answer, offset_answer, page_after


def _high(active_before_ms: int | None) -> int | str:
    return "+inf" if active_before_ms is None else f"({active_before_ms}"


def offset_page(
    client: RedisClient, key: str, *, active_before_ms: int | None, offset: int, limit: int
) -> tuple[list[str], int]:
    """One page at an offset and the next offset (``0`` when done), in one round trip (the
    store has checked ``offset`` and ``limit``)."""
    rows = client.zrangebyscore(key, "-inf", _high(active_before_ms), start=offset, num=limit)
    return offset_answer([as_text(r) for r in rows], offset, limit)


def keyset_page(
    client: RedisClient, key: str, *, active_before_ms: int | None, cursor: str, limit: int
) -> tuple[list[str], str, int]:
    """One page after a keyset cursor (``""`` to start), the next cursor (``""`` when done)
    and the round trips it took (more than one only when more identities share the cursor's
    own score than one batch holds)."""
    after = decode_identity_cursor(cursor) if cursor else None
    low = "-inf" if after is None else repr(after[0])
    page: list[tuple[str, float]] = []
    offset, batch, trips = 0, limit + 1, 0
    while True:
        raw: list[tuple[bytes, float]] = client.zrangebyscore(  # type: ignore[assignment]
            key, low, _high(active_before_ms), start=offset, num=batch, withscores=True
        )
        trips += 1
        rows = [(as_text(m), float(sc)) for m, sc in raw]
        page += rows if after is None else page_after(rows, after, limit - len(page))
        page = page[:limit]
        if len(page) == limit or len(raw) < batch:
            break
        offset += batch
    ids, next_cursor = keyset_answer(page, limit)
    return ids, next_cursor, trips
