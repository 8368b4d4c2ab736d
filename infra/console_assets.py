"""Where the console's AWS build comes from when the app is synthesised.

In order: ``$ENGRAM_CONSOLE_ASSETS`` (a built folder, e.g. from CI); ``console/dist-aws`` when it
holds a build; otherwise ``cd console && npm ci && npm run build:aws``. Node is always there
when CDK synthesises (CDK itself runs on it), so only a failing build stops a synth, with a
message saying what to run. A checkout without ``console/`` has no console to host: the app is
then synthesised without it (and the web client without the hosted UI).

This module imports no CDK code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ASSETS_ENV = "ENGRAM_CONSOLE_ASSETS"
CONSOLE_DIR = "console"
AWS_BUILD_DIR = "dist-aws"
BUILD_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("ci", "--no-audit", "--no-fund"),
    ("run", "build:aws"),
)
"""The npm commands that make ``console/dist-aws`` (locked packages, then the AWS build)."""


class ConsoleBuildError(RuntimeError):
    """The console's AWS build is neither there nor buildable."""


def _has_build(path: Path) -> bool:
    return (path / "index.html").is_file()


def console_assets(
    repo_root: Path,
    *,
    env: Mapping[str, str] | None = None,
    run: Callable[..., Any] = subprocess.run,
) -> Path | None:
    """The folder of the console's AWS build, building it first when needed; None when the
    checkout has no console."""
    environ = os.environ if env is None else env
    if configured := environ.get(ASSETS_ENV):
        path = Path(configured)
        if not _has_build(path):
            raise ConsoleBuildError(f"{ASSETS_ENV}={configured}: no index.html there")
        return path
    console = repo_root / CONSOLE_DIR
    if not (console / "package.json").is_file():
        return None
    built = console / AWS_BUILD_DIR
    if _has_build(built):
        return built
    npm = shutil.which("npm", path=environ.get("PATH"))
    if npm is None:
        raise ConsoleBuildError(
            f"{built} is missing and npm is not on PATH: install Node 20.19+ and run "
            f"`cd {CONSOLE_DIR} && npm ci && npm run build:aws`, or set {ASSETS_ENV}"
        )
    for args in BUILD_COMMANDS:
        print(f"infra: building the console: npm {' '.join(args)}", file=sys.stderr)
        # the CDK CLI reads nothing from the app's stdout, but keep it for CDK alone
        result = run([npm, *args], cwd=console, stdout=sys.stderr, check=False)
        if result.returncode != 0:
            raise ConsoleBuildError(
                f"`npm {' '.join(args)}` in {console} failed (exit {result.returncode}); "
                f"fix the console build, or set {ASSETS_ENV} to a built folder"
            )
    if not _has_build(built):
        raise ConsoleBuildError(f"`npm run build:aws` wrote no {built / 'index.html'}")
    return built
