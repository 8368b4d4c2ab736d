# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""A save's write (``PostgresTx.save``) in one statement: the key's row and its event.

A key has one row, however it is spelt (``memories_key``, migration 0018): the statement
writes a new key's row or updates the key's row, and appends ``memory.saved`` or
``memory.updated`` in the same statement (``outbox.SAVED_EVENT_CTES``). It writes nothing
over a rejected row, which the save's rules then delete (``engram.memories.writes.save``)
before it runs again, nor over a row that already holds the value: the common case is one
statement, without first looking for a rejected row that is almost never there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.adapters.postgres.lifecycle import ON_KEY
from engram.adapters.postgres.outbox import SAVED_EVENT_CTES, saved_event_params
from engram.adapters.postgres.rows import COLUMNS
from engram.memories.models import NewMemory

#: a new row of a key (with ``ON CONFLICT`` and ``RETURNING`` to follow)
INSERT_ROW = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, key_canonical,"
    " value, source_channel_id, source_user_id, confidence, status, embedding,"
    " embedding_model, embedding_dims, created_at, updated_at) VALUES (%(id)s, %(team)s,"
    " %(scope)s, %(owner)s, %(user)s, %(key)s, %(canonical)s, %(value)s, %(channel)s,"
    " %(source)s, %(confidence)s, %(status)s, %(embedding)s::vector, %(embedding_model)s,"
    " %(embedding_dims)s, %(now)s, %(now)s)"
)
#: a save's row: a new key's, or the key's one row (however spelt) updated; the key stays as
#: first written
_UPSERT = (
    f"{INSERT_ROW} {ON_KEY} DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,"
    " status = EXCLUDED.status, source_channel_id = EXCLUDED.source_channel_id,"
    " source_user_id = EXCLUDED.source_user_id, embedding = EXCLUDED.embedding,"
    " embedding_model = EXCLUDED.embedding_model,"
    " embedding_dims = EXCLUDED.embedding_dims,"
    " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
)
_RETURNING = f" RETURNING {COLUMNS}, (xmax = 0) AS created"


def _saving(guard: str) -> str:
    """The save and its event in one statement: the saved row, with ``created``."""
    return f"WITH saved AS ({_UPSERT}{guard}{_RETURNING}), {SAVED_EVENT_CTES} SELECT * FROM saved"


#: the save and its event, writing nothing when the key's row is a rejected proposal or
#: already holds the value and status (no new version)
SAVE_UNLESS_REJECTED_SQL = _saving(
    " WHERE m.status <> 'rejected'"
    " AND (m.value, m.status) IS DISTINCT FROM (EXCLUDED.value, EXCLUDED.status)"
)


def save_params(values: dict[str, Any], memory: NewMemory, *, actor_id: str) -> dict[str, Any]:
    """The statement's parameters: the row's ``values`` and its event's."""
    at: datetime = values["now"]
    return values | saved_event_params(memory, actor_id=actor_id, cause="api", at=at)
