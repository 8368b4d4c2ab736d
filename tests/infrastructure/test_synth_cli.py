"""`make synth STAGE=prod` (= `bash infra/cdk.sh synth prod`) works offline with the real CLI,
on a fresh machine: an empty bundle cache and no terminal (stdout piped)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from infra.bundling import LAMBDA_PLATFORM, dependencies_hash
from tests.infrastructure.conftest import CliSynth

pytestmark = pytest.mark.infrastructure


def test_a_cold_synth_of_prod_without_a_terminal_succeeds_offline(
    cold_prod_synth: CliSynth, repo_root: Path
) -> None:
    synth = cold_prod_synth
    assert synth.cache_was_empty, "the cold synthesis must start from an empty bundle cache"
    assert synth.result.returncode == 0, synth.result.stdout + synth.result.stderr
    # It built the arm64 dependencies itself, into the cache it was given.
    built = synth.cache / dependencies_hash(repo_root, LAMBDA_PLATFORM)
    assert (built / ".complete").is_file()
    assert (built / "pydantic_core").is_dir()
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
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
