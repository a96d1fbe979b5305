"""The locally built Lambda assets: what ships, what must not, and the import graph."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from functions.workflows.wiring import WORKFLOW_ALIASES
from infra import bundle, bytecode
from infra.workflow_code import WorkflowCode, WorkflowCodeError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every function's asset, written as the synth writes it (no workflow folder)."""
    root = tmp_path_factory.mktemp("assets")
    return {
        name: bundle.AssetRecipe(asset).write(root / name)
        for name, asset in bundle.FUNCTIONS.items()
    }


def _asset(assets: dict[str, Path], name: str) -> Path:
    return assets[name]


def _top_level(path: Path) -> set[str]:
    return {entry.name for entry in path.iterdir()}


def test_receiver_asset_has_no_mcp_sdk_and_no_worker_code(assets: dict[str, Path]) -> None:
    asset = _asset(assets, "receiver")
    assert "mcp" not in _top_level(asset)
    assert "aws_lambda_powertools" in _top_level(asset)
    shipped = {p.relative_to(asset).as_posix() for p in (asset / "functions").rglob("*.py")}
    assert "functions/receiver/handler.py" in shipped
    assert not any(p.startswith(("functions/worker/", "functions/relay/")) for p in shipped)
    assert not any("mcp" in Path(p).name for p in shipped), sorted(shipped)


def test_worker_asset_has_the_mcp_sdk_and_the_default_workflow(assets: dict[str, Path]) -> None:
    asset = _asset(assets, "worker")
    assert {"mcp", "pydantic", "pydantic_core", "aws_lambda_powertools"} <= _top_level(asset)
    for target in WORKFLOW_ALIASES.values():
        module, _ = target.split(":")
        assert (asset / (module.replace(".", "/") + ".py")).is_file(), target


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_assets_leave_boto3_to_the_runtime_and_are_built_for_arm64_linux(
    assets: dict[str, Path], name: str
) -> None:
    asset = _asset(assets, name)
    assert not {"boto3", "botocore"} & _top_level(asset)
    for extension in asset.rglob("*.so"):
        assert "aarch64" in extension.name or "abi3" in extension.name, extension.name
        assert "x86_64" not in extension.name and "darwin" not in extension.name


# importlib.util.MAGIC_NUMBER of each Lambda Python (CPython's
# Lib/importlib/_bootstrap_external.py).
RUNTIME_MAGIC = {"3.13": 3571}


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_assets_ship_bytecode_of_the_runtimes_python_only(
    assets: dict[str, Path], name: str
) -> None:
    asset = _asset(assets, name)
    magic = RUNTIME_MAGIC[bundle.LAMBDA_PYTHON_VERSION].to_bytes(2, "little") + b"\r\n"
    bytecode.check(asset, bundle.LAMBDA_PYTHON_VERSION, magic)  # every module's, or raises
    tag = "cpython-" + bundle.LAMBDA_PYTHON_VERSION.replace(".", "")
    assert {p.name.split(".")[1] for p in asset.rglob("*.pyc")} == {tag}
    handler = asset / "functions" / name / "handler.py"
    assert bytecode.compiled_path(handler, bundle.LAMBDA_PYTHON_VERSION).is_file()


def test_bytecode_of_another_python_is_refused(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text("x = 1\n")
    compiled = bytecode.compiled_path(tmp_path / "module.py", "3.13")
    compiled.parent.mkdir()
    compiled.write_bytes((3495).to_bytes(2, "little") + b"\r\n" + bytes(12))  # 3.11's
    with pytest.raises(bytecode.BytecodeError, match=r"module\.py"):
        bytecode.check(tmp_path, "3.13", (3571).to_bytes(2, "little") + b"\r\n")


@pytest.mark.parametrize("name", sorted(bundle.FUNCTIONS))
def test_every_shipped_module_imports_only_what_the_asset_holds(
    assets: dict[str, Path], name: str
) -> None:
    asset = _asset(assets, name)
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


def test_imports_for_type_checking_only_are_told_apart(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "import typing\nfrom typing import TYPE_CHECKING\nimport boto3\n"
        "if TYPE_CHECKING:\n    import mypy_boto3_s3\nelse:\n    import yaml\n"
        "if typing.TYPE_CHECKING:\n    from mypy_boto3_sqs.client import SQSClient\n"
        "def lazy():\n    import mcp\n"
    )
    assert bundle.third_party_imports([module]) == {"boto3", "yaml", "mcp"}
    assert bundle.third_party_imports([module], type_checking=True) == {
        "mypy_boto3_s3",
        "mypy_boto3_sqs",
    }


def _functions_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "functions", tmp_path / "functions", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def test_an_asset_is_named_by_everything_that_goes_into_it(tmp_path: Path) -> None:
    root = _functions_copy(tmp_path / "project")
    folder = tmp_path / "my-agent"
    folder.mkdir()
    (folder / "mine.py").write_text("def build(context):\n    return None\n")
    worker = bundle.FUNCTIONS["worker"]

    def digest(workflow: WorkflowCode | None = None) -> str:
        return bundle.AssetRecipe(worker, workflow, source_root=root).content_hash()

    before = digest()
    assert digest() == before
    shipped = WorkflowCode("mine:build", source=folder)
    assert digest(shipped) != before
    assert digest(WorkflowCode("mine:build", folder, ("sortedcontainers",))) != digest(shipped)
    with_workflow = digest(shipped)
    (folder / "mine.py").write_text("def build(context):\n    return 1\n")
    assert digest(shipped) != with_workflow
    handler = root / "functions" / "worker" / "handler.py"
    handler.write_text(handler.read_text() + "# edited\n")
    assert digest() != before
    # The receiver does not ship worker code, so its name does not change with it.
    receiver = bundle.AssetRecipe(bundle.FUNCTIONS["receiver"], source_root=root)
    assert (
        receiver.content_hash()
        == bundle.AssetRecipe(bundle.FUNCTIONS["receiver"], source_root=ROOT).content_hash()
    )


def test_a_workflow_folder_ships_its_packages_and_modules_only(tmp_path: Path) -> None:
    folder = tmp_path / "my-agent"
    (folder / "pkg" / "sub").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "sub" / "__init__.py").write_text("")
    (folder / "pkg" / "sub" / "prompt.md").write_text("hi")
    (folder / "pkg" / "__pycache__").mkdir()
    (folder / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"")
    (folder / "loose").mkdir()  # no __init__.py: not a package
    (folder / "loose" / "a.py").write_text("")
    (folder / "top.py").write_text("from pkg import *\n")
    (folder / "setup.py").write_text("")
    (folder / "README.md").write_text("")
    (folder / ".venv").mkdir()
    code = WorkflowCode("top:build", source=folder)
    assert sorted(code.source_files()) == [
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "pkg/sub/prompt.md",
        "top.py",
    ]
    assert code.top_level_names() == {"pkg", "top"}
    # A star import may bind the factory: the synth cannot tell, so it lets it through.
    assert code.locate(ROOT) == folder / "top.py"


def test_aliases_resolve_to_the_shipped_workflows() -> None:
    for alias, target in WORKFLOW_ALIASES.items():
        code = WorkflowCode(alias)
        assert code.target == target
        assert code.locate(ROOT).is_relative_to(ROOT / "functions" / "workflows"), alias


def _workflow_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-agent"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "flow.py").write_text("def build(context):\n    return None\n")
    return folder


@pytest.mark.parametrize("leads_to", ["file outside", "folder outside", "dot-folder inside"])
def test_a_link_leading_out_of_the_workflow_folder_is_refused_naming_it(
    tmp_path: Path, leads_to: str
) -> None:
    folder = _workflow_folder(tmp_path)
    outside = tmp_path / "home" / ".aws"
    outside.mkdir(parents=True)
    (outside / "credentials").write_text("aws_secret_access_key = outside\n")
    (folder / ".secrets").mkdir()
    (folder / ".secrets" / "key.txt").write_text("inside but hidden\n")
    link, target = {
        "file outside": (folder / "pkg" / "prompt_template.txt", outside / "credentials"),
        "folder outside": (folder / "pkg" / "templates", outside),
        "dot-folder inside": (folder / "pkg" / "templates", folder / ".secrets"),
    }[leads_to]
    link.symlink_to(target)
    with pytest.raises(WorkflowCodeError, match=str(link)):
        WorkflowCode("pkg.flow:build", source=folder).source_files()


def test_a_link_that_stays_inside_the_workflow_folder_ships_its_target(tmp_path: Path) -> None:
    folder = _workflow_folder(tmp_path)
    (folder / "shared").mkdir()
    (folder / "shared" / "system.txt").write_text("You are careful.\n")
    (folder / "pkg" / "system.txt").symlink_to(folder / "shared" / "system.txt")
    (folder / "pkg" / "loop").symlink_to(folder / "pkg")
    (folder / "tools").symlink_to(tmp_path)  # leads out, but no package: nothing ships
    files = WorkflowCode("pkg.flow:build", source=folder).source_files()
    assert files["pkg/system.txt"] == (folder / "shared" / "system.txt").resolve()
    assert not any(relative.startswith(("pkg/loop", "tools")) for relative in files)


@pytest.mark.parametrize("name", ["json.py", "functions", "asyncio"])
def test_a_workflow_name_that_replaces_the_standard_library_or_functions_is_refused(
    tmp_path: Path, name: str
) -> None:
    folder = _workflow_folder(tmp_path)
    entry = folder / name
    if name.endswith(".py"):
        entry.write_text("")
    else:
        entry.mkdir()
        (entry / "__init__.py").write_text("")
    with pytest.raises(WorkflowCodeError, match=rf"{entry}.*{name.removesuffix('.py')!r}"):
        WorkflowCode("pkg.flow:build", source=folder).source_files()


def test_a_package_named_like_a_dependency_is_refused_and_the_cache_stays_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = bundle.FUNCTIONS["worker"]
    # A copy of the pip cache, so that a regression poisons only this test's cache.
    pristine = bundle.dependency_dir(worker.requirements)
    cache = tmp_path / "deps"
    shutil.copytree(pristine.parent, cache, ignore=shutil.ignore_patterns("*.partial"))
    monkeypatch.setattr(bundle, "DEPS_CACHE", cache)
    clean = (pristine / "pydantic" / "__init__.py").read_bytes()
    folder = _workflow_folder(tmp_path)
    (folder / "pydantic").mkdir()
    (folder / "pydantic" / "__init__.py").write_text("TAMPERED = True\n")
    tampering = bundle.AssetRecipe(worker, WorkflowCode("pkg.flow:build", source=folder))

    with pytest.raises(bundle.BundleError, match=rf"{folder / 'pydantic'}.*'pydantic'.*pydantic "):
        tampering.write(tmp_path / "refused")
    # Whatever writes into a built asset afterwards does not reach the cache either.
    built = bundle.AssetRecipe(worker).write(tmp_path / "built")
    (built / "pydantic" / "__init__.py").write_text("TAMPERED = True\n")

    rebuilt = bundle.AssetRecipe(worker).write(tmp_path / "rebuilt")
    assert (rebuilt / "pydantic" / "__init__.py").read_bytes() == clean
    assert (
        bundle.dependency_dir(worker.requirements) / "pydantic" / "__init__.py"
    ).read_bytes() == clean


def test_a_listed_file_swapped_for_a_link_or_a_fifo_is_not_copied(tmp_path: Path) -> None:
    # What a workflow folder lists was checked when listed; the copy opens it without
    # following a link, so a file replaced by one since ships nothing of the target.
    secret = tmp_path / "credentials"
    secret.write_text("outside")
    swapped = tmp_path / "prompt.txt"
    swapped.symlink_to(secret)
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    for source in (swapped, fifo):
        with pytest.raises(bundle.BundleError, match=str(source)):
            bundle._copy_regular_file(source, tmp_path / f"{source.name}.copy")
        assert not (tmp_path / f"{source.name}.copy").exists()


def test_two_installs_of_the_same_requirements_at_once_keep_one_complete_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two synths that miss the cache together (two test lanes) each run pip into a
    # folder of their own; the one that finishes second keeps the first one's copy.
    monkeypatch.setattr(bundle, "DEPS_CACHE", tmp_path / "deps")
    requirements = bundle.FUNCTIONS["receiver"].requirements
    target = bundle.dependency_target(requirements)
    stagings: list[Path] = []
    other_pid = os.getpid() + 1

    def pip(command: list[str], **_: object) -> None:
        staging = Path(command[command.index("--target") + 1])
        stagings.append(staging)
        staging.mkdir(parents=True)
        (staging / f"installed-by-{len(stagings)}").write_text("")
        if len(stagings) == 1:  # another process installs and finishes meanwhile
            with monkeypatch.context() as other:
                other.setattr(os, "getpid", lambda: other_pid)
                assert bundle.dependency_dir(requirements) == target

    monkeypatch.setattr(subprocess, "run", pip)
    assert bundle.dependency_dir(requirements) == target

    assert len(set(stagings)) == 2
    assert {path.name for path in target.iterdir()} == {".complete", "installed-by-2"}
    assert not list(target.parent.glob("*.partial"))
