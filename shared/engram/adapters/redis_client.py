"""The Redis client factory: timeouts and retries that fit a 500 ms budget, TLS and auth.

redis-py 8 defaults to multi-second timeouts and several retries; a session start that waits
on Redis must give up fast and degrade instead. Nothing connects until the first command.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from engram.settings import Settings

LOCAL_DEFAULT_URL = "redis://127.0.0.1:6379/0"
HEALTH_CHECK_INTERVAL_S = 30
RETRIES = 1  # one quick retry (a dropped idle connection), never a retry storm
BACKOFF_BASE_S = 0.005
BACKOFF_CAP_S = 0.02


def redis_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``redis.Redis`` / ``ConnectionPool.from_url``."""
    url = settings.redis_url or LOCAL_DEFAULT_URL
    opts: dict[str, Any] = {
        "socket_timeout": settings.redis_socket_timeout_ms / 1000,
        "socket_connect_timeout": settings.redis_connect_timeout_ms / 1000,
        "socket_keepalive": True,
        "retry": Retry(ExponentialBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S), RETRIES),
        "retry_on_timeout": False,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        "max_connections": settings.redis_max_connections,
        "client_name": settings.service_name,
    }
    if settings.redis_username:
        opts["username"] = settings.redis_username
    if settings.redis_password is not None:
        opts["password"] = settings.redis_password.get_secret_value()
    if settings.redis_tls and url.startswith("redis://"):
        opts["connection_class"] = redis.SSLConnection
        opts["ssl_cert_reqs"] = "required"
    return opts


def make_redis(settings: Settings) -> redis.Redis:
    """A client for ``settings.redis_url`` (rediss:// or ``redis_tls`` for ElastiCache).

    The pool connects lazily on the first command; hiredis parses replies when installed.
    """
    url = settings.redis_url or LOCAL_DEFAULT_URL
    opts = redis_options(settings)
    pool = redis.ConnectionPool.from_url(url, **opts)
    return redis.Redis(connection_pool=pool)
