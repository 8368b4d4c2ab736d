"""``engram migrate``: apply the forward-only SQL migrations shipped with this package.

Before anything is applied the server's pgvector is checked
(``engram.adapters.postgres.pgvector``: refused clearly when missing or too old). Applied
versions are tracked in ``engram_migrations``; runs are serialised with a session-level
``pg_advisory_lock``, so two deploys migrating at once both succeed (the second finds nothing
left to do). The embedding dimension is fixed when a migration is applied.

``--wait-seconds N`` keeps retrying, with exponential backoff, while the server cannot be
reached or drops the connection (``psycopg.OperationalError``) for up to N seconds, logging
what it waits for: on a first deploy the RDS Proxy's targets take minutes to become
available. Re-running after a dropped connection is safe: the pending migrations of one run
are one transaction, each recorded with its version. SQL errors are never retried.

One transaction for the whole run, not one per migration: code of the previous release keeps
running while a deploy migrates, and sees the schema before the run or after it, never the
state between two migrations of one run (say, an index one migration drops and the next
restores). The rule migrations follow for that code is in docs/deployment.md.

With ``ENGRAM_DATABASE_APP_SECRET_ARN`` (the deploy-time migration in AWS) it then creates or
updates the service's login role from that secret's ``username`` and ``password``
(``engram.adapters.postgres.login_role``), under the same lock, on every run: the role always
matches its secret, whatever rotated since.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import psycopg

from engram.adapters.postgres import key_merge, pgvector
from engram.adapters.postgres.login_role import ensure_login_role
from engram.settings import Settings, get_settings

if TYPE_CHECKING:
    from engram.adapters.secrets import SecretsClient

LOCK_KEY = 0x656E6772616D  # "engram"
_log = logging.getLogger("engram.migrate")
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_TRACKING = """
CREATE TABLE IF NOT EXISTS engram_migrations (
  version     integer PRIMARY KEY,
  name        text NOT NULL,
  checksum    text NOT NULL,
  parameters  jsonb NOT NULL DEFAULT '{}',
  applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


#: Python run in a migration's transaction just before its SQL, by version: what SQL cannot
#: state the way the service does (the key rule of 0018)
PYTHON_STEPS: dict[int, Callable[[psycopg.Connection[Any]], None]] = {
    18: key_merge.merge_keys,
}


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    template: str

    def render(self, embedding_dimensions: int) -> str:
        return self.template.replace("{{embedding_dimensions}}", str(int(embedding_dimensions)))

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.template.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("engram.adapters.postgres.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    # a version is applied once: two files with one number would leave the second never run
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        clash = sorted(
            {f"{m.version:04d}_{m.name}" for m in found if versions.count(m.version) > 1}
        )
        raise RuntimeError(f"migrations share a version number: {', '.join(clash)}; renumber one")
    return sorted(found, key=lambda m: m.version)


def apply_migrations(
    conninfo: str,
    *,
    embedding_dimensions: int,
    connect_timeout_s: int = 10,
    login_role: tuple[str, str] | None = None,
) -> list[str]:
    """Apply pending migrations, then ensure ``login_role`` ((username, password)) when given;
    returns the names applied (empty when up to date)."""
    applied: list[str] = []
    with psycopg.connect(
        conninfo, autocommit=True, prepare_threshold=None, connect_timeout=connect_timeout_s
    ) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            for notice in pgvector.probe(conn).check():
                _log.warning("engram migrate: %s", notice)
            conn.execute(_TRACKING)
            done = {row[0] for row in conn.execute("SELECT version FROM engram_migrations")}
            pending = [m for m in load_migrations() if m.version not in done]
            with conn.transaction():  # the whole run or nothing (see the module docstring)
                for migration in pending:
                    step = PYTHON_STEPS.get(migration.version)
                    if step is not None:
                        step(conn)
                    conn.execute(migration.render(embedding_dimensions).encode())
                    conn.execute(
                        "INSERT INTO engram_migrations (version, name, checksum, parameters) "
                        "VALUES (%s, %s, %s, jsonb_build_object('embedding_dimensions', %s::int))",
                        (
                            migration.version,
                            migration.name,
                            migration.checksum,
                            embedding_dimensions,
                        ),
                    )
            applied = [f"{m.version:04d}_{m.name}" for m in pending]
            if login_role is not None:
                ensure_login_role(conn, *login_role)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return applied


FIRST_DELAY_S = 1.0
MAX_DELAY_S = 20.0


@dataclass(frozen=True)
class Migrated:
    applied: list[str]
    attempts: int


def target_of(conninfo: str) -> str:
    """``host:port/database`` of a URL, without credentials (for logs)."""
    parts = urlsplit(conninfo)
    return f"{parts.hostname or 'local socket'}:{parts.port or 5432}{parts.path or '/'}"


def apply_migrations_retrying(
    conninfo: str | Callable[[], str],
    *,
    embedding_dimensions: int,
    wait_s: float,
    connect_timeout_s: int = 10,
    login_role: tuple[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Migrated:
    """:func:`apply_migrations`, retried with backoff (1 s, 2 s, 4 s, … at most 20 s) on
    connection failures until ``wait_s`` seconds have passed; the last failure is raised.

    ``conninfo`` may be a function, called for every attempt (credentials that rotate)."""
    deadline = monotonic() + wait_s
    delay = FIRST_DELAY_S
    attempt = 0
    while True:
        attempt += 1
        url = conninfo() if callable(conninfo) else conninfo
        left = deadline - monotonic()
        try:
            applied = apply_migrations(
                url,
                embedding_dimensions=embedding_dimensions,
                connect_timeout_s=max(1, min(connect_timeout_s, int(left))),
                login_role=login_role,
            )
        except psycopg.OperationalError as exc:
            left = deadline - monotonic()
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if left < delay:
                _log.error(
                    "engram migrate: %s still unreachable after %d attempts: %s",
                    target_of(url),
                    attempt,
                    reason,
                )
                raise
            _log.warning(
                "engram migrate: waiting for %s (attempt %d failed: %s); retrying in %.0f s, "
                "%.0f s left",
                target_of(url),
                attempt,
                reason,
                delay,
                left,
            )
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
            continue
        return Migrated(applied, attempt)


def app_login(settings: Settings, secrets: SecretsClient | None = None) -> tuple[str, str] | None:
    """(username, password) of ``Settings.database_app_secret_arn`` (read with ``secrets``, else
    a client of the settings' region); None without it."""
    if not settings.database_app_secret_arn:
        return None
    from engram.adapters.secrets import read_login, secrets_client

    arn = settings.database_app_secret_arn
    username, password = read_login(arn, secrets or secrets_client(settings.aws_region))
    if not username:
        raise ValueError("ENGRAM_DATABASE_APP_SECRET_ARN: the secret names no username")
    return username, password


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram migrate", description=__doc__)
    parser.add_argument(
        "--database-url",
        help="default: ENGRAM_DATABASE_URL, else the embedded PostgreSQL `engram serve` uses "
        "(under ENGRAM_DATA_DIR)",
    )
    parser.add_argument("--embedding-dimensions", type=int, default=None)
    parser.add_argument(
        "--wait-seconds",
        type=float,
        default=0,
        help="keep retrying an unreachable server for this long (default: one attempt)",
    )
    args = parser.parse_args(argv)
    settings: Settings = get_settings()
    if args.database_url:
        url = args.database_url
    else:
        # the very database `engram serve` uses: ENGRAM_DATABASE_URL, else the embedded one
        from engram.adapters.embedded import database_url

        url = database_url(settings)
    dims = args.embedding_dimensions or settings.embedding_dimensions
    try:
        applied = apply_migrations_retrying(
            url,
            embedding_dimensions=dims,
            wait_s=args.wait_seconds,
            connect_timeout_s=settings.database_connect_timeout_s,
            login_role=app_login(settings),
        ).applied
    except psycopg.Error as exc:
        print(f"engram migrate: failed: {exc}", file=sys.stderr)
        return 1
    print("applied: " + ", ".join(applied) if applied else "up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
