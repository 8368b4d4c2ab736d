"""What is left of a user in Redis and PostgreSQL: every key and every row that mentions a
needle (an id, a secret), read by the administrators that may list everything."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import psycopg
from psycopg import sql


def _values(client: Any, key: bytes) -> list[bytes]:
    """Every member, field and value stored at ``key``, whatever its type (a type without
    members, its serialised dump)."""
    kind = client.type(key).decode()
    if kind == "string":
        return [client.get(key) or b""]
    if kind == "hash":
        return [b for kv in client.hgetall(key).items() for b in kv]
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        return list(client.zrange(key, 0, -1))
    if kind == "stream":
        return [b for _, fields in client.xrange(key) for kv in fields.items() for b in kv]
    return [client.dump(key) or b""]


def redis_keys_mentioning(client: Any, needle: str, *, match: str = "*") -> list[str]:
    """The keys matching ``match`` whose name or any stored value contains ``needle``."""
    raw = needle.encode("utf-8")
    found = [
        key.decode("utf-8", "replace")
        for key in client.scan_iter(match=match, count=1000)
        if raw in key or any(raw in v for v in _values(client, key))
    ]
    return sorted(found)


def postgres_rows_mentioning(
    database_url: str, needle: str, *, skip: Collection[str] = ()
) -> list[tuple[str, str]]:
    """``(table, row as text)`` for every row of every public table (but ``skip``) whose text
    form contains ``needle``, table by table in name order."""
    hits: list[tuple[str, str]] = []
    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall()
        ]
        for table in tables:
            if table in skip:
                continue
            query = sql.SQL("SELECT t::text FROM {} t WHERE t::text LIKE %s").format(
                sql.Identifier(table)
            )
            hits += [(table, r[0]) for r in conn.execute(query, (f"%{needle}%",)).fetchall()]
    return hits
