"""Where ``make synth`` takes the console's AWS build from: an explicit folder, an existing
``console/dist-aws``, or a build it runs itself; a checkout without a console has none."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from infra.console_assets import ASSETS_ENV, BUILD_COMMANDS, ConsoleBuildError, console_assets

pytestmark = pytest.mark.infrastructure


def checkout(tmp_path: Path, *, console: bool = True, built: bool = False) -> Path:
    root = tmp_path / "repo"
    (root / "console").mkdir(parents=True)
    if not console:
        (root / "console").rmdir()
        return root
    (root / "console" / "package.json").write_text("{}")
    if built:
        (root / "console" / "dist-aws").mkdir()
        (root / "console" / "dist-aws" / "index.html").write_text("<!doctype html>")
    return root


def fake_npm(tmp_path: Path) -> Path:
    """A directory with an executable ``npm`` (found on PATH; never run by these tests)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\nexit 0\n")
    npm.chmod(0o755)
    return bin_dir


class Runner:
    """Records the commands; ``build:aws`` writes the build, unless told to fail."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[list[str], Path]] = []
        self.fail_on = fail_on

    def __call__(self, args: list[str], *, cwd: Path, **_: Any) -> Any:
        self.calls.append((args, cwd))
        code = 1 if self.fail_on and self.fail_on in args else 0
        if code == 0 and args[1:] == ["run", "build:aws"]:
            (cwd / "dist-aws").mkdir()
            (cwd / "dist-aws" / "index.html").write_text("<!doctype html>")
        return subprocess.CompletedProcess(args, code)


def test_a_checkout_without_a_console_hosts_none(tmp_path: Path) -> None:
    root = checkout(tmp_path, console=False)
    assert console_assets(root, env={}, run=Runner()) is None


def test_an_existing_build_is_used_as_it_is(tmp_path: Path) -> None:
    root = checkout(tmp_path, built=True)
    runner = Runner()
    assert console_assets(root, env={}, run=runner) == root / "console" / "dist-aws"
    assert runner.calls == []


def test_a_missing_build_is_made_with_the_locked_packages(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    runner = Runner()
    found = console_assets(root, env={"PATH": str(fake_npm(tmp_path))}, run=runner)
    assert found == root / "console" / "dist-aws"
    assert [(args[1:], cwd) for args, cwd in runner.calls] == [
        (list(command), root / "console") for command in BUILD_COMMANDS
    ]
    assert [c[1:] for c, _ in runner.calls] == [
        ["ci", "--no-audit", "--no-fund"],
        ["run", "build:aws"],
    ]


def test_a_failing_build_stops_the_synth_saying_what_failed(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    with pytest.raises(
        ConsoleBuildError, match=r"npm ci .*failed \(exit 1\).*ENGRAM_CONSOLE_ASSETS"
    ):
        console_assets(root, env={"PATH": str(fake_npm(tmp_path))}, run=Runner(fail_on="ci"))
    assert not (root / "console" / "dist-aws").exists()


def test_without_npm_the_message_says_how_to_build(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConsoleBuildError, match=r"npm is not on PATH.*npm run build:aws"):
        console_assets(root, env={"PATH": str(empty)}, run=Runner())


def test_an_explicit_folder_wins_and_must_hold_a_build(tmp_path: Path) -> None:
    root = checkout(tmp_path, built=True)
    other = tmp_path / "ci-build"
    other.mkdir()
    with pytest.raises(ConsoleBuildError, match=r"no index\.html"):
        console_assets(root, env={ASSETS_ENV: str(other)}, run=Runner())
    (other / "index.html").write_text("<!doctype html>")
    assert console_assets(root, env={ASSETS_ENV: str(other)}, run=Runner()) == other
