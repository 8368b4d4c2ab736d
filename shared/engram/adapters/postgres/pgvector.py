"""Which pgvector a server offers, checked before migrating.

Engram's SQL needs pgvector 0.5.0 (HNSW indexes, ``vector_cosine_ops``, ``<=>``) and nothing
newer: the migrations and the store are tested on pgvector 0.6.2 (PostgreSQL 16) and 0.8.5
(PostgreSQL 18). Later features (``halfvec``/``sparsevec`` in 0.7.0, iterative index scans in
0.8.0) are not used, so an older pgvector, as on an Aurora minor that predates them, changes
nothing. Below the floor, or without pgvector at all, ``engram migrate`` refuses with the
reason instead of failing half-way through a migration. An installed extension older than the
server's default version is reported (``ALTER EXTENSION vector UPDATE`` moves it forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

MINIMUM = (0, 5, 0)
"""The oldest pgvector Engram's SQL runs on (HNSW)."""


class PgvectorUnsupported(psycopg.NotSupportedError):
    """The server has no pgvector, or one older than ``MINIMUM``."""


def parse_version(text: str) -> tuple[int, ...]:
    """``"0.8.0"`` -> ``(0, 8, 0)``; a suffix such as ``-rds.1`` is ignored."""
    parts = []
    for piece in text.split("-", maxsplit=1)[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Pgvector:
    """The pgvector of a database: the version the server would install, and the installed
    one (None when the extension is not created yet)."""

    available: str | None
    installed: str | None

    @property
    def effective(self) -> str | None:
        """The version the migrations will run with."""
        return self.installed or self.available

    def check(self) -> list[str]:
        """Raise :class:`PgvectorUnsupported` below ``MINIMUM``; else notices for the log."""
        if self.effective is None:
            raise PgvectorUnsupported(
                "pgvector is not available on this server: install the 'vector' extension "
                f"(pgvector >= {_dotted(MINIMUM)})"
            )
        if parse_version(self.effective) < MINIMUM:
            raise PgvectorUnsupported(
                f"pgvector {self.effective} is older than {_dotted(MINIMUM)}, which Engram "
                "needs (HNSW indexes)"
                + (
                    f"; the server offers {self.available}: ALTER EXTENSION vector UPDATE"
                    if self.available and parse_version(self.available) >= MINIMUM
                    else ""
                )
            )
        if (
            self.installed
            and self.available
            and parse_version(self.installed) < parse_version(self.available)
        ):
            return [
                f"pgvector {self.installed} is installed, {self.available} is available: "
                "ALTER EXTENSION vector UPDATE moves it forward"
            ]
        return []


def probe(conn: psycopg.Connection[Any]) -> Pgvector:
    """The pgvector of the database ``conn`` is connected to."""
    row = conn.execute(
        "SELECT default_version, installed_version FROM pg_available_extensions"
        " WHERE name = 'vector'"
    ).fetchone()
    return Pgvector(None, None) if row is None else Pgvector(row[0], row[1])
