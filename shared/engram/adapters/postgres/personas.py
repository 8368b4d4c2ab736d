"""Personas and team settings on PostgreSQL (tables ``personas`` and ``team_settings``,
row-level security as in migration 0001): the statements a unit of work
(``engram.adapters.postgres.tx``) runs on its cursor."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres.outbox import append_team_settings_changed
from engram.memories.models import ExtractionSettings, Persona, RetentionRules, TeamSettings
from engram.memories.ports import AccessContext, Switches


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


#: the team's settings and one persona's in one statement (either may be missing)
_SWITCHES_SQL = (
    "SELECT t.memory_enabled AS team_enabled, t.updated_at AS team_updated_at,"
    " t.archive_after_days AS team_archive, t.delete_archived_after_days AS team_delete,"
    " p.* FROM (SELECT 1) one"
    " LEFT JOIN team_settings t ON t.team_id = %(team)s"
    " LEFT JOIN personas p ON p.team_id = %(team)s AND p.persona_id = %(persona)s"
)


def read_switches(cur: Cursor[Any], team_id: str, persona_id: str | None) -> Switches:
    cur.execute(_SWITCHES_SQL, {"team": team_id, "persona": persona_id})
    r = cur.fetchone()
    assert r is not None
    team = None
    if r["team_enabled"] is not None:
        team = TeamSettings(
            team_id=team_id,
            memory_enabled=r["team_enabled"],
            updated_at=r["team_updated_at"],
            retention=RetentionRules(
                archive_after_days=r["team_archive"],
                delete_archived_after_days=r["team_delete"],
            ),
        )
    return Switches(team=team, persona=None if r["persona_id"] is None else _persona(r))


def list_personas(cur: Cursor[Any], team_id: str) -> list[Persona]:
    cur.execute(
        'SELECT * FROM personas WHERE team_id = %s ORDER BY persona_id COLLATE "C"', (team_id,)
    )
    return [_persona(r) for r in cur.fetchall()]


def put_persona(cur: Cursor[Any], persona: Persona, now: datetime) -> Persona:
    cur.execute(
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


def put_team_settings(
    cur: Cursor[Any], ctx: AccessContext, settings: TeamSettings, now: datetime
) -> TeamSettings:
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
