"""Migrations and the SECURITY DEFINER functions under a migrating role that is NOT a
superuser, as on Aurora / RDS.

The tests elsewhere migrate as the superuser ``postgres``, which bypasses row-level security
everywhere, so they cannot see what happens on RDS: there the master user (``rds_superuser``,
not a superuser) owns the tables and the ``SECURITY DEFINER`` functions, and a table with
``FORCE ROW LEVEL SECURITY`` applies its policies to that owner too — inside the definer
functions the maintenance job calls with no tenant set, which then see no row at all.

Here a role ``engram_migrator`` (LOGIN CREATEROLE, no superuser) gets what matters of RDS's
master user: it owns the database (so schema ``public``, owned by ``pg_database_owner``, is
its own) and may create in it; ``vector`` is created beforehand by the superuser, as
``rds_superuser`` may on RDS. It runs `engram migrate`, and the service then goes through
every definer function: the recall's full-text match, the retention policies across teams,
the erasure log's pending purges. All of it on PostgreSQL 18 and on 16.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from tests.support import memory_rows

from engram.adapters.postgres import migrate
from engram.adapters.postgres.erasures import PostgresErasureLog
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.retention import PostgresRetentionPolicies
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.api.memory_inputs import (
    PersonaRequest,
    TeamSettingsRequest,
)
from engram.clock import MS_PER_DAY, FakeClock
from engram.identity import Caller
from engram.maintenance.models import ErasureRecord, RetentionPolicy
from engram.memories.commands import Recall, SaveMemory
from engram.memories.ports import AccessContext
from engram.memories.service import MemoryService
from engram.settings import Settings

MIGRATOR = "engram_migrator"
T0 = 1_767_225_600_000
ALICE = Caller(user_id="alice", team_id="acme")
BOSS = Caller(user_id="boss", team_id="acme", is_team_admin=True)
OTHER_BOSS = Caller(user_id="boss", team_id="globex", is_team_admin=True)


@dataclass
class AsMigrator:
    url: str  # connects as MIGRATOR
    superuser_url: str
    db: Database
    clock: FakeClock
    service: MemoryService


def _as_rds_master_user(superuser_url: str) -> None:
    """What RDS gives its master user, done by the superuser (roles are cluster-wide, so
    this is idempotent across tests)."""
    dbname = conninfo_to_dict(superuser_url)["dbname"]
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (MIGRATOR,))
        if exists.fetchone() is None:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN CREATEROLE NOSUPERUSER").format(
                    sql.Identifier(MIGRATOR)
                )
            )
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # rds_superuser may
        for stmt in (
            "ALTER DATABASE {db} OWNER TO {role}",
            "GRANT CREATE, CONNECT, TEMPORARY ON DATABASE {db} TO {role}",
        ):
            conn.execute(
                sql.SQL(stmt).format(db=sql.Identifier(dbname), role=sql.Identifier(MIGRATOR))
            )
        # engram_app is created by the first migration; in a fresh cluster the migrator
        # creates it and so administers it. Other tests of this cluster may have created it
        # as the superuser first: hand the migrator the same admin option it would have.
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'engram_app'").fetchone():
            conn.execute(
                sql.SQL("GRANT engram_app TO {} WITH ADMIN OPTION").format(sql.Identifier(MIGRATOR))
            )


@pytest.fixture
def as_migrator(each_database_url: str) -> Iterator[AsMigrator]:
    """On each embedded PostgreSQL version (Aurora runs 16)."""
    database_url = each_database_url
    _as_rds_master_user(database_url)
    url = make_conninfo(database_url, user=MIGRATOR)
    assert migrate.main(["--database-url", url, "--embedding-dimensions", "64"]) == 0
    clock = FakeClock(T0)
    db = Database(url, max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    store = PostgresMemoryStore(db, clock)
    service = MemoryService(store, settings=Settings(), clock=clock)
    try:
        yield AsMigrator(url, database_url, db, clock, service)
    finally:
        db.close()


def test_the_migrating_role_is_not_a_superuser_and_owns_what_it_migrated(
    as_migrator: AsMigrator,
) -> None:
    with psycopg.connect(as_migrator.url) as conn:
        row = conn.execute(
            "SELECT r.rolsuper, r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user"
        ).fetchone()
        assert row == (False, False)
        owners = conn.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
        assert owners == [(MIGRATOR,)]
        definers = conn.execute(
            "SELECT DISTINCT pg_get_userbyid(proowner) FROM pg_proc "
            "WHERE prosecdef AND proname LIKE 'engram\\_%'"
        ).fetchall()
        assert definers == [(MIGRATOR,)]


def test_recall_full_text_match_works(as_migrator: AsMigrator) -> None:
    svc = as_migrator.service
    svc.save(ALICE, SaveMemory(key="editor", value="vim in the terminal"))
    svc.save(ALICE, SaveMemory(key="shell", value="zsh"))
    svc.save(ALICE, SaveMemory(key="tone", value="formal vim lover", persona_id="helpdesk"))
    assert [m.key for m in svc.recall(ALICE, Recall(query="terminal"))] == ["editor"]
    found = {m.key for m in svc.recall(ALICE, Recall(query="vim", persona_id="helpdesk"))}
    assert found == {"editor", "tone"}


def test_retention_policies_of_every_team_are_listed_and_applied(as_migrator: AsMigrator) -> None:
    svc = as_migrator.service
    svc.personas.put_team_settings(
        BOSS, TeamSettingsRequest(memory_enabled=True, retention={"archiveAfterDays": 10}).command()
    )
    svc.personas.put_persona(
        BOSS,
        PersonaRequest.model_validate({"retention": {"deleteArchivedAfterDays": 30}}).command(
            "helpdesk"
        ),
    )
    svc.personas.put_team_settings(
        OTHER_BOSS,
        TeamSettingsRequest(memory_enabled=True, retention={"archiveAfterDays": 5}).command(),
    )
    svc.save(ALICE, SaveMemory(key="editor", value="vim"))

    policies = PostgresRetentionPolicies(as_migrator.db).list_policies(after=None, limit=10)
    assert policies == [
        RetentionPolicy(team_id="acme", persona_id=None, archive_after_days=10),
        RetentionPolicy(team_id="acme", persona_id="helpdesk", delete_archived_after_days=30),
        RetentionPolicy(team_id="globex", persona_id=None, archive_after_days=5),
    ]
    done = svc.jobs.apply_retention(
        "acme", archive_after_days=10, delete_archived_after_days=None, now=T0 + 11 * MS_PER_DAY
    )
    assert done["archived"] == 1
    assert svc.recall(ALICE, Recall(query="")) == []


def test_pending_erasures_of_every_team_are_listed_and_marked_purged(
    as_migrator: AsMigrator,
) -> None:
    log = PostgresErasureLog(as_migrator.db, clock=as_migrator.clock)
    log.record("acme", "alice", T0)
    log.record("globex", "bob", T0 + 1)
    assert log.pending_purges(after=None, limit=10) == [
        ErasureRecord(team_id="acme", user_id="alice", erased_at_ms=T0),
        ErasureRecord(team_id="globex", user_id="bob", erased_at_ms=T0 + 1),
    ]
    log.mark_purged("acme", "alice", T0)
    assert [r.user_id for r in log.pending_purges(after=None, limit=10)] == ["bob"]


def test_the_application_role_is_still_confined_to_its_team(as_migrator: AsMigrator) -> None:
    svc = as_migrator.service
    svc.personas.put_persona(
        BOSS, PersonaRequest.model_validate({"allowedGroups": ["support"]}).command("helpdesk")
    )
    svc.personas.put_team_settings(BOSS, TeamSettingsRequest(memory_enabled=False).command())
    store = PostgresMemoryStore(as_migrator.db, as_migrator.clock)
    other = AccessContext(team_id="globex", user_id="boss", elevated=True)
    assert memory_rows.get_persona(store, other, "helpdesk") is None
    assert memory_rows.get_team_settings(store, other) is None
    with psycopg.connect(as_migrator.url, autocommit=True) as conn:
        conn.execute("SET ROLE engram_app")  # no tenant settings: no row of any table
        for table in (
            "personas",
            "team_settings",
            "memories",
            "erasures",
            "review_actions",
            "memory_suppressions",
            "memory_usage",
        ):
            count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
            assert count.fetchone() == (0,), table
