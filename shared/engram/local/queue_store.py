"""The durable part of a local queue: one queue's messages, receive counts, visibility
deadlines and dead letters in one SQLite file (WAL journal, ``synchronous=FULL`` by default).

Every mutating method of ``QueueStore`` is one committed transaction: ``add`` (a whole
``SendMessageBatch``, so one commit per request of the ingest function), ``receive``, ``settle``
and ``dead_letter_rows``. When a queue file is opened, messages that were in flight (received,
neither deleted nor released) become visible at once: the process that held them is gone.
Without a path the same code runs on a private in-memory SQLite database (for tests).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Synchronous = Literal["FULL", "NORMAL"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Message:
    message_id: str
    body: str
    attributes: dict[str, Any]
    sent_at_ms: int
    visible_at: float
    """Wall-clock epoch seconds from which the message may be received (again)."""
    receive_count: int = 0
    first_receive_ms: int | None = None
    sequence: int = 0
    """Row id: send order (duplicates of one message have their own rows)."""
    receipt: str | None = None
    """The receipt handle of the current receive; None when not received since."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    body TEXT NOT NULL,
    attributes TEXT NOT NULL,
    sent_at_ms INTEGER NOT NULL,
    visible_at REAL NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    first_receive_ms INTEGER,
    receipt TEXT
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at, seq);
CREATE UNIQUE INDEX IF NOT EXISTS messages_receipt ON messages (receipt);
CREATE TABLE IF NOT EXISTS dead_letters (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
);
"""
_SELECT_ALL = (
    "SELECT seq, message_id, body, attributes, sent_at_ms, visible_at, receive_count, "
    "first_receive_ms, receipt FROM messages ORDER BY seq"
)
_SELECT_VISIBLE = (
    "SELECT seq, message_id, body, attributes, sent_at_ms, visible_at, receive_count, "
    "first_receive_ms, receipt FROM messages WHERE visible_at <= ? ORDER BY seq LIMIT ?"
)


def _message(row: tuple[Any, ...]) -> Message:
    seq, message_id, body, attributes, sent_at_ms, visible_at, count, first, receipt = row
    return Message(
        message_id=message_id,
        body=body,
        attributes=json.loads(attributes),
        sent_at_ms=sent_at_ms,
        visible_at=visible_at,
        receive_count=count,
        first_receive_ms=first,
        sequence=seq,
        receipt=receipt,
    )


class QueueStore:
    """One queue's messages and dead letters in SQLite. Not thread-safe by itself: the owning
    ``LocalQueue`` calls it under its lock. Every mutating method is one committed
    transaction."""

    def __init__(
        self, path: Path | str | None = None, *, synchronous: Synchronous = "FULL"
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be FULL or NORMAL")
        self.path = Path(path) if path is not None else None
        self.synchronous = synchronous
        self._conn: sqlite3.Connection | None = None

    @property
    def durable(self) -> bool:
        return self.path is not None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=10.0
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.executescript(_SCHEMA)
        if self.path is not None:
            # whoever held the in-flight messages is gone: visible again, now
            with _transaction(conn):
                conn.execute(
                    "UPDATE messages SET receipt = NULL, visible_at = 0 WHERE receipt IS NOT NULL"
                )
        return conn

    def close(self) -> None:
        if self._conn is not None and self.path is not None:
            self._conn.close()
            self._conn = None

    # --- writes --------------------------------------------------------------------------
    def add(self, messages: Sequence[Message]) -> None:
        conn = self.db()
        with _transaction(conn):
            conn.executemany(
                "INSERT INTO messages (message_id, body, attributes, sent_at_ms, visible_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        m.message_id,
                        m.body,
                        json.dumps(m.attributes, default=str),
                        m.sent_at_ms,
                        m.visible_at,
                    )
                    for m in messages
                ],
            )

    def receive(self, messages: Sequence[Message], hidden_until: float) -> None:
        """Mark ``messages`` received: count + 1, a new receipt each, hidden until then."""
        at_ms = now_ms()
        for m in messages:
            m.receive_count += 1
            if m.first_receive_ms is None:
                m.first_receive_ms = at_ms
            m.receipt = f"{m.message_id}#{uuid.uuid4().hex}"
            m.visible_at = hidden_until
        conn = self.db()
        with _transaction(conn):
            conn.executemany(
                "UPDATE messages SET receive_count = ?, first_receive_ms = ?, receipt = ?, "
                "visible_at = ? WHERE seq = ?",
                [
                    (m.receive_count, m.first_receive_ms, m.receipt, m.visible_at, m.sequence)
                    for m in messages
                ],
            )

    def settle(
        self,
        *,
        delete: Sequence[str] = (),
        retry: Sequence[tuple[str, float]] = (),
        dead: Sequence[tuple[str | None, dict[str, Any]]] = (),
    ) -> int:
        """In one transaction: delete the messages of receipts ``delete``; make those of
        ``retry`` visible at the time given; copy each ``dead`` record to the dead letters and
        delete its message (when a receipt is given). Returns how many receipts matched."""
        conn = self.db()
        matched = 0
        with _transaction(conn):
            for receipt in delete:
                matched += conn.execute(
                    "DELETE FROM messages WHERE receipt = ?", (receipt,)
                ).rowcount
            for receipt, visible_at in retry:
                matched += conn.execute(
                    "UPDATE messages SET receipt = NULL, visible_at = ? WHERE receipt = ?",
                    (visible_at, receipt),
                ).rowcount
            for dead_receipt, record in dead:
                conn.execute(
                    "INSERT INTO dead_letters (record) VALUES (?)",
                    (json.dumps(record, default=str),),
                )
                if dead_receipt is not None:
                    matched += conn.execute(
                        "DELETE FROM messages WHERE receipt = ?", (dead_receipt,)
                    ).rowcount
        return matched

    def dead_letter_rows(self, seqs: Sequence[int], records: Sequence[dict[str, Any]]) -> None:
        """Move messages (by row) to the dead letters, one record each."""
        conn = self.db()
        with _transaction(conn):
            for seq, record in zip(seqs, records, strict=True):
                conn.execute(
                    "INSERT INTO dead_letters (record) VALUES (?)",
                    (json.dumps(record, default=str),),
                )
                conn.execute("DELETE FROM messages WHERE seq = ?", (seq,))

    # --- reads ---------------------------------------------------------------------------
    def visible(self, now: float, limit: int | None = None) -> list[Message]:
        rows = self.db().execute(_SELECT_VISIBLE, (now, -1 if limit is None else limit))
        return [_message(row) for row in rows]

    def next_visible_at(self) -> float | None:
        row = self.db().execute("SELECT MIN(visible_at) FROM messages").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def count(self) -> int:
        row = self.db().execute("SELECT COUNT(*) FROM messages").fetchone()
        return int(row[0]) if row else 0

    def in_flight(self) -> int:
        row = (
            self.db().execute("SELECT COUNT(*) FROM messages WHERE receipt IS NOT NULL").fetchone()
        )
        return int(row[0]) if row else 0

    def messages(self) -> list[Message]:
        rows = self.db().execute(_SELECT_ALL)
        return [_message(row) for row in rows]

    def dead_letters(self) -> list[dict[str, Any]]:
        rows = self.db().execute("SELECT record FROM dead_letters ORDER BY seq")
        return [json.loads(r[0]) for r in rows]


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
