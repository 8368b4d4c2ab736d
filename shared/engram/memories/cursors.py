"""Signed page cursors: a cursor the service did not issue is refused, not interpreted.

A store pages with its own opaque keyset cursor (``MemoryTx.list_memories``). What a client
sees is that cursor plus an HMAC-SHA256 tag over the cursor and the listing it belongs to
(purpose, team, filter), ``<store cursor>.<tag>``, both base64url without padding. A cursor
with any byte changed, or one taken from another team's or another filter's listing, fails
the check: 422 naming ``cursor``, before the store reads it.

The key comes from the composition root (``engram.bootstrap``: ``Settings.cursor_key``, the
Secrets Manager secret ``Settings.cursor_key_secret_arn`` in AWS, or a key file under
``Settings.data_dir`` locally), so every process of one deployment accepts the cursors of the
others. Rotating the key invalidates the cursors in flight: a client starts the listing again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Annotated

from pydantic import StringConstraints

from engram import limits
from engram.errors import InvalidInput

_TAG_BYTES = 32
_TAG_CHARS = 43  # base64url of 32 bytes, unpadded
MIN_KEY_BYTES = 16
#: A cursor as the API issues it (its JSON Schema ``pattern``).
CURSOR_PATTERN = rf"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{{{_TAG_CHARS}}}$"
Cursor = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_CURSOR_CHARS, pattern=CURSOR_PATTERN),
]


def encode_cursor(created_at: datetime, row_id: str) -> str:
    """A store's keyset position: the (``created_at``, id) of the last row of a page. Both
    stores and the review queue (which merges two listings) page on it."""
    raw = f"{created_at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, row_id = raw.partition("|")
        when = datetime.fromisoformat(stamp)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor", "not a cursor this service issued") from None
    if not row_id or when.tzinfo is None:
        raise InvalidInput("cursor", "not a cursor this service issued")
    return when, row_id


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


class CursorSigner:
    """Signs store cursors for clients and opens the ones clients send back."""

    def __init__(self, key: bytes | None = None) -> None:
        """``key``: at least 16 bytes; ``None`` makes a random key that only this process
        knows (tests; the composition root always passes the deployment's key)."""
        key = secrets.token_bytes(_TAG_BYTES) if key is None else key
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a cursor key needs at least {MIN_KEY_BYTES} bytes")
        self._key = key

    def _tag(self, cursor: str, scope: tuple[str, ...]) -> str:
        message = "\x00".join((*scope, cursor)).encode("utf-8")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def sign(self, cursor: str | None, *scope: str) -> str | None:
        """The client's form of a store ``cursor`` for the listing ``scope`` names."""
        if cursor is None:
            return None
        return f"{cursor}.{self._tag(cursor, scope)}"

    def open(self, token: str | None, *scope: str) -> str | None:
        """The store cursor inside ``token``; ``InvalidInput("cursor")`` unless this service
        issued it for the same listing."""
        if token is None:
            return None
        cursor, dot, tag = token.rpartition(".")
        expected = self._tag(cursor, scope).encode("ascii")
        given = tag.encode("utf-8", errors="surrogatepass")
        if not dot or not cursor or not hmac.compare_digest(given, expected):
            raise InvalidInput("cursor", "is not a cursor this service issued for this listing")
        return cursor
