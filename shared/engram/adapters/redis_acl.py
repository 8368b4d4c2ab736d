"""Engram's Redis ACL: the command categories and commands it uses, on its key prefix only.

One access string serves the ElastiCache user of the template and the ``redis-server`` users
the tests start, so what the tests pass under is what a stage runs with. It grants:

- keys matching ``<prefix>:*`` only (every Engram key starts with the prefix; the behaviour
  store, the rate limiter and the maintenance state all do);
- the data commands (``@read``, ``@write``), transactions (``MULTI``/``EXEC``) and connection
  commands (``AUTH``, ``HELLO``, ``PING``, ``CLIENT SETNAME``, ``COMMAND``), minus every
  ``@dangerous`` one (``FLUSHALL``, ``FLUSHDB``, ``KEYS``, ``CONFIG``, ``CLIENT KILL`` …), the
  two that list key names outside the prefix (``SCAN``, ``RANDOMKEY``) and ``FUNCTION``;
- the scripts: ``EVALSHA``, ``EVAL`` and ``SCRIPT LOAD`` (a script's own commands are checked
  against the same rules);
- what a cluster client reads about the topology (``CLUSTER SLOTS``/``SHARDS``/``NODES``/
  ``INFO``/``MYID``).

No channel is granted (``resetchannels`` is the default for new users since Redis 7): Engram
publishes nothing. Passwords are never part of the access string (ElastiCache sets them with
``CreateUser``/``ModifyUser``; a self-hosted server with ``ACL SETUSER <user> ><password>``).
"""

from __future__ import annotations

CATEGORIES: tuple[str, ...] = ("+@read", "+@write", "+@transaction", "+@connection")
"""Command categories granted (before the exclusions below)."""

EXCLUDED: tuple[str, ...] = ("-@dangerous", "-scan", "-randomkey", "-function")
"""Taken away again from the categories: destructive, administrative and key-listing commands,
and server-side functions (``FUNCTION LOAD``/``FLUSH`` are ``@write``; Engram runs scripts)."""

COMMANDS: tuple[str, ...] = (
    "+evalsha",
    "+eval",
    "+script|load",
    "+cluster|slots",
    "+cluster|shards",
    "+cluster|nodes",
    "+cluster|info",
    "+cluster|myid",
)
"""Single commands granted after the exclusions: scripts and the cluster topology reads."""


def key_pattern(prefix: str) -> str:
    """The one key pattern of the user: everything under ``<prefix>:``."""
    if not prefix or any(ch in prefix for ch in " *?[]\\"):
        raise ValueError(f"prefix: {prefix!r} cannot be part of an ACL key pattern")
    return f"~{prefix}:*"


def access_string(prefix: str) -> str:
    """The ACL rules of Engram's user (``on`` and the rules; no password)."""
    return " ".join(("on", key_pattern(prefix), "-@all", *CATEGORIES, *EXCLUDED, *COMMANDS))
