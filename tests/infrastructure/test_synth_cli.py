"""`make synth STAGE=prod` (= `bash infra/cdk.sh synth prod`) works offline with the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.infrastructure

OFFLINE_ENV = {
    # No AWS credentials or config of any kind.
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
    # Any attempt to use Docker fails loudly.
    "CDK_DOCKER": "/bin/false",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
}


def test_synth_prod_offline_without_docker_credentials_or_lookups(
    repo_root: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(OFFLINE_ENV)
    env["CDK_OUTDIR"] = str(tmp_path / "cdk.out")
    # The Makefile runs this under `uv run`; here the test's interpreter is the venv's python.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        ["bash", "infra/cdk.sh", "synth", "prod"],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # the bar: under two minutes
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())
    assert "missing" not in manifest, "synthesis needed a context lookup"
    stacks = {
        name
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    assert stacks == {f"Engram-prod-{s}" for s in ("Network", "Data", "Service", "Monitoring")}
    for name in stacks:
        assert manifest["artifacts"][name]["environment"] == "aws://unknown-account/unknown-region"
    assert not list(Path(repo_root).glob("cdk.out/prod/.bundling-temp*"))


def test_cdk_sh_refuses_an_unknown_stage(repo_root: Path) -> None:
    result = subprocess.run(
        ["bash", "infra/cdk.sh", "synth", "qa"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "unknown stage 'qa'" in result.stderr
