"""Fixtures for the infrastructure tier: one synthesis per stage per session, cached wheels.

The CDK app is synthesised in-process (jsii starts once) with cdk-nag AwsSolutions enabled, so a
fixture that returns at all means the nag checks passed. Templates are then plain JSON dicts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_VERSION_CHECK", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")

from infra.bundling import REPO_ROOT
from infra.config import LAMBDA_FUNCTIONS
from tests.infrastructure.synth import Synthesized, synthesize

STUB_HANDLER = '''"""Stand-in for the infrastructure tests until functions/{name} exists."""
import engram
import pydantic_core


def handler(event, context):
    return {{"statusCode": 200, "body": "{name}"}}
'''


def missing_functions(root: Path = REPO_ROOT) -> list[str]:
    return [n for n in LAMBDA_FUNCTIONS if not (root / "functions" / n / "handler.py").is_file()]


@pytest.fixture(scope="session")
def repo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout; while some ``functions/<name>/handler.py`` do not exist yet, a view of it
    (symlinks) where only the missing handlers are stand-ins, so the infrastructure is still
    synthesised and checked. Real handlers are always used where they exist."""
    missing = missing_functions()
    if not missing:
        return REPO_ROOT
    view = tmp_path_factory.mktemp("repo-view")
    for entry in ("shared", "infra", "uv.lock", "pyproject.toml", "cdk.json"):
        (view / entry).symlink_to(REPO_ROOT / entry)
    functions = view / "functions"
    functions.mkdir()
    for name in LAMBDA_FUNCTIONS:
        if name in missing:
            (functions / name).mkdir()
            (functions / name / "handler.py").write_text(STUB_HANDLER.format(name=name))
        else:
            (functions / name).symlink_to(REPO_ROOT / "functions" / name)
    if (REPO_ROOT / "functions" / "__init__.py").is_file():
        (functions / "__init__.py").symlink_to(REPO_ROOT / "functions" / "__init__.py")
    return view


@pytest.fixture(scope="session")
def synth_cache(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache: dict[str, Synthesized] = {}

    def get(stage: str) -> Synthesized:
        if stage not in cache:
            cache[stage] = synthesize(stage, repo_root, tmp_path_factory.mktemp(f"cdk-{stage}"))
        return cache[stage]

    return get


@pytest.fixture(scope="session")
def prod(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache("prod")
    return result


@pytest.fixture(scope="session")
def dev(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache("dev")
    return result
