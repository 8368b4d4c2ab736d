"""The client distribution stands alone: its wheel, installed into a clean virtual environment,
brings httpx and pydantic but nothing of the server (no psycopg, no redis, no ``engram``
package), and a chat backend's session runs through it against ``engram serve``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.e2e.harness import REPO, LocalEngram, Tenant

CLIENT = REPO / "clients" / "python"

SESSION = r"""
import asyncio, importlib, json, os, sys

absent = {}
for module in ("psycopg", "redis", "boto3", "engram.bootstrap", "engram"):
    try:
        importlib.import_module(module)
        absent[module] = False
    except ImportError:
        absent[module] = True

from engram_client import AsyncEngramClient, EngramClient

url, token = os.environ["ENGRAM_URL"], os.environ["ENGRAM_TOKEN"]
out = {"absent": absent, "file": __import__("engram_client").__file__}
with EngramClient(url, token, timeout=30) as engram:
    out["health"] = engram.health().status
    saved = engram.save("favourite_editor", "helix", confidence=0.9)
    out["saved"] = [saved.key, saved["value"]]
    engram.emit_query("which editor do I use")
    engram.emit_tool("get_account", ok=True, duration_ms=12)
    out["drained"] = engram.drain(30).sent
    context = engram.start_session(query="editor")
    out["prompt_has_memory"] = "helix" in context.system_prompt("You help.")
    out["session_memories"] = [m.key for m in context.memories]
    out["tools"] = sorted(t.name for t in engram.tools())


async def main():
    async with AsyncEngramClient(url, token, timeout=30) as engram:
        recalled = await engram.recall("editor")
        out["async_recall"] = [m.value for m in recalled]
        engram.emit_query("async query")
        out["async_drained"] = (await engram.drain(30)).sent

asyncio.run(main())
print(json.dumps(out))
"""


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        args, check=True, capture_output=True, text=True, timeout=300, **kwargs
    )


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with only the client's wheel (and what the wheel needs,
    at the versions ``uv.lock`` pins) installed."""
    root = tmp_path_factory.mktemp("client-install")
    uv = [*_uv(), "--color", "never"]
    _run([*uv, "build", "--wheel", "--out-dir", str(root / "dist"), str(CLIENT)], cwd=REPO)
    wheels = list((root / "dist").glob("engram_client-*.whl"))
    assert len(wheels) == 1, wheels
    pins = _run(
        [*uv, "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--no-header"],
        cwd=REPO,
    ).stdout
    (root / "pins.txt").write_text(pins)
    venv = root / "venv"
    _run([*uv, "venv", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    _run(
        [
            *uv,
            "pip",
            "install",
            "--python",
            str(python),
            "-c",
            str(root / "pins.txt"),
            str(wheels[0]),
        ]
    )
    return python


def test_the_wheel_installs_alone_and_runs_a_session(
    client_venv: Path, service: LocalEngram, tenant: Tenant, tmp_path: Path
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "ENGRAM_URL": service.url,
        "ENGRAM_TOKEN": service.token(tenant.user, tenant.team),
    }
    # -I: no PYTHONPATH, no user site, not the working directory: only the venv's packages
    done = _run([str(client_venv), "-I", "-c", SESSION], cwd=tmp_path, env=env)
    out = json.loads(done.stdout.strip().splitlines()[-1])

    assert out["absent"] == {
        "psycopg": True,
        "redis": True,
        "boto3": True,
        "engram.bootstrap": True,
        "engram": True,
    }
    assert str(client_venv.parent.parent) in out["file"]  # the installed copy, not the repo's
    assert out["health"] == "ok"
    assert out["saved"] == ["favourite_editor", "helix"]
    assert out["drained"] == 2
    assert out["prompt_has_memory"] is True
    assert out["session_memories"] == ["favourite_editor"]
    assert {"memory_save", "memory_recall"} <= set(out["tools"])
    assert out["async_recall"] == ["helix"]
    assert out["async_drained"] == 1
