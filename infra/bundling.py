"""Docker-free bundling of the Lambda assets.

Two kinds of asset:

* a **function asset** per Lambda: ``shared/engram`` (as the top-level package ``engram``) and
  the Python client ``clients/python/src/engram_client`` (a workspace member, so not in the
  layer), plus the function's own folder at the same import path it has in the repository
  (``functions/<name>/`` -> handler ``functions.<name>.handler.handler``). Its asset hash is a
  custom hash of exactly those files, so it changes when ``shared/engram`` or that function
  changes, and only then.
* one **dependencies layer**: the runtime dependencies pinned by ``uv.lock`` (``uv export``),
  installed as binary wheels for the Lambda platform (manylinux_2_28 aarch64, CPython 3.12) with
  ``uv pip install --target``. Built once per lock hash and platform and cached on disk
  (``$ENGRAM_BUNDLE_CACHE`` or ``~/.cache/engram/lambda-deps``), so repeated synths only copy.

The pure functions (hashing, copying, building) are usable without any CDK construct; the CDK
glue is at the bottom.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling, aws_lambda

# Not resolve(): a checkout reached through a symlinked folder keeps its own root.
REPO_ROOT = Path(__file__).absolute().parent.parent

BUNDLE_FORMAT = "engram-bundle-v1"
"""Part of every hash; bump it when the layout of a bundle changes."""

CLIENT_PACKAGE = Path("clients/python/src/engram_client")
"""The client distribution's package, bundled from source like ``shared/engram``."""

_SKIP_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIP_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class Platform:
    """A Lambda (or host) platform the dependency wheels are built for."""

    arch: str = "aarch64"
    python_version: str = "3.12"

    @property
    def uv_platform(self) -> str:
        # Lambda's python3.12 runtime is Amazon Linux 2023 (glibc 2.34): manylinux_2_28 wheels fit.
        return f"{self.arch}-manylinux_2_28"

    @property
    def key(self) -> str:
        return f"cp{self.python_version.replace('.', '')}-{self.uv_platform}"


LAMBDA_PLATFORM = Platform()


@dataclass(frozen=True)
class Source:
    """A file or folder copied into a bundle at ``dest`` (a posix path relative to the root),
    without the sub-folders ``exclude`` names (posix paths relative to ``path``)."""

    path: Path
    dest: str
    exclude: tuple[str, ...] = ()


#: Parts of ``shared/engram`` that are dev tools, never deployed: the local server, its
#: API Gateway and SQS stand-ins and dev tokens (``engram serve``).
LOCAL_ONLY: tuple[str, ...] = ("local",)


def engram_source(repo_root: Path = REPO_ROOT) -> Source:
    """``shared/engram`` as the bundle's top-level package ``engram``, without ``LOCAL_ONLY``."""
    return Source(repo_root / "shared" / "engram", "engram", exclude=LOCAL_ONLY)


@dataclass(frozen=True)
class FunctionSpec:
    """What goes into one function asset and how Lambda finds its handler."""

    name: str
    sources: tuple[Source, ...]
    handler: str

    @property
    def primary_source(self) -> Path:
        return self.sources[0].path


def app_function(name: str, repo_root: Path = REPO_ROOT) -> FunctionSpec:
    """The spec of ``functions/<name>/handler.py`` bundled with ``shared/engram``."""
    sources = [Source(repo_root / "functions" / name, f"functions/{name}")]
    package_init = repo_root / "functions" / "__init__.py"
    if package_init.is_file():
        sources.append(Source(package_init, "functions/__init__.py"))
    sources.append(engram_source(repo_root))
    client = repo_root / CLIENT_PACKAGE
    if client.is_dir():
        sources.append(Source(client, "engram_client"))
    return FunctionSpec(name, tuple(sources), f"functions.{name}.handler.handler")


def migrate_function(repo_root: Path = REPO_ROOT) -> FunctionSpec:
    """The deploy-time migration trigger (``infra/functions/migrate``) with ``shared/engram``."""
    return FunctionSpec(
        "migrate",
        (
            Source(repo_root / "infra" / "functions" / "migrate", "engram_migrate"),
            engram_source(repo_root),
        ),
        "engram_migrate.handler.handler",
    )


# --- hashing ------------------------------------------------------------------------------


def _walk(path: Path, exclude: Sequence[str] = ()) -> Iterator[Path]:
    """Files under ``path`` in a stable order, without caches, compiled files and the
    sub-folders ``exclude`` names."""
    if path.is_file():
        yield path
        return
    skipped = {path / e for e in exclude}
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and here / d not in skipped)
        for filename in sorted(filenames):
            if not filename.endswith(_SKIP_SUFFIXES):
                yield Path(dirpath) / filename


def _bundle_files(sources: Sequence[Source]) -> Iterator[tuple[str, Path]]:
    for source in sources:
        if not source.path.exists():
            raise FileNotFoundError(f"bundle source missing: {source.path}")
        for file in _walk(source.path, source.exclude):
            rel = "" if source.path.is_file() else file.relative_to(source.path).as_posix()
            yield (f"{source.dest}/{rel}" if rel else source.dest), file


def source_hash(spec: FunctionSpec) -> str:
    """sha256 over the bundle's relative paths and file contents (and the bundle format)."""
    digest = hashlib.sha256(BUNDLE_FORMAT.encode())
    for dest, file in sorted(_bundle_files(spec.sources)):
        digest.update(b"\0path\0" + dest.encode())
        digest.update(b"\0data\0" + file.read_bytes())
    return digest.hexdigest()


def dependencies_hash(repo_root: Path = REPO_ROOT, platform: Platform = LAMBDA_PLATFORM) -> str:
    """sha256 of the lock, the workspace's dependency declarations and the target platform."""
    digest = hashlib.sha256(BUNDLE_FORMAT.encode())
    digest.update(platform.key.encode())
    client = CLIENT_PACKAGE.parent.parent / "pyproject.toml"
    names: list[str | Path] = [
        "uv.lock",
        "pyproject.toml",
        *([client] if (repo_root / client).is_file() else []),
    ]
    for name in names:
        digest.update(b"\0" + str(name).encode() + b"\0" + (repo_root / name).read_bytes())
    return digest.hexdigest()


# --- building -----------------------------------------------------------------------------


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def copy_sources(spec: FunctionSpec, output_dir: Path) -> None:
    """Write the function's files into ``output_dir`` at their bundle paths."""
    for dest, file in _bundle_files(spec.sources):
        target = output_dir / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def _uv() -> list[str]:
    """uv, never colouring its output: the CDK CLI sets ``FORCE_COLOR``, which makes uv colour
    even piped output, and ``uv export`` output is parsed by ``uv pip install``."""
    found = shutil.which("uv")
    return [*([found] if found else [sys.executable, "-m", "uv"]), "--color", "never"]


def export_requirements(repo_root: Path = REPO_ROOT) -> str:
    """The runtime requirements pinned by ``uv.lock`` (no dev/cdk/bench groups, no workspace
    member: their code is in the function assets, their dependencies are listed)."""
    result = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [
            *_uv(),
            "export",
            "--frozen",
            "--no-hashes",
            "--no-emit-workspace",
            "--no-default-groups",
            "--no-dev",
            "--no-header",
            "--quiet",
        ],
        cwd=repo_root,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def default_cache_dir() -> Path:
    if configured := os.environ.get("ENGRAM_BUNDLE_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram" / "lambda-deps"


def build_dependencies(
    repo_root: Path = REPO_ROOT,
    platform: Platform = LAMBDA_PLATFORM,
    cache_dir: Path | None = None,
) -> Path:
    """A directory of the locked runtime dependencies installed for ``platform`` (cached)."""
    cache = cache_dir or default_cache_dir()
    final = cache / dependencies_hash(repo_root, platform)
    if (final / ".complete").is_file():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    try:
        requirements = work / "requirements.txt"
        requirements.write_text(export_requirements(repo_root))
        target = work / "site"
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [
                *_uv(),
                "pip",
                "install",
                "--quiet",
                "--target",
                str(target),
                "--python-platform",
                platform.uv_platform,
                "--python-version",
                platform.python_version,
                "--only-binary",
                ":all:",
                "--no-deps",
                "--no-compile",
                "--requirement",
                str(requirements),
            ],
            cwd=repo_root,
            check=True,
            capture_output=True,
            text=True,
        )
        shutil.rmtree(target / "bin", ignore_errors=True)
        (target / ".complete").write_text(requirements.read_text())
        with contextlib.suppress(OSError):  # another process won the race: keep theirs
            os.replace(target, final)
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"installing Lambda dependencies failed:\n{error.stderr}") from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def copy_dependencies(
    output_dir: Path,
    repo_root: Path = REPO_ROOT,
    platform: Platform = LAMBDA_PLATFORM,
    cache_dir: Path | None = None,
) -> None:
    """Put the cached dependencies into ``output_dir`` (hard links where possible)."""
    source = build_dependencies(repo_root, platform, cache_dir)
    shutil.copytree(
        source,
        output_dir,
        copy_function=_link_or_copy,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".complete"),
    )


def build_bundle(
    spec: FunctionSpec,
    output_dir: Path,
    *,
    repo_root: Path = REPO_ROOT,
    platform: Platform | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """A function bundle; with ``platform`` its dependencies are added beside it (self-contained,
    as used to prove locally that a bundle imports its handler)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    copy_sources(spec, output_dir)
    if platform is not None:
        copy_dependencies(output_dir, repo_root, platform, cache_dir)
    return output_dir


# --- CDK glue -----------------------------------------------------------------------------


def _local_bundling(build: Callable[[Path], None]) -> Any:
    @jsii.implements(ILocalBundling)
    class _LocalBundling:
        def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
            build(Path(output_dir))
            return True

    return _LocalBundling()


def _asset_code(source_dir: Path, asset_hash: str, build: Callable[[Path], None]) -> Any:
    return aws_lambda.Code.from_asset(
        str(source_dir),
        asset_hash=asset_hash,
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(
            # Never pulled: local bundling always succeeds, so Docker is not needed.
            image=DockerImage.from_registry("local-bundling-only"),
            local=_local_bundling(build),
        ),
    )


def function_code(spec: FunctionSpec) -> aws_lambda.Code:
    """The Lambda code asset of one function (its files only; dependencies are the layer)."""
    missing = [s.path for s in spec.sources if not s.path.exists()]
    if missing:
        raise FileNotFoundError(f"function {spec.name!r}: missing {', '.join(map(str, missing))}")
    code: aws_lambda.Code = _asset_code(
        spec.primary_source, source_hash(spec), lambda out: copy_sources(spec, out)
    )
    return code


def dependencies_code(
    repo_root: Path = REPO_ROOT, platform: Platform = LAMBDA_PLATFORM
) -> aws_lambda.Code:
    """The layer asset: the locked dependencies under ``python/`` (on Lambda's sys.path)."""
    code: aws_lambda.Code = _asset_code(
        repo_root / "shared",
        dependencies_hash(repo_root, platform),
        lambda out: copy_dependencies(out / "python", repo_root, platform),
    )
    return code
