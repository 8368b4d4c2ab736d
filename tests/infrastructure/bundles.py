"""Building bundles for this machine and importing them on a local CPython 3.12."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from infra.bundling import Platform

HOST = Platform(arch="x86_64", python_version="3.12")
"""This machine: x86_64 manylinux wheels for CPython 3.12 (the Lambda runtime's version)."""


def python312() -> str:
    """A local CPython 3.12, the Lambda runtime's version. Missing is a failure, not a skip."""
    candidates = [os.environ.get("ENGRAM_PYTHON312", ""), shutil.which("python3.12") or ""]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12"))
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                capture_output=True,
                text=True,
                check=False,
            )
            if probe.stdout.strip() == "True":
                return candidate
    uv = shutil.which("uv")
    if uv:
        found = subprocess.run(
            [uv, "python", "find", "3.12"], capture_output=True, text=True, check=False
        )
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    pytest.fail("no CPython 3.12 found (set ENGRAM_PYTHON312 or install it with pyenv/uv)")


def import_in_bundle(bundle: Path, module: str, call: bool) -> Any:
    """Import ``module`` with only the bundle and the standard library on sys.path (-I -S)."""
    script = (
        "import importlib, json, sys\n"
        f"sys.path.insert(0, {str(bundle)!r})\n"
        f"m = importlib.import_module({module!r})\n"
        "assert callable(m.handler)\n"
        f"print(json.dumps(m.handler({{}}, None) if {call!r} else 'imported'))\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "ENGRAM_STAGE": "bundle-test"}
    result = subprocess.run(
        [python312(), "-I", "-S", "-B", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=bundle,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
