"""`engram serve` as a subprocess, driven over real HTTP (the e2e tier and bench_handlers).

One local service runs for the whole session (session fixture ``service``): a free loopback
port, a temporary ``ENGRAM_DATA_DIR`` (its embedded PostgreSQL and signing key live there),
``REDIS_URL`` pointing at a redis-server of the tier's own (a key prefix of its own, under the
ACL's) and the maintenance timer every second. Tests isolate themselves by using fresh user and
team ids (``service.tenant()``), never by resetting state, so they can run in any order.

``run_local_service`` is the context manager behind the ``service`` fixture (conftest.py).
Tokens are minted with the service's own signing key (``engram.local.tokens.TokenSigner`` on
the same data dir), exactly as ``engram token`` does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from tests.support.polling import eventually as poll
from tests.support.services import APP_PREFIX, free_port

from engram.client import EngramClient
from engram.local.tokens import TokenSigner
from engram.settings import Settings

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None], *, timeout_s: float = 45.0, every_s: float = 0.2
) -> T:
    """Poll ``probe`` a bounded number of times until it returns something truthy."""
    return poll(probe, timeout_s=timeout_s, every_s=every_s)


@dataclass(frozen=True)
class Tenant:
    """A fresh team with a few users; ids are unique per test so tests never meet."""

    team: str
    user: str
    other_user: str
    admin: str

    @property
    def identity(self) -> str:
        return f"{self.team}:{self.user}"


@dataclass
class LocalEngram:
    url: str
    data_dir: Path
    redis_url: str | None
    key_prefix: str
    settings: Settings
    proc: subprocess.Popen[bytes]
    log_path: Path
    redis_admin_url: str | None  # lists keys (the service's own user may not); None: in-process
    external_database_url: str | None = None
    signer: TokenSigner = field(init=False)
    _clients: list[EngramClient] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.signer = TokenSigner(
            self.data_dir, audience=self.settings.local_audience, settings=self.settings
        )

    # --- identities ----------------------------------------------------------------------
    def tenant(self) -> Tenant:
        tag = uuid.uuid4().hex[:10]
        return Tenant(team=f"t{tag}", user=f"u{tag}", other_user=f"o{tag}", admin=f"a{tag}")

    def token(self, user: str, team: str | None, **kwargs: Any) -> str:
        return self.signer.issue(user, team, **kwargs)

    def headers(self, token: str, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}", **extra}

    def client(
        self, token: str, *, act_as: str | None = None, transport: httpx.BaseTransport | None = None
    ) -> EngramClient:
        client = EngramClient(self.url, token, act_as=act_as, timeout=30.0, transport=transport)
        self._clients.append(client)
        return client

    def user_client(self, user: str, team: str, **kwargs: Any) -> EngramClient:
        return self.client(self.token(user, team, **kwargs))

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0)

    # --- the stores behind the service ---------------------------------------------------
    @property
    def database_url(self) -> str:
        """The service's database as a role row-level security does not filter: the one it
        was given, else its embedded PostgreSQL (``<data_dir>/pg``, database ``engram``) as
        the superuser over its unix socket."""
        if self.external_database_url is not None:
            return self.external_database_url
        return f"postgresql://postgres:@/engram?host={self.data_dir / 'pg'}"

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=10) as conn:
            return list(conn.execute(query, params).fetchall())

    def redis_keys(self, needle: str) -> list[str]:
        """Every key of this service's Redis database whose name contains ``needle``."""
        import redis

        assert self.redis_admin_url is not None, "this service runs on its in-process Redis"
        client = redis.Redis.from_url(self.redis_admin_url, socket_timeout=5)
        try:
            return sorted(
                k.decode("utf-8", "replace")
                for k in client.scan_iter(match=f"*{needle}*", count=1000)
            )
        finally:
            client.close()

    def redis_mentions(self, needle: str) -> list[str]:
        """Keys of this service's prefix whose name or any value (string, hash, list, set,
        sorted set, stream) contains ``needle``."""
        import redis
        from tests.support.leftovers import redis_keys_mentioning

        assert self.redis_admin_url is not None, "this service runs on its in-process Redis"
        client = redis.Redis.from_url(self.redis_admin_url, socket_timeout=5)
        try:
            return redis_keys_mentioning(client, needle, match=f"{self.key_prefix}*")
        finally:
            client.close()

    def postgres_mentions(self, needle: str, *, except_tables: tuple[str, ...] = ()) -> list[str]:
        """Tables of the public schema with a row whose text form contains ``needle``."""
        from tests.support.leftovers import postgres_rows_mentioning

        rows = postgres_rows_mentioning(self.database_url, needle, skip=except_tables)
        counts = Counter(table for table, _ in rows)
        return [f"{table}: {n} rows" for table, n in counts.items()]

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def close_clients(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close(timeout=2)
        self._clients.clear()


def pending_from_transcript(
    service: LocalEngram, tenant: Tenant, conversation: str, text: str, needle: str
) -> dict[str, Any]:
    """A ``pending_review`` memory made the way the service makes them: the user's transcript
    goes to the extraction queue (202); the maintenance job (on the local timer, every second
    here) runs the rule-based extractor and proposes it for review."""
    alice = service.user_client(tenant.user, tenant.team)
    queued = alice.send_transcript(conversation, [{"role": "user", "content": text}])
    assert queued.to_json() == {"queued": True, "conversationId": conversation, "messages": 1}
    admin = service.user_client(tenant.admin, tenant.team, admin=True)

    def probe() -> dict[str, Any] | None:
        found = [m for m in admin.review_queue() if needle in m["value"]]
        return found[0] if found else None

    return eventually(probe, timeout_s=60, every_s=0.5)


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"engram serve exited with {proc.returncode} before it was healthy:\n"
                + log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
            )
        with contextlib.suppress(httpx.HTTPError):
            response = httpx.get(f"{url}/v1/health", timeout=2.0)
            if response.status_code == 200 and response.json().get("status") == "ok":
                return
        time.sleep(0.2)
    raise RuntimeError(
        f"engram serve was not healthy within {START_TIMEOUT_S}s:\n"
        + log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
    )


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            return None
    return proc.returncode


@contextlib.contextmanager
def run_local_service(
    redis_base_url: str | None,
    *,
    redis_admin_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    database_url: str | None = None,
) -> Iterator[LocalEngram]:
    """``engram serve`` in a subprocess on a free port, on the (standalone) Redis at
    ``redis_base_url``; SIGTERM (drain) at the end. ``redis_admin_url`` lists its keys.

    ``redis_base_url`` None: the service's in-process Redis. ``database_url`` None: its own
    embedded PostgreSQL under the data dir; else that database (``ENGRAM_DATABASE_URL``)."""
    data_dir = Path(tempfile.mkdtemp(prefix="engram-e2e-"))
    port = free_port()
    key_prefix = f"{APP_PREFIX}:e2e{uuid.uuid4().hex[:8]}"
    redis_url = redis_base_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_") and k != "REDIS_URL"}
    env.update(
        {
            "ENGRAM_DATA_DIR": str(data_dir),
            "ENGRAM_PORT": str(port),
            "ENGRAM_HOST": "127.0.0.1",
            "ENGRAM_REDIS_KEY_PREFIX": key_prefix,
            "ENGRAM_MAINTENANCE_INTERVAL_S": "1",
            "ENGRAM_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "shared"), str(REPO), env.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    env.update(extra_env or {})
    env.pop("ENGRAM_DATABASE_URL", None)
    if database_url is not None:
        env["ENGRAM_DATABASE_URL"] = database_url
    log_path = data_dir / "serve.log"
    settings = Settings(data_dir=data_dir, redis_url=redis_url, redis_key_prefix=key_prefix)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "functions.local", "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    service = LocalEngram(
        url=url,
        data_dir=data_dir,
        redis_url=redis_url,
        key_prefix=key_prefix,
        settings=settings,
        proc=proc,
        log_path=log_path,
        redis_admin_url=redis_admin_url or redis_url,
        external_database_url=database_url,
    )
    try:
        _wait_healthy(proc, url, log_path)
        yield service
    finally:
        service.close_clients()
        code = _stop(proc)
        if code != 0:
            print(f"engram serve exited with {code}; last log lines:\n{service.log_tail()}")
        if not os.environ.get("ENGRAM_E2E_KEEP_DATA"):
            shutil.rmtree(data_dir, ignore_errors=True)
