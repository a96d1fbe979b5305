"""Build the Lambda assets locally, without Docker.

Each function's asset holds the ``functions/`` modules its handler imports (found by
reading the import statements, so the receiver ships no worker code) and its
third-party dependencies installed for the Lambda platform (``pip install --platform
... --only-binary=:all:``: wheels only, so nothing is compiled for the wrong machine).
The worker's also holds the deployer's workflow code and requirements
(:mod:`infra.workflow_code`).

The synth bundles every asset itself from what is on disk (:mod:`infra.lambda_code`),
so ``cdk deploy`` never ships stale code; ``python -m infra.bundle`` (``make build``)
writes the same assets to ``build/assets/<function>/`` to inspect or measure them.

boto3/botocore are left to the Lambda runtime, which ships and patches them: the
functions use only long-stable APIs (``TransactWriteItems`` with
``ReturnValuesOnConditionCheckFailure``, SQS, Secrets Manager, S3), and leaving them
out keeps every asset about 25 MB smaller, which shortens deploys and cold starts.

The pip step is cached under ``build/deps/<hash>/``, keyed on the requirement lines
and the target platform, so a rebuild with unchanged pins copies files only;
:meth:`AssetRecipe.content_hash` names an asset by everything that goes into it. A
build never modifies the cache: every file of an asset is a copy (a hard link would
let whatever writes into the asset, later or in the same build, write into the cache
and every later asset), and a workflow folder may not ship a top-level name that one
of the worker's dependencies (or the Lambda runtime's boto3) already provides.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra import bytecode, distribution
from infra.workflow_code import WorkflowCode

# The repository, or (installed from the wheel) a copy of ``functions`` in its form.
ROOT = distribution.source_root()
BUILD = distribution.build_dir()
ASSETS = BUILD / "assets"
DEPS_CACHE = BUILD / "deps"
CONSTRAINTS = distribution.constraints_file()

LAMBDA_PYTHON_VERSION = "3.13"
# Amazon Linux 2023 (glibc 2.34) runs manylinux_2_28 and manylinux2014 wheels.
LAMBDA_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux2014_aarch64")
# Provided by the Lambda runtime; see the module docstring.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil"})
_POWERTOOLS = ("aws-lambda-powertools",)
# Part of every asset's content hash: bump it when the layout of an asset changes.
_ASSET_FORMAT = "3"  # 3: bytecode for the runtime's Python


@dataclass(frozen=True, slots=True)
class FunctionAsset:
    """What one Lambda function's asset is made of.

    Attributes:
        name: Directory under ``functions/`` and under ``build/assets/``.
        requirements: Distribution names, pinned from ``constraints.txt``.
        whole_packages: ``functions`` packages shipped in full (modules loaded by name,
            such as a configured workflow), beyond what the import graph finds.
    """

    name: str
    requirements: tuple[str, ...]
    whole_packages: tuple[str, ...] = ()

    @property
    def handler_module(self) -> str:
        return f"functions.{self.name}.handler"

    @property
    def path(self) -> Path:
        return ASSETS / self.name


FUNCTIONS: dict[str, FunctionAsset] = {
    asset.name: asset
    for asset in (
        FunctionAsset(name="receiver", requirements=_POWERTOOLS),
        FunctionAsset(name="relay", requirements=_POWERTOOLS),
        FunctionAsset(
            name="worker",
            requirements=(*_POWERTOOLS, "mcp", "pydantic"),
            # The workflow is chosen by setting (module:attribute) and imported by name.
            whole_packages=("functions.worker", "functions.core", "functions.workflows"),
        ),
        FunctionAsset(name="reconciler", requirements=_POWERTOOLS),
    )
}


class BundleError(RuntimeError):
    """The asset cannot be built as declared (missing pin, unbundled import)."""


def pinned(requirements: Iterable[str], constraints: Path = CONSTRAINTS) -> list[str]:
    """Exact pins (``name==version``) of ``requirements`` from the constraints file."""
    pins: dict[str, str] = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if "==" in text:
            name, version = text.split("==", 1)
            pins[_normalise(name)] = version.strip()
    missing = [name for name in requirements if _normalise(name) not in pins]
    if missing:
        raise BundleError(f"no pin in {constraints.name} for: {', '.join(missing)}")
    return sorted(f"{_normalise(name)}=={pins[_normalise(name)]}" for name in requirements)


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def dependency_dir(requirements: Iterable[str], extra: Sequence[str] = ()) -> Path:
    """Install the pinned requirements (and ``extra`` ones) for Lambda once; return the
    cached directory.

    Args:
        requirements: Distribution names pinned in ``constraints.txt``.
        extra: Requirement specifiers of the deployer's workflow, installed in the same
            resolution (so under the same constraints) beside them.

    Raises:
        BundleError: pip cannot install them for the Lambda platform.
    """
    target = dependency_target(requirements, extra)
    if (target / ".complete").exists():
        return target
    lines = pinned(requirements)
    check_installer()
    # Each process its own staging folder: two synths at once (two test lanes) that
    # miss the cache both install, and the first complete copy stays.
    staging = target.with_name(f"{target.name}.{os.getpid()}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    platform_args = [arg for platform in LAMBDA_PLATFORMS for arg in ("--platform", platform)]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--only-binary=:all:",
        *platform_args,
        "--python-version",
        LAMBDA_PYTHON_VERSION,
        "--implementation",
        "cp",
        "--target",
        str(staging),
        # Transitive dependencies get the same pins as the development venv.
        "--constraint",
        str(CONSTRAINTS),
        *lines,
        *extra,
    ]
    try:
        subprocess.run(command, check=True)  # noqa: S603 (fixed argv, no shell)
    except subprocess.CalledProcessError:
        shutil.rmtree(staging, ignore_errors=True)
        raise BundleError(
            f"pip could not install {', '.join([*lines, *extra])} for Lambda "
            f"(Python {LAMBDA_PYTHON_VERSION}, {LAMBDA_PLATFORMS[0]}, wheels only, under "
            f"{CONSTRAINTS.name}); its output above says why"
        ) from None
    # Console scripts point at this machine's interpreter; the function never runs them.
    shutil.rmtree(staging / "bin", ignore_errors=True)
    _drop_bytecode(staging)
    (staging / ".complete").write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)  # no copy this function made
    try:
        staging.rename(target)
    except OSError:  # another process renamed its complete copy there first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def dependency_target(requirements: Iterable[str], extra: Sequence[str] = ()) -> Path:
    """Where :func:`dependency_dir` keeps these requirements' install (complete or not)."""
    key = _dependency_key(pinned(requirements), extra)
    return DEPS_CACHE / hashlib.sha256(key.encode()).hexdigest()[:16]


def check_installer() -> None:
    """The pip step runs ``python -m pip`` with this interpreter: say how to get it.

    A virtualenv that uv made has no pip unless asked; without this check the synth
    failed inside a CDK callback, the cause at the end of a long jsii traceback.

    Raises:
        BundleError: one line naming the fix.
    """
    if importlib.util.find_spec("pip") is None:
        raise BundleError(
            f"the bundler installs the functions' wheels with pip, and {sys.executable} has "
            f"none (a venv uv made?): run `uv pip install --python {sys.executable} pip` "
            f"or `{sys.executable} -m ensurepip`, then synth again"
        )


def _dependency_key(lines: Sequence[str], extra: Sequence[str]) -> str:
    return "\n".join(
        [*lines, *extra, LAMBDA_PYTHON_VERSION, *LAMBDA_PLATFORMS, CONSTRAINTS.read_text()]
    )


def module_closure(roots: Iterable[str], *, source_root: Path = ROOT) -> set[Path]:
    """Files of every ``functions`` module reachable by import statements from ``roots``.

    Imports inside functions count too (a lazy import still ships), and every parent
    package's ``__init__.py`` is included so the modules can be imported.
    """
    seen: set[str] = set()
    files: set[Path] = set()
    pending = list(roots)
    while pending:
        module = pending.pop()
        if module in seen or not module.startswith("functions"):
            continue
        seen.add(module)
        path = _module_file(module, source_root)
        if path is None:
            continue
        files.add(path)
        parts = module.split(".")
        for depth in range(1, len(parts)):
            init = _module_file(".".join(parts[:depth]), source_root)
            if init is not None:
                files.add(init)
        pending.extend(_imports_of(path, module))
    return files


def _module_file(module: str, source_root: Path) -> Path | None:
    base = source_root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_of(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(node, module, is_package)
            found.append(base)
            # ``from functions.core import names`` imports a module, not an attribute.
            found.extend(f"{base}.{alias.name}" for alias in node.names)
    return found


def _resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def third_party_imports(files: Iterable[Path], *, type_checking: bool = False) -> set[str]:
    """Top-level names of non-``functions`` modules that ``files`` import (absolute only).

    Imports under ``if TYPE_CHECKING:`` never run (type stubs, for instance, do not
    ship): they are left out, or, with ``type_checking=True``, they are the only ones.
    """
    names: set[str] = set()
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, for_types in _import_statements(tree, for_types=False):
            if for_types != type_checking:
                continue
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    names.discard("functions")
    names.discard("__future__")
    return names - set(sys.stdlib_module_names)


def _import_statements(
    node: ast.AST, *, for_types: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement under ``node``, and whether it is for type checking only."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, for_types
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.body:
            yield from _import_statements(statement, for_types=True)
        for statement in node.orelse:
            yield from _import_statements(statement, for_types=for_types)
        return
    for child in ast.iter_child_nodes(node):
        yield from _import_statements(child, for_types=for_types)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def package_files(
    asset: FunctionAsset, *, source_root: Path = ROOT, extra_roots: Iterable[str] = ()
) -> set[Path]:
    """The ``functions`` source files that ship in ``asset``.

    Args:
        asset: The function.
        source_root: The project folder holding ``functions/``.
        extra_roots: More modules loaded by name (a configured workflow's).
    """
    files = module_closure([asset.handler_module, *extra_roots], source_root=source_root)
    for package in asset.whole_packages:
        directory = source_root.joinpath(*package.split("."))
        files.update(directory.rglob("*.py"))
    # Whole packages may import more; close over them as well.
    roots = [_module_name(path, source_root) for path in files]
    return module_closure(roots, source_root=source_root)


def _module_name(path: Path, source_root: Path) -> str:
    relative = path.relative_to(source_root).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


@dataclass(frozen=True, slots=True)
class AssetRecipe:
    """Everything one function's asset is made of, read from disk when it is built.

    Attributes:
        asset: The function.
        workflow: The worker's workflow (its code and requirements), or None.
        source_root: The project folder holding ``functions/``.
    """

    asset: FunctionAsset
    workflow: WorkflowCode | None = None
    source_root: Path = ROOT

    def files(self) -> dict[str, Path]:
        """Asset-relative path -> source file, for the code (not the dependencies).

        Raises:
            BundleError: the handler or the workflow's module is missing.
            WorkflowCodeError: the workflow folder cannot be shipped as it is.
        """
        root = self.source_root
        if _module_file(self.asset.handler_module, root) is None:
            raise BundleError(f"{self.asset.handler_module} does not exist yet")
        roots: list[str] = []
        shipped: dict[str, Path] = {}
        if self.workflow is not None:
            self.workflow.locate(root)
            shipped = self.workflow.source_files()
            roots.append(self.workflow.module)
            # The deployer's code may import more of ``functions`` than the worker does.
            for relative, path in shipped.items():
                if path.suffix == ".py":
                    roots.extend(_imports_of(path, _module_name(Path(relative), Path())))
        files = package_files(self.asset, source_root=root, extra_roots=roots)
        return {path.relative_to(root).as_posix(): path for path in files} | shipped

    @property
    def extra_requirements(self) -> tuple[str, ...]:
        return self.workflow.requirements if self.workflow is not None else ()

    def check_installer(self) -> None:
        """Before any bundling: pip is there when the pip step will run (one line if not).

        Raises:
            BundleError: naming the fix.
        """
        if not (
            dependency_target(self.asset.requirements, self.extra_requirements) / ".complete"
        ).exists():
            check_installer()

    def refuse_replaced_dependencies(self) -> None:
        """Refuse a workflow folder whose top-level name a dependency already provides
        (the synth calls it before bundling, so the refusal is one line; it installs the
        dependencies, once, to know their names).

        Raises:
            BundleError: naming the folder's entry and the distribution it would replace.
        """
        if self.workflow is not None and self.workflow.source is not None:
            deps = dependency_dir(self.asset.requirements, self.extra_requirements)
            _refuse_replaced_dependencies(self.workflow, dependency_modules(deps))

    def content_hash(self) -> str:
        """A digest of every input: code files, requirement lines, target platform."""
        digest = hashlib.sha256(_ASSET_FORMAT.encode())
        key = _dependency_key(pinned(self.asset.requirements), self.extra_requirements)
        for part in (self.asset.name, key):
            digest.update(len(part).to_bytes(8, "big") + part.encode())
        for relative, path in sorted(self.files().items()):
            body = path.read_bytes()
            digest.update(len(relative).to_bytes(8, "big") + relative.encode())
            digest.update(len(body).to_bytes(8, "big") + body)
        return digest.hexdigest()

    def write(self, destination: Path) -> Path:
        """Write the asset into ``destination`` (created, or existing and empty).

        Raises:
            BundleError: a module imports a third-party name that nothing provides.
        """
        files = self.files()
        deps = dependency_dir(self.asset.requirements, self.extra_requirements)
        provided = {entry.name.split(".")[0].split("-")[0] for entry in deps.iterdir()}
        if self.workflow is not None:
            _refuse_replaced_dependencies(self.workflow, dependency_modules(deps))  # again
            provided |= self.workflow.top_level_names()
        python = [path for path in files.values() if path.suffix == ".py"]
        unbundled = sorted(third_party_imports(python) - provided - RUNTIME_PROVIDED)
        if unbundled:
            hint = " (add it to workflow_requirements)" if self.workflow is not None else ""
            raise BundleError(
                f"{self.asset.name} imports {', '.join(unbundled)} but does not bundle it{hint}"
            )
        # Copies, never links: the asset's files must not share the cache's.
        shutil.copytree(
            deps,
            destination,
            ignore=shutil.ignore_patterns(".complete"),
            copy_function=shutil.copyfile,
            dirs_exist_ok=True,
        )
        for relative, source in sorted(files.items()):
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            # A file already there (a link, even) is replaced, never written through.
            target.unlink(missing_ok=True)
            _copy_regular_file(source, target)
        try:
            bytecode.precompile(destination, LAMBDA_PYTHON_VERSION)
        except bytecode.BytecodeError as exc:
            raise BundleError(f"{self.asset.name}: {exc}") from None
        return destination


def _copy_regular_file(source: Path, target: Path) -> None:
    """Copy ``source``, which must still be a regular file and no link: it was checked
    (contained in its folder) when listed, and must not have been swapped since.

    Raises:
        BundleError: it is a link or not a regular file now.
    """
    try:
        descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise BundleError(f"{source} cannot be shipped: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise BundleError(f"{source} cannot be shipped: not a regular file")
        with target.open("xb") as copy:
            shutil.copyfileobj(stream, copy)


def dependency_modules(deps: Path) -> dict[str, str]:
    """Top-level import name -> the distribution (``name version``) that installs it,
    read from each ``*.dist-info/RECORD`` of an installed dependency folder."""
    modules: dict[str, str] = {}
    for record in sorted(deps.glob("*.dist-info/RECORD")):
        distribution_name = record.parent.name.removesuffix(".dist-info").replace("-", " ", 1)
        for line in record.read_text(encoding="utf-8").splitlines():
            top = line.split(",", 1)[0].split("/", 1)[0]
            if top and not top.endswith((".dist-info", ".data")) and top not in ("..", "bin"):
                modules.setdefault(top.split(".")[0], distribution_name)
    return modules


def _refuse_replaced_dependencies(workflow: WorkflowCode, dependencies: dict[str, str]) -> None:
    """A workflow folder's package named like a dependency would silently replace it.

    Raises:
        BundleError: naming the folder's package and the dependency it would replace.
    """
    provided = {name: "the Lambda runtime" for name in RUNTIME_PROVIDED} | dependencies
    clashes = sorted(workflow.top_level_names() & set(provided))
    if clashes and workflow.source is not None:
        name = clashes[0]
        raise BundleError(
            f"workflow_source: {workflow.source / name} would replace the worker's "
            f"dependency {name!r} (from {provided[name]}); rename it"
        )


def build(asset: FunctionAsset) -> Path:
    """Write ``build/assets/<name>/`` from scratch (no workflow folder); return it.

    Raises:
        BundleError: when the handler is missing or imports something not bundled.
    """
    shutil.rmtree(asset.path, ignore_errors=True)
    return AssetRecipe(asset).write(asset.path)


def _drop_bytecode(directory: Path) -> None:
    for cache in list(directory.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def size_of(directory: Path) -> int:
    """Total bytes of the regular files under ``directory``."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def main(argv: list[str] | None = None) -> int:
    """Build the named assets (default: all) and print their sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("functions", nargs="*", metavar="FUNCTION", help=", ".join(FUNCTIONS))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.functions) - set(FUNCTIONS))
    if unknown:
        parser.error(f"unknown function: {', '.join(unknown)}")
    for name in args.functions or list(FUNCTIONS):
        started = time.monotonic()
        path = build(FUNCTIONS[name])
        elapsed = time.monotonic() - started
        print(f"{name:<11} {size_of(path) / 1e6:7.1f} MB  {elapsed:5.1f} s  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
