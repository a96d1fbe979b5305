"""The locally built Lambda assets: what ships, what must not, and the import graph."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from functions.core import setting_defaults
from infra import bundle

ROOT = Path(__file__).resolve().parents[2]


def _asset(name: str) -> Path:
    path = bundle.FUNCTIONS[name].path
    if not (path / "functions" / name / "handler.py").is_file():
        pytest.fail(f"{path} is not built: run `make build` first")
    return path


def _top_level(path: Path) -> set[str]:
    return {entry.name for entry in path.iterdir()}


def test_receiver_asset_has_no_mcp_sdk_and_no_worker_code() -> None:
    asset = _asset("receiver")
    assert "mcp" not in _top_level(asset)
    assert "aws_lambda_powertools" in _top_level(asset)
    shipped = {p.relative_to(asset).as_posix() for p in (asset / "functions").rglob("*.py")}
    assert "functions/receiver/handler.py" in shipped
    assert not any(p.startswith(("functions/worker/", "functions/relay/")) for p in shipped)
    assert not any("mcp" in Path(p).name for p in shipped), sorted(shipped)


def test_worker_asset_has_the_mcp_sdk_and_the_default_workflow() -> None:
    asset = _asset("worker")
    assert {"mcp", "pydantic", "pydantic_core", "aws_lambda_powertools"} <= _top_level(asset)
    module, _ = setting_defaults.DEFAULT_WORKFLOW.split(":")
    assert (asset / (module.replace(".", "/") + ".py")).is_file()


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_assets_leave_boto3_to_the_runtime_and_are_built_for_arm64_linux(name: str) -> None:
    asset = _asset(name)
    assert not {"boto3", "botocore"} & _top_level(asset)
    assert not list(asset.rglob("__pycache__"))
    for extension in asset.rglob("*.so"):
        assert "aarch64" in extension.name or "abi3" in extension.name, extension.name
        assert "x86_64" not in extension.name and "darwin" not in extension.name


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_every_shipped_module_imports_only_what_the_asset_holds(name: str) -> None:
    asset = _asset(name)
    files = bundle.package_files(bundle.FUNCTIONS[name])
    for source in files:
        assert (asset / source.relative_to(ROOT)).read_bytes() == source.read_bytes()
    top = {entry.name.split(".")[0].split("-")[0] for entry in asset.iterdir()}
    missing = bundle.third_party_imports(files) - top - bundle.RUNTIME_PROVIDED
    assert missing == set()


def test_module_closure_follows_relative_lazy_and_from_imports(tmp_path: Path) -> None:
    package = tmp_path / "functions"
    (package / "app").mkdir(parents=True)
    (package / "core").mkdir()
    (package / "unused").mkdir()
    for directory in (package, package / "app", package / "core", package / "unused"):
        (directory / "__init__.py").write_text("")
    (package / "app" / "handler.py").write_text(
        "from . import helper\nfrom functions.core import names\n"
        "def f():\n    import functions.core.lazy\n"
    )
    (package / "app" / "helper.py").write_text("from ..core.names import X\n")
    (package / "core" / "names.py").write_text("X = 1\n")
    (package / "core" / "lazy.py").write_text("")
    (package / "unused" / "heavy.py").write_text("import mcp\n")
    found = bundle.module_closure(["functions.app.handler"], source_root=tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in found} == {
        "functions/__init__.py",
        "functions/app/__init__.py",
        "functions/app/handler.py",
        "functions/app/helper.py",
        "functions/core/__init__.py",
        "functions/core/names.py",
        "functions/core/lazy.py",
    }


def test_pins_come_from_the_constraints_file(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("aws_lambda_powertools==3.1.0\nmcp==2.0.0  # comment\n")
    assert bundle.pinned(["aws-lambda-powertools", "mcp"], constraints) == [
        "aws-lambda-powertools==3.1.0",
        "mcp==2.0.0",
    ]
    with pytest.raises(bundle.BundleError, match="pydantic"):
        bundle.pinned(["pydantic"], constraints)


def test_every_third_party_import_of_functions_is_a_declared_dependency() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    # A distribution's import name here is its name with "-" as "_" (e.g. mcp-types).
    importable = {
        re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0].replace("-", "_") for line in declared
    }
    imported = bundle.third_party_imports((ROOT / "functions").rglob("*.py"))
    assert imported - importable == set()
