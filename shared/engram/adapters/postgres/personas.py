"""``PostgresPersonaStore``: the ``PersonaStore`` half of the PostgreSQL adapter (tables
``personas`` and ``team_settings``, row-level security as in migration 0001), and the
connection and clock both halves share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row

from engram.adapters.postgres.outbox import append_team_settings_changed
from engram.adapters.postgres.pool import Database
from engram.clock import Clock, SystemClock
from engram.memories.models import ExtractionSettings, Persona, RetentionRules, TeamSettings
from engram.memories.ports import AccessContext


def _persona(r: dict[str, Any]) -> Persona:
    return Persona(
        persona_id=r["persona_id"],
        team_id=r["team_id"],
        allowed_groups=list(r["allowed_groups"]),
        memory_enabled=r["memory_enabled"],
        extraction=ExtractionSettings(
            enabled=r["extraction_enabled"], prompt=r["extraction_prompt"]
        ),
        retention=RetentionRules(
            archive_after_days=r["archive_after_days"],
            delete_archived_after_days=r["delete_archived_after_days"],
        ),
        updated_at=r["updated_at"],
    )


class PostgresPersonaStore:
    def __init__(self, db: Database, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock or SystemClock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)

    # --- PersonaStore -----------------------------------------------------------------------
    def get_persona(self, ctx: AccessContext, persona_id: str) -> Persona | None:
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT * FROM personas WHERE team_id = %s AND persona_id = %s",
                (ctx.team_id, persona_id),
            )
            r = cur.fetchone()
        return None if r is None else _persona(r)

    def list_personas(self, ctx: AccessContext) -> list[Persona]:
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                'SELECT * FROM personas WHERE team_id = %s ORDER BY persona_id COLLATE "C"',
                (ctx.team_id,),
            )
            return [_persona(r) for r in cur.fetchall()]

    def put_persona(self, ctx: AccessContext, persona: Persona) -> Persona:
        now = self._now()
        with self._db.tenant(ctx) as conn:
            conn.execute(
                "INSERT INTO personas (team_id, persona_id, allowed_groups, memory_enabled,"
                " extraction_enabled, extraction_prompt, archive_after_days,"
                " delete_archived_after_days, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (team_id, persona_id) DO UPDATE"
                " SET allowed_groups = EXCLUDED.allowed_groups,"
                " memory_enabled = EXCLUDED.memory_enabled,"
                " extraction_enabled = EXCLUDED.extraction_enabled,"
                " extraction_prompt = EXCLUDED.extraction_prompt,"
                " archive_after_days = EXCLUDED.archive_after_days,"
                " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                " updated_at = EXCLUDED.updated_at",
                (
                    persona.team_id,
                    persona.persona_id,
                    list(persona.allowed_groups),
                    persona.memory_enabled,
                    persona.extraction.enabled,
                    persona.extraction.prompt,
                    persona.retention.archive_after_days,
                    persona.retention.delete_archived_after_days,
                    now,
                ),
            )
        return persona.model_copy(update={"updated_at": now})

    def get_team_settings(self, ctx: AccessContext) -> TeamSettings | None:
        with self._db.tenant(ctx) as conn:
            r = conn.execute(
                "SELECT memory_enabled, updated_at, archive_after_days, delete_archived_after_days"
                " FROM team_settings WHERE team_id = %s",
                (ctx.team_id,),
            ).fetchone()
        if r is None:
            return None
        return TeamSettings(
            team_id=ctx.team_id,
            memory_enabled=r[0],
            updated_at=r[1],
            retention=RetentionRules(archive_after_days=r[2], delete_archived_after_days=r[3]),
        )

    def put_team_settings(self, ctx: AccessContext, settings: TeamSettings) -> TeamSettings:
        now = self._now()
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "INSERT INTO team_settings (team_id, memory_enabled, archive_after_days,"
                " delete_archived_after_days, updated_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (team_id) DO UPDATE"
                " SET memory_enabled = EXCLUDED.memory_enabled,"
                " archive_after_days = EXCLUDED.archive_after_days,"
                " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                " updated_at = EXCLUDED.updated_at",
                (
                    settings.team_id,
                    settings.memory_enabled,
                    settings.retention.archive_after_days,
                    settings.retention.delete_archived_after_days,
                    now,
                ),
            )
            append_team_settings_changed(cur, ctx, settings, now)
        return settings.model_copy(update={"updated_at": now})
