"""Docker-free bundling: asset hashes, the dependency layer, and bundles that really import."""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from infra.bundling import (
    LAMBDA_PLATFORM,
    REPO_ROOT,
    FunctionSpec,
    Source,
    app_function,
    build_bundle,
    build_dependencies,
    copy_sources,
    dependencies_hash,
    function_code,
    migrate_function,
    source_hash,
)
from infra.config import CACHE_ROTATION_FUNCTION, LAMBDA_FUNCTIONS
from tests.infrastructure.bundles import HOST, import_in_bundle
from tests.infrastructure.synth import Synthesized

pytestmark = pytest.mark.infrastructure

FIXTURE_HANDLER = """
import engram
import pydantic_core
from engram.settings import Settings


def handler(event, context):
    return {"engram": engram.__name__, "core": pydantic_core.__version__,
            "stage": Settings().stage}
"""


def _tree(root: Path) -> Path:
    """A small repository: shared/engram and two functions."""
    (root / "shared" / "engram" / "sub").mkdir(parents=True)
    (root / "shared" / "engram" / "__init__.py").write_text("VERSION = 1\n")
    (root / "shared" / "engram" / "sub" / "model.py").write_text("X = 1\n")
    for name in ("alpha", "beta"):
        (root / "functions" / name).mkdir(parents=True)
        (root / "functions" / name / "handler.py").write_text("def handler(e, c):\n    return 1\n")
    return root


def test_asset_hash_changes_when_shared_engram_changes_and_only_then(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    alpha, beta = app_function("alpha", root), app_function("beta", root)
    before_alpha, before_beta = source_hash(alpha), source_hash(beta)
    assert before_alpha != before_beta

    # Recompiling, caches and timestamps are not changes.
    cache = root / "shared" / "engram" / "__pycache__"
    cache.mkdir()
    (cache / "model.cpython-312.pyc").write_bytes(b"\x00compiled")
    os.utime(root / "shared" / "engram" / "sub" / "model.py", (1, 1))
    assert source_hash(alpha) == before_alpha

    # Another function changing leaves this one alone.
    (root / "functions" / "beta" / "handler.py").write_text("def handler(e, c):\n    return 2\n")
    assert source_hash(alpha) == before_alpha
    assert source_hash(beta) != before_beta

    # A change in shared/engram changes every function's hash.
    after_beta = source_hash(beta)
    (root / "shared" / "engram" / "sub" / "model.py").write_text("X = 2\n")
    assert source_hash(alpha) != before_alpha
    assert source_hash(beta) != after_beta

    # So does a new file (e.g. a migration) or a renamed one.
    changed = source_hash(alpha)
    (root / "shared" / "engram" / "sub" / "0002_new.sql").write_text("select 1;\n")
    assert source_hash(alpha) != changed


def test_template_asset_key_follows_shared_engram(tmp_path: Path) -> None:
    """End to end through CDK: the S3 key of a function's code changes with shared/engram,
    and not with another function."""
    root = _tree(tmp_path / "repo")

    def keys() -> dict[str, str]:
        app = App(outdir=str(tmp_path / f"out-{len(list(tmp_path.iterdir()))}"))
        stack = Stack(app, "Probe")
        for name in ("alpha", "beta"):
            lambda_.Function(
                stack,
                name,
                runtime=lambda_.Runtime.PYTHON_3_12,
                handler=app_function(name, root).handler,
                code=function_code(app_function(name, root)),
            )
        template = app.synth().get_stack_by_name("Probe").template
        return {
            r["Properties"]["Handler"].split(".")[1]: r["Properties"]["Code"]["S3Key"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::Lambda::Function"
        }

    first = keys()
    assert keys() == first  # deterministic
    (root / "functions" / "beta" / "handler.py").write_text("def handler(e, c):\n    return 3\n")
    second = keys()
    assert second["alpha"] == first["alpha"]
    assert second["beta"] != first["beta"]
    (root / "shared" / "engram" / "__init__.py").write_text("VERSION = 2\n")
    third = keys()
    assert third["alpha"] != second["alpha"]
    assert third["beta"] != second["beta"]


def test_dependency_hash_follows_the_lock_and_the_platform(tmp_path: Path) -> None:
    for name in ("uv.lock", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    base = dependencies_hash(tmp_path)
    assert dependencies_hash(tmp_path) == base
    assert dependencies_hash(tmp_path, HOST) != base
    with (tmp_path / "uv.lock").open("a") as lock:
        lock.write("\n# changed\n")
    assert dependencies_hash(tmp_path) != base


def test_synthesised_assets_hold_handler_engram_and_arm64_wheels(prod: Synthesized) -> None:
    manifest = json.loads((prod.outdir / "Engram-prod-Service.assets.json").read_text())
    service = prod.template("Service")["Resources"]
    # Engram's one dependencies layer (CDK's bucket deployment of the console brings its own)
    layers = [
        r
        for r in service.values()
        if r["Type"] == "AWS::Lambda::LayerVersion"
        and r["Properties"].get("Description") == "Engram runtime dependencies from uv.lock"
    ]
    assert len(layers) == 1
    layer_key = layers[0]["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    layer_dir = prod.outdir / manifest["files"][layer_key]["source"]["path"]
    assert layer_dir.is_dir()
    compiled = glob.glob(str(layer_dir / "python" / "pydantic_core" / "_pydantic_core.*.so"))
    assert compiled
    assert all("cpython-312-aarch64-linux-gnu" in path for path in compiled)
    assert (layer_dir / "python" / "redis").is_dir()
    assert not (layer_dir / "python" / "engram").exists()  # our code is in the function assets

    for resource in service.values():
        props = resource.get("Properties", {})
        handler = props.get("Handler", "")
        if resource["Type"] != "AWS::Lambda::Function" or not handler.startswith("functions."):
            continue
        key = props["Code"]["S3Key"].removesuffix(".zip")
        asset = prod.outdir / manifest["files"][key]["source"]["path"]
        module = handler.rsplit(".", 1)[0].replace(".", "/") + ".py"
        assert (asset / module).is_file(), module
        assert (asset / "engram" / "settings.py").is_file()
        assert not list(asset.rglob("__pycache__"))


@pytest.fixture(scope="module")
def host_dependencies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The locked dependencies for this machine (x86_64 manylinux, cp312); cached on disk."""
    return build_dependencies(REPO_ROOT, HOST)


def test_a_built_bundle_imports_its_handler_on_python312(
    tmp_path: Path, host_dependencies: Path
) -> None:
    source = tmp_path / "src" / "fixture"
    source.mkdir(parents=True)
    (source / "handler.py").write_text(FIXTURE_HANDLER)
    spec = FunctionSpec(
        "fixture",
        (Source(source, "functions/fixture"), Source(REPO_ROOT / "shared" / "engram", "engram")),
        "functions.fixture.handler.handler",
    )
    bundle = build_bundle(spec, tmp_path / "bundle", platform=HOST)
    compiled = glob.glob(str(bundle / "pydantic_core" / "_pydantic_core.*.so"))
    assert compiled
    assert all("cpython-312-x86_64-linux-gnu" in p for p in compiled)
    result = import_in_bundle(bundle, "functions.fixture.handler", call=True)
    assert result["engram"] == "engram"
    assert result["stage"] == "bundle-test"


def _real_functions() -> list[str]:
    names = (*LAMBDA_FUNCTIONS, CACHE_ROTATION_FUNCTION)
    return [n for n in names if (REPO_ROOT / "functions" / n / "handler.py").is_file()]


# Every real functions/<name>/handler.py is bundled and imported. While none exists yet (the
# functions are written in parallel), the case runs the fixture function instead, so this test
# never silently passes with nothing checked.
@pytest.mark.parametrize("name", _real_functions() or ["fixture"])
def test_each_real_function_bundle_imports_its_handler(
    name: str, tmp_path: Path, host_dependencies: Path
) -> None:
    if name == "fixture":
        source = tmp_path / "fixture"
        source.mkdir()
        (source / "handler.py").write_text(FIXTURE_HANDLER)
        spec = FunctionSpec(
            "fixture",
            (
                Source(source, "functions/fixture"),
                Source(REPO_ROOT / "shared" / "engram", "engram"),
            ),
            "functions.fixture.handler.handler",
        )
    else:
        spec = app_function(name)
    bundle = build_bundle(spec, tmp_path / "bundle", platform=HOST)
    assert not (bundle / "engram" / "local").exists()
    assert import_in_bundle(bundle, spec.handler.rsplit(".", 1)[0], call=False) == "imported"


@pytest.mark.parametrize("name", [*LAMBDA_FUNCTIONS, "migrate"])
def test_no_deployed_asset_holds_the_local_dev_server(name: str, tmp_path: Path) -> None:
    """``engram/local`` (``engram serve``, its API Gateway and SQS stand-ins, dev tokens) is a
    dev tool: no Lambda asset carries it, and the rest of ``engram`` is all there."""
    spec = migrate_function() if name == "migrate" else app_function(name)
    copy_sources(spec, tmp_path)
    shipped = {
        p.relative_to(tmp_path / "engram").as_posix() for p in (tmp_path / "engram").rglob("*.py")
    }
    source = REPO_ROOT / "shared" / "engram"
    expected = {
        p.relative_to(source).as_posix()
        for p in source.rglob("*.py")
        if p.relative_to(source).parts[0] != "local"
    }
    assert (source / "local" / "server.py").is_file()  # there is something to leave out
    assert not (tmp_path / "engram" / "local").exists()
    assert shipped == expected


def test_lambda_platform_is_arm64_cpython312() -> None:
    assert LAMBDA_PLATFORM.uv_platform == "aarch64-manylinux_2_28"
    assert LAMBDA_PLATFORM.python_version == "3.12"


@pytest.mark.parametrize("name", [*LAMBDA_FUNCTIONS, "migrate"])
def test_every_asset_carries_the_behaviour_store_lua(name: str, tmp_path: Path) -> None:
    """The Redis behaviour store loads its scripts as package data (``lua/*.lua``): every
    asset holds all of them, byte for byte."""
    spec = migrate_function() if name == "migrate" else app_function(name)
    copy_sources(spec, tmp_path)
    lua = Path("engram") / "adapters" / "redis_behaviour" / "lua"
    source = REPO_ROOT / "shared" / lua
    expected = {p.name: p.read_bytes() for p in source.glob("*.lua")}
    assert "log_functions.lua" in expected
    assert {p.name: p.read_bytes() for p in (tmp_path / lua).glob("*.lua")} == expected
