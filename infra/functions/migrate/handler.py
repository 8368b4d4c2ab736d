"""Deploy-time migration: a CDK trigger invokes this once per deployment of a changed bundle.

It runs the same code as ``engram migrate`` (``engram.adapters.postgres.migrate.main``) against
the database reached through the RDS Proxy (ENGRAM_DATABASE_URL + ENGRAM_DATABASE_SECRET_ARN).
Migrations are forward-only and serialised by an advisory lock, so a re-run is harmless.
Raising fails the trigger, which fails (and rolls back) the deployment.
"""

from __future__ import annotations

import importlib
from typing import Any


class MigrationFailed(RuntimeError):
    """``engram migrate`` returned a non-zero exit code."""


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    migrate = importlib.import_module("engram.adapters.postgres.migrate")
    code: int = migrate.main([])
    if code != 0:
        raise MigrationFailed(f"engram migrate exited with {code}")
    return {"status": "migrated"}
