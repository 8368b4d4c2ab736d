"""The service's own login role, created (or updated) by ``engram migrate`` from its secret.

The functions never log in as the master user: they log in as this role, which may log in,
owns nothing, is no superuser and cannot bypass row-level security, and is a member of
``engram_app`` (``INHERIT``). Every session it opens is therefore under the tenant policies,
whether or not a code path sets the role. The master secret is used by the migration only.

The password reaches the server as a SCRAM-SHA-256 verifier (RFC 5802 / RFC 7677, in
PostgreSQL's ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` form), never in
clear text: a ``CREATE ROLE`` in the server's statement log holds no password. Clients log in
with the password itself, as usual.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Any

from psycopg import sql

from engram.adapters.postgres.pool import APP_ROLE

SCRAM_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)


def scram_verifier(
    password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    """PostgreSQL's stored form of ``password`` for SCRAM-SHA-256 authentication."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def ensure_login_role(conn: Any, username: str, password: str) -> bool:
    """Create ``username`` (LOGIN, member of ``engram_app``) with ``password``, or set the
    password of the existing role; returns whether it was created. ``conn`` is an autocommit
    connection of the migrating role (which administers ``engram_app``)."""
    if not username or username == APP_ROLE:
        raise ValueError(f"login role: {username!r} cannot be the service's login role")
    row = conn.execute(
        "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = %s", (username,)
    ).fetchone()
    if row is not None and row[0]:
        raise ValueError(f"login role: {username!r} is a superuser or bypasses row-level security")
    verb = sql.SQL("ALTER" if row is not None else "CREATE")
    conn.execute(
        sql.SQL("{} ROLE {} WITH LOGIN INHERIT PASSWORD {}").format(
            verb, sql.Identifier(username), sql.Literal(scram_verifier(password))
        )
    )
    conn.execute(
        sql.SQL("GRANT {} TO {}").format(sql.Identifier(APP_ROLE), sql.Identifier(username))
    )
    return row is None
