"""Who a store call acts for: the tenant and the rows it may see.

Its own module, below the lifecycle rules and the store's port that both take it
(``engram.memories.ports`` re-exports it for the stores' callers).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AccessContext:
    """The tenant a store call acts in; the PostgreSQL adapter turns it into RLS settings.

    ``elevated`` is true for admins of the team and for the service's own jobs; it lets the
    call see (and write) every row of ``team_id``. Without it a call sees its own user and
    persona_user rows and the team's persona rows, and writes only its own rows.
    """

    team_id: str
    user_id: str
    elevated: bool = False
    #: where the request came from (``api``, ``mcp``, ``console``, ``tool:<format>``; the
    #: service's own jobs: ``extraction``, ``maintenance``): what its writes' versions say
    surface: str = "api"
