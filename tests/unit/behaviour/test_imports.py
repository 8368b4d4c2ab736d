"""`import engram` is light and connects to nothing; the domain imports no infrastructure."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import engram

ROOT = Path(__file__).resolve().parents[3]
DOMAIN = ROOT / "shared" / "engram" / "behaviour"
FORBIDDEN = {"boto3", "botocore", "redis", "psycopg", "psycopg_pool", "aws_lambda_powertools"}


def test_the_top_level_package_exports_the_behavioural_memory_api() -> None:
    names = {
        "Observation",
        "Fact",
        "ObservationType",
        "FactCategory",
        "ExponentialDecay",
        "AdaptiveDecay",
        "consolidate",
        "format_memory_section",
        "extract_tool_affinities",
        "InMemoryObservationLog",
        "InMemoryFactRepository",
        "InMemoryCheckpointStore",
        "RedisObservationLog",
        "RedisFactRepository",
        "RedisCheckpointStore",
    }
    assert names <= set(engram.__all__)
    for name in names:
        assert getattr(engram, name).__name__ == name


def test_import_engram_loads_no_client_library() -> None:
    code = (
        "import sys, engram; from engram import consolidate, Observation;"
        "mods = ('redis', 'boto3', 'psycopg', 'aws_lambda_powertools');"
        "bad = [m for m in mods if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "PATH": ""},
    )
    assert out.stdout.strip() == ""


def test_behaviour_domain_imports_no_infrastructure() -> None:
    offenders = []
    for path in DOMAIN.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods: list[str] = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            offenders += [f"{path.name}: {m}" for m in mods if m.split(".")[0] in FORBIDDEN]
    assert offenders == []
