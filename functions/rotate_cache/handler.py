"""The cache secret rotation function: Secrets Manager invokes it four times per rotation of
the cache secret (``{"Step": "createSecret" | "setSecret" | "testSecret" | "finishSecret",
"SecretId": ..., "ClientRequestToken": ...}``); each step is
``engram.adapters.cache_rotation.CacheSecretRotation.run`` on the container's rotation
(``ENGRAM_REDIS_SECRET_ARN``'s user ``ENGRAM_REDIS_USER_ID``, tested against
``ENGRAM_REDIS_URL``). A step that raises fails the rotation, and Secrets Manager retries it.
"""

from __future__ import annotations

from typing import Any

from engram.adapters.observability import instrument, logger
from engram.bootstrap import get_container

#: JMESPath of the correlation id: the rotation's version token (not a secret).
TOKEN = "ClientRequestToken"  # noqa: S105


@instrument(correlation_id_path=TOKEN)
def handler(event: dict[str, Any], context: Any) -> dict[str, str]:
    step = str(event["Step"])
    get_container().cache_rotation.run(step, str(event["SecretId"]), str(event[TOKEN]))
    logger().info("cache secret rotation step done", extra={"step": step})
    return {"step": step, "status": "done"}
