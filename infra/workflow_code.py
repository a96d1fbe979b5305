"""The deployer's own workflow: which code ships with the worker, and whether it is there.

``-c workflow=mymod:build -c workflow_source=../my-agent`` ships every top-level
Python package (a folder with ``__init__.py``, all its files) and module (``*.py``) of
``../my-agent`` at the root of the worker's asset, beside ``functions/``, where the
Lambda runtime imports them from. The synth refuses a workflow whose module is neither
there nor under ``functions/``, naming the module, instead of a worker that fails
every cold start. No CDK import here: ``python -m infra.bundle`` uses it too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from functions.core.workflow import WORKFLOW_ALIASES

# Never shipped from a workflow folder: caches, and what only builds or tests it.
_SKIPPED_NAMES = frozenset({"__pycache__", "setup.py", "conftest.py"})


class WorkflowCodeError(ValueError):
    """The workflow cannot be shipped as configured (missing module, name clash)."""


@dataclass(frozen=True, slots=True)
class WorkflowCode:
    """The ``workflow`` setting and the code the worker's asset must hold for it.

    Attributes:
        spec: An alias (``archive``, ``notify``, ``agent``) or ``module:attribute``.
        source: Folder of the deployer's packages and modules, or None (``functions/``).
        requirements: Extra pip requirements, installed for Lambda beside the worker's.
    """

    spec: str
    source: Path | None = None
    requirements: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """``module:attribute``, with an alias resolved."""
        return WORKFLOW_ALIASES.get(self.spec, self.spec)

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def attribute(self) -> str:
        return self.target.partition(":")[2]

    def source_files(self) -> dict[str, Path]:
        """What ships from ``source``: asset-relative path -> file.

        Raises:
            WorkflowCodeError: a top-level name would shadow the receiver's ``functions``.
        """
        if self.source is None:
            return {}
        files: dict[str, Path] = {}
        for entry in sorted(self.source.iterdir()):
            if _skipped(entry.name):
                continue
            if entry.name in ("functions", "functions.py"):
                raise WorkflowCodeError(
                    f"workflow_source {self.source}: a top-level 'functions' would replace "
                    "the receiver's own package; rename it"
                )
            if entry.is_file() and entry.suffix == ".py":
                files[entry.name] = entry
            elif entry.is_dir() and (entry / "__init__.py").is_file():
                for path in _package_files(entry):
                    files[path.relative_to(self.source).as_posix()] = path
        return files

    def top_level_names(self) -> set[str]:
        """Import names the shipped folder provides (``mymod`` for ``mymod.py``)."""
        return {Path(relative).parts[0].removesuffix(".py") for relative in self.source_files()}

    def locate(self, source_root: Path) -> Path:
        """The file of the workflow's module, in ``source`` or under ``functions/``.

        Raises:
            WorkflowCodeError: naming the module (and the attribute) that is missing.
        """
        module = self.module
        shipped = self.source_files()
        candidates = [module.replace(".", "/") + suffix for suffix in (".py", "/__init__.py")]
        path: Path | None = None
        if module.split(".")[0] == "functions":
            path = next((source_root / c for c in candidates if (source_root / c).is_file()), None)
        else:
            path = next((shipped[c] for c in candidates if c in shipped), None)
        if path is None:
            where = f"workflow_source ({self.source})" if self.source else "no workflow_source"
            raise WorkflowCodeError(
                f"workflow {self.spec}: module {module!r} not found ({where}; "
                "modules of the receiver live under functions/)"
            )
        if not _defines(path, self.attribute):
            raise WorkflowCodeError(
                f"workflow {self.spec}: module {module!r} ({path}) defines no {self.attribute!r}"
            )
        return path


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_NAMES or name.endswith(".pyc")


def _package_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.iterdir()):
        if _skipped(path.name):
            continue
        if path.is_dir():
            yield from _package_files(path)
        elif path.is_file():
            yield path


def _defines(path: Path, name: str) -> bool:
    """Whether the module binds ``name`` at top level (a star import may, too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bound: set[str] = set().union(*(_bound(node) for node in _top_level(tree.body)))
    return name in bound or "*" in bound


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    # Definitions guarded by ``if``/``try`` at module level still bind module names.
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    yield from _top_level(handler.body)
                yield from _top_level(node.finalbody)


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
