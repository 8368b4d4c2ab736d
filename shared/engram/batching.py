"""Items cut into the requests of a batch API: consecutive runs within a count and a size limit
(an event bus's ``PutEvents``, a queue's ``SendMessageBatch``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def packed(
    items: Iterable[T], *, size_of: Callable[[T], int], max_items: int, max_size: int
) -> Iterator[list[T]]:
    """``items`` in order, in runs of at most ``max_items`` whose sizes add up to at most
    ``max_size``; an item is never split, and one larger than ``max_size`` goes alone."""
    batch: list[T] = []
    size = 0
    for item in items:
        n = size_of(item)
        if batch and (len(batch) >= max_items or size + n > max_size):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        yield batch
