"""The Lua scripts of the Redis behaviour store and the plumbing that runs them.

Each script lives in ``lua/<name>.lua``; the ones over an identity's log keys start with the
shared ``lua/log_functions.lua``. ``ScriptRunner`` loads them (on every primary of a cluster),
runs one by its SHA in one round trip (reloading once if the server lost its script cache) and
counts network calls in ``round_trips``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, cast

from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from engram.adapters.redis_behaviour.keys import Keys
from engram.adapters.redis_behaviour.log_codec import as_text
from engram.adapters.redis_client import RedisClient, is_cluster
from engram.clock import Clock

#: Scripts that start with the shared log functions.
_ON_THE_LOG = ("append", "commit", "prune", "facts", "facts_if_unchanged", "checkpoint")
#: Scripts that stand alone.
_STANDALONE = ("erase", "remove_if_empty", "unindex")


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", f"{name}.lua").read_text("utf-8")


def load_scripts() -> dict[str, str]:
    """Every script's source by name (the shared log functions prepended where used)."""
    shared = _read("log_functions")
    scripts = {name: shared + _read(name) for name in _ON_THE_LOG}
    scripts.update({name: _read(name) for name in _STANDALONE})
    return scripts


SCRIPTS = load_scripts()


class ScriptRunner:
    """A client, its loaded script SHAs and the round-trip counter."""

    index_key: str

    def __init__(self, client: RedisClient, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.round_trips = 0
        self._sha: dict[str, str] = {}

    def _load(self) -> None:
        if is_cluster(self.client):
            # SCRIPT LOAD goes to every primary: a script runs on the node owning its slot
            shas = [self.client.script_load(source) for source in SCRIPTS.values()]
        else:
            pipe = self.client.pipeline(transaction=False)
            for source in SCRIPTS.values():
                pipe.script_load(source)
            shas = pipe.execute()
        self.round_trips += 1
        self._sha = {name: as_text(sha) for name, sha in zip(SCRIPTS, shas, strict=True)}

    def _run(
        self,
        name: str,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        touch: str | None = None,
        touch_existing: bool = False,
        unindex: str | None = None,
    ) -> Any:
        """EVALSHA one script (plus an index ZADD for ``touch``, with ``touch_existing`` only
        if the identity is still indexed; or an index ZREM for ``unindex``) in one round trip."""
        if not self._sha:
            self._load()
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            # execute_command: a cluster pipeline routes EVALSHA by its keys (it refuses .evalsha)
            pipe.execute_command("EVALSHA", self._sha[name], len(keys), *keys, *args)
            if touch is not None:
                pipe.zadd(self.index_key, {touch: self.clock.now_ms()}, xx=touch_existing)
            if unindex is not None:
                pipe.zrem(self.index_key, unindex)
            results = pipe.execute(raise_on_error=False)
            self.round_trips += 1
            first = results[0]
            if isinstance(first, NoScriptError) and attempt == 0:
                self._load()  # the server restarted or flushed its script cache
                continue
            for item in results:
                if isinstance(item, Exception):
                    raise item
            return first
        raise NoScriptError("script could not be loaded")  # pragma: no cover

    def _run_many(
        self, name: str, calls: Mapping[str, tuple[Sequence[str], Sequence[Any]]]
    ) -> dict[str, Any]:
        """EVALSHA one script per identity (``identity -> (keys, args)``), each with an index
        ZADD for its identity, all in one pipeline (on a cluster, redis-py sends each node
        the commands of its slots). Per identity the script's result or the exception of its
        script or its index update (or of the whole pipeline)."""
        if not self._sha:
            self._load()
        out: dict[str, Any] = {}
        todo = dict(calls)
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            now = self.clock.now_ms()
            for identity_id, (keys, args) in todo.items():
                pipe.execute_command("EVALSHA", self._sha[name], len(keys), *keys, *args)
                pipe.zadd(self.index_key, {identity_id: now})
            try:
                results = pipe.execute(raise_on_error=False)
            except Exception as exc:  # the whole pipeline failed: every identity retries
                self.round_trips += 1
                return {**out, **dict.fromkeys(todo, exc)}
            self.round_trips += 1
            retry: dict[str, tuple[Sequence[str], Sequence[Any]]] = {}
            for identity_id, ran, indexed in zip(todo, results[::2], results[1::2], strict=True):
                if isinstance(ran, NoScriptError) and attempt == 0:
                    retry[identity_id] = todo[identity_id]
                    continue
                out[identity_id] = indexed if isinstance(indexed, Exception) else ran
            if not retry:
                break
            self._load()  # the server restarted or flushed its script cache
            todo = retry
        return out

    def _run_staged(
        self, keys: Keys, args: Sequence[Any], rows: Sequence[Any], identity_id: str
    ) -> Any:
        """The commit script after writing ``rows`` (flat id, JSON pairs: the whole new fact
        set) to the stage hash, inside one MULTI/EXEC (so no other client sees or touches the
        stage), plus the index ``ZADD XX`` after it: one round trip (two on a cluster, where
        the index lives in another slot than the transaction)."""
        if not self._sha:
            self._load()
        stage = keys.stage
        for attempt in range(2):
            commit = ("EVALSHA", self._sha["commit"], len(keys), *keys, *args)
            if is_cluster(self.client):
                result = self._staged_on_cluster(stage, rows, commit, identity_id)
            else:
                result = self._staged_on_server(stage, rows, commit, identity_id)
            if isinstance(result, NoScriptError) and attempt == 0:
                self._load()  # the server restarted or flushed its script cache
                continue
            if isinstance(result, Exception):
                self.client.delete(stage)  # pragma: no cover - the script failed: nothing kept
                raise result
            return result
        raise NoScriptError("script could not be loaded")  # pragma: no cover

    def _staged_on_server(
        self, stage: str, rows: Sequence[Any], commit: tuple[Any, ...], identity_id: str
    ) -> Any:
        pipe = self.client.pipeline(transaction=False)
        command: Any = pipe.execute_command
        command("MULTI")
        command("DEL", stage)
        if rows:
            command("HSET", stage, *rows)
        command(*commit)
        command("EXEC")
        pipe.zadd(self.index_key, {identity_id: self.clock.now_ms()}, xx=True)
        results = pipe.execute(raise_on_error=False)
        self.round_trips += 1
        for item in results:
            if isinstance(item, Exception):
                raise item
        return results[-2][-1]

    def _staged_on_cluster(
        self, stage: str, rows: Sequence[Any], commit: tuple[Any, ...], identity_id: str
    ) -> Any:
        tx = self.client.pipeline(transaction=True)  # one slot: the identity's
        tx.execute_command("DEL", stage)
        if rows:
            tx.execute_command("HSET", stage, *rows)
        tx.execute_command(*commit)
        results = tx.execute(raise_on_error=False)
        self.client.zadd(self.index_key, {identity_id: self.clock.now_ms()}, xx=True)
        self.round_trips += 2
        for item in results[:-1]:
            if isinstance(item, Exception):
                raise item
        return results[-1]


def server_of(client: RedisClient) -> tuple[Any, ...] | None:
    """(host, port, db, path) of a client's connection pool, or the node names of a cluster;
    None when unknown (then only the same client object counts as the same backing)."""
    if is_cluster(client):
        nodes = cast(RedisCluster, client).get_nodes()  # type: ignore[no-untyped-call]
        return ("cluster", frozenset(node.name for node in nodes))
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    host, port, path = kwargs.get("host"), kwargs.get("port"), kwargs.get("path")
    if host is None and path is None:
        return None
    if path is None and host in ("localhost", "::1"):
        host = "127.0.0.1"
    return (host, port if path is None else None, int(kwargs.get("db") or 0), path)
