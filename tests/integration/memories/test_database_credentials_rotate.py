"""The service's database login role: created by the migration from its own secret, under
row-level security by itself, and a warm pool that recovers when its password rotates.

Real embedded PostgreSQL, with the role made to log in by password (SCRAM) as on RDS, and the
secret in moto's Secrets Manager.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from tests.support.aws import CountingSecrets, fake_secrets
from tests.support.services import EmbeddedPostgres

from engram.adapters.postgres.login_role import ensure_login_role, scram_verifier
from engram.adapters.postgres.migrate import app_login, apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.adapters.secrets import DatabaseLogin, Secret
from engram.clock import FakeClock
from engram.identity import Caller
from engram.memories.commands import SaveMemory
from engram.memories.ports import AccessContext
from engram.memories.service import MemoryService
from engram.settings import Settings

ALICE = Caller(user_id="alice", team_id="acme")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingSecrets]:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    with fake_secrets() as client:
        yield client


@pytest.fixture
def role(postgres: EmbeddedPostgres) -> Iterator[str]:
    """A login role name of this test (roles are cluster-wide), made to need its password."""
    name = f"engram_svc_{uuid.uuid4().hex[:8]}"
    postgres.require_password(name)
    yield name
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
        )
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def as_role(url: str, role: str, password: str) -> str:
    return make_conninfo(url, user=role, password=password)


def refused(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        return "password authentication failed" in str(exc)
    return False


def eventually_refused(url: str) -> None:
    """pg_hba.conf is read again by the server's postmaster shortly after the reload."""
    deadline = time.monotonic() + 5
    while not refused(url):
        assert time.monotonic() < deadline, "the server never asked for a password"
        time.sleep(0.05)


def test_the_migration_creates_the_login_role_from_its_secret(
    database_url: str, role: str, secrets: CountingSecrets
) -> None:
    arn = secrets.create_login("engram/test/app", role, "first-password")
    login = app_login(Settings(database_app_secret_arn=arn))
    assert login == (role, "first-password")
    apply_migrations(database_url, embedding_dimensions=64, login_role=login)
    eventually_refused(as_role(database_url, role, "wrong"))
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolinherit, "
            "pg_has_role(rolname, 'engram_app', 'MEMBER'), rolpassword "
            "FROM pg_authid WHERE rolname = %s",
            (role,),
        ).fetchone()
        owned = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles "
            "WHERE rolname = %s)",
            (role,),
        ).fetchone()
    assert row is not None
    assert row[:6] == (True, False, False, False, True, True)
    assert str(row[6]).startswith("SCRAM-SHA-256$4096:")  # never stored (or sent) in clear
    assert owned == (0,)

    # row-level security does not rest on the code setting a role: logged in as the role,
    # with no tenant, nothing is visible, nothing can be written
    db = Database(as_role(database_url, role, "first-password"), max_size=1)
    store = PostgresMemoryStore(db, FakeClock())
    MemoryService(store, settings=Settings(), clock=FakeClock()).save(
        ALICE, SaveMemory(key="editor", value="helix")
    )
    db.close()
    with psycopg.connect(as_role(database_url, role, "first-password")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM engram_migrations")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (1,)

    # a second run (every deploy) updates the role to what the secret holds now
    secrets.put_secret_value(
        SecretId=arn, SecretString=f'{{"username": "{role}", "password": "second-password"}}'
    )
    apply_migrations(
        database_url,
        embedding_dimensions=64,
        login_role=app_login(Settings(database_app_secret_arn=arn)),
    )
    assert refused(as_role(database_url, role, "first-password"))
    assert not refused(as_role(database_url, role, "second-password"))


def test_a_warm_pool_recovers_when_the_password_rotates(
    database_url: str, role: str, secrets: CountingSecrets
) -> None:
    arn = secrets.create_login("engram/test/rotating", role, "before")
    apply_migrations(database_url, embedding_dimensions=64, login_role=(role, "before"))
    eventually_refused(as_role(database_url, role, "wrong"))
    login = DatabaseLogin(database_url, Secret(arn, secrets, max_age_s=3600))
    db = Database(login.conninfo, refreshed=login.refreshed, max_size=2, connect_timeout_s=3)
    store = PostgresMemoryStore(db, FakeClock())
    service = MemoryService(store, settings=Settings(), clock=FakeClock())
    saved, _ = service.save(ALICE, SaveMemory(key="editor", value="helix"))  # warm
    assert secrets.reads == 1

    # the rotation: the role's password changes and the secret holds the new one
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(scram_verifier("after"))
            )
        )
    secrets.put_secret_value(
        SecretId=arn, SecretString=f'{{"username": "{role}", "password": "after"}}'
    )
    assert refused(as_role(database_url, role, "before"))

    # the open connection stays logged in; the pool's next new connection is first refused
    # (the cached password), reads the secret again and logs in with the new one
    held = threading.Event()
    release = threading.Event()

    def hold_the_warm_connection() -> None:
        with db.tenant(AccessContext(team_id="acme", user_id="alice")) as conn:
            conn.execute("SELECT 1")
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_warm_connection)
    holder.start()
    assert held.wait(10)
    try:
        recalled = service.get(ALICE, saved.id)  # needs a second connection, opened now
    finally:
        release.set()
        holder.join(10)
    assert recalled.value == "helix"
    assert secrets.reads == 2  # read again once, because the login was refused
    db.close()


def test_the_login_role_is_never_the_rls_role_or_a_superuser(
    database_url: str, postgres: EmbeddedPostgres
) -> None:
    apply_migrations(database_url, embedding_dimensions=64)
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(ValueError, match="cannot be"):
            ensure_login_role(conn, "engram_app", "x")
        with pytest.raises(ValueError, match="superuser"):
            ensure_login_role(conn, "postgres", "x")
