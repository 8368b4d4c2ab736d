"""Settings of a deployment whose Redis and PostgreSQL cannot be reached (a blackholed
address): a test that builds a container from them proves no part connects until used."""

from __future__ import annotations

from engram.settings import Settings

UNREACHABLE = Settings(
    redis_url="redis://10.255.255.1:6379/0",
    database_url="postgresql://u:p@10.255.255.1:5432/engram",
)

#: The verified claims of a user of team ``acme`` (as API Gateway's JWT authorizer puts them).
CLAIMS = {"sub": "alice", "custom:team": "acme", "scope": "engram/user"}
