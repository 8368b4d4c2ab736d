"""The Redis client factory: standalone or cluster, timeouts and retries that fit a 500 ms
budget, TLS, and credentials that rotate.

redis-py 8 defaults to multi-second timeouts and several retries; a session start that waits
on Redis must give up fast and degrade instead. Nothing connects until the first command.

- ``ENGRAM_REDIS_CLUSTER``: a ``redis.cluster.RedisCluster`` (ElastiCache Serverless speaks
  cluster mode only). It reads the slot map when it is built, so it is built on first use
  (``LazyRedisCluster``): a cache down at cold start fails the first command, which the
  callers degrade on, not the container.
- ``ENGRAM_REDIS_SECRET_ARN``: the username and password come from that secret
  (``engram.adapters.secrets.Secret``, cached) through a ``CredentialProvider`` consulted on
  every new connection; a refused login (``WRONGPASS``) reads the secret again before the
  error propagates, so the client's one retry logs in with the rotated password and warm
  containers carry on. Otherwise ``ENGRAM_REDIS_USERNAME``/``PASSWORD`` or the URL's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeAlias, cast

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.credentials import CredentialProvider
from redis.exceptions import AuthenticationError, RedisClusterException
from redis.retry import Retry

from engram.adapters.lazy import Lazy
from engram.adapters.secrets import Secret, SecretsClient, secrets_client
from engram.settings import Settings

LOCAL_DEFAULT_URL = "redis://127.0.0.1:6379/0"
HEALTH_CHECK_INTERVAL_S = 30
RETRIES = 1  # one quick retry (a dropped idle connection, a rotated password), never a storm
BACKOFF_BASE_S = 0.005
BACKOFF_CAP_S = 0.02

RedisClient: TypeAlias = "redis.Redis | RedisCluster"
"""What the Redis adapters take: a standalone or a cluster client (``LazyRedisCluster`` passes
for a ``RedisCluster``)."""
_log = logging.getLogger("engram.adapters.redis_client")


class SecretCredentials(CredentialProvider):
    """The login of a Secrets Manager secret, for every new connection (cached by the secret);
    ``refresh()`` reads the secret again after the server refused it."""

    def __init__(self, secret: Secret) -> None:
        self.secret = secret

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        username, password = self.secret.login()
        return (username, password) if username else (password,)

    def refresh(self) -> None:
        self.secret.refresh()
        _log.info("Redis refused the login: read secret %s again", self.secret.secret_id)


class _RefreshOnRefusedLogin:
    """A refused login makes the credential provider read its secret again before the error
    propagates; the retry that follows (the client's) logs in with what it read."""

    credential_provider: CredentialProvider | None

    def on_connect_check_health(self, check_health: bool = True) -> None:
        try:
            super().on_connect_check_health(check_health)  # type: ignore[misc]
        except AuthenticationError:
            refresh: Callable[[], None] | None = getattr(self.credential_provider, "refresh", None)
            if refresh is not None:
                try:
                    refresh()
                except Exception:
                    _log.warning("reading the Redis secret again failed", exc_info=True)
            raise


class Connection(_RefreshOnRefusedLogin, redis.Connection):
    """A TCP connection that re-reads rotated credentials."""


class SSLConnection(_RefreshOnRefusedLogin, redis.SSLConnection):
    """A TLS connection (certificate and host name verified) that re-reads rotated
    credentials."""


class UnixConnection(_RefreshOnRefusedLogin, redis.UnixDomainSocketConnection):
    """A unix-socket connection that re-reads rotated credentials."""


def redis_options(settings: Settings, *, secrets: SecretsClient | None = None) -> dict[str, Any]:
    """Keyword arguments for ``redis.ConnectionPool`` / ``RedisCluster`` (host, port, db from
    the URL; ``retry`` separate: a cluster takes it as its own argument)."""
    url = settings.redis_url or LOCAL_DEFAULT_URL
    opts: dict[str, Any] = dict(parse_url(url))  # type: ignore[no-untyped-call]
    given = opts.pop("connection_class", None)
    if given is redis.UnixDomainSocketConnection:
        connection_class: type[redis.Connection] | type[UnixConnection] = UnixConnection
    else:
        tls = settings.redis_tls or given is redis.SSLConnection
        connection_class = SSLConnection if tls else Connection
    opts.update(
        {
            "connection_class": connection_class,
            "socket_timeout": settings.redis_socket_timeout_ms / 1000,
            "socket_connect_timeout": settings.redis_connect_timeout_ms / 1000,
            "socket_keepalive": True,
            "retry_on_timeout": False,
            "health_check_interval": HEALTH_CHECK_INTERVAL_S,
            "max_connections": settings.redis_max_connections,
            "client_name": settings.service_name,
        }
    )
    if settings.redis_secret_arn:
        client = secrets or secrets_client(settings.aws_region)
        secret = Secret(settings.redis_secret_arn, client, max_age_s=settings.secret_max_age_s)
        opts.pop("username", None)
        opts.pop("password", None)
        opts["credential_provider"] = SecretCredentials(secret)
    else:
        if settings.redis_username:
            opts["username"] = settings.redis_username
        if settings.redis_password is not None:
            opts["password"] = settings.redis_password.get_secret_value()
    return opts


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # an IPv6 literal in a URL


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S), RETRIES)


class LazyRedisCluster:
    """A ``RedisCluster`` built on first use, then every attribute is the cluster client's.

    Building one reads the slot map from the cluster; a cluster that cannot be reached then
    surfaces as ``redis.ConnectionError`` on that use (and the next use tries again), like any
    other connection failure.
    """

    def __init__(self, factory: Callable[[], RedisCluster]) -> None:
        def connect() -> RedisCluster:
            try:
                return factory()
            except RedisClusterException as exc:
                raise redis.ConnectionError(f"Redis Cluster unreachable: {exc}") from exc

        self._client = Lazy(connect)

    @property
    def cluster(self) -> RedisCluster:
        return self._client.get()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def close(self) -> None:
        if (cluster := self._client.made) is not None:
            cluster.close()


def is_cluster(client: object) -> bool:
    """Whether ``client`` speaks the cluster protocol (keys of one command share a slot)."""
    return isinstance(client, RedisCluster | LazyRedisCluster)


def make_redis(settings: Settings, *, secrets: SecretsClient | None = None) -> RedisClient:
    """A client for ``settings.redis_url`` (rediss:// or ``redis_tls`` for ElastiCache): a
    ``RedisCluster`` when ``settings.redis_cluster``, else a ``redis.Redis`` whose pool
    connects on the first command; hiredis parses replies when installed."""
    opts = redis_options(settings, secrets=secrets)
    if settings.redis_cluster:
        if opts.pop("db", 0):
            raise ValueError("ENGRAM_REDIS_URL: a Redis Cluster has only database 0")
        for name in ("health_check_interval", "retry_on_timeout"):  # not cluster options
            opts.pop(name, None)
        # the seed node as a plain URL: RedisCluster then builds each node's pool with our
        # connection class (TLS and credential refresh included) instead of its own
        seed = f"redis://{_host(opts.pop('host'))}:{opts.pop('port', 6379)}"
        lazy = LazyRedisCluster(lambda: RedisCluster(url=seed, retry=_retry(), **opts))
        return cast(RedisCluster, lazy)
    pool = redis.ConnectionPool(retry=_retry(), **opts)
    return redis.Redis(connection_pool=pool)
