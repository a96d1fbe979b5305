"""The deployer's own workflow: which code ships with the worker, and whether it is there.

``-c workflow=mymod:build -c workflow_source=../my-agent`` ships every top-level
Python package (a folder with ``__init__.py``, all its files) and module (``*.py``) of
``../my-agent`` at the root of the worker's asset, beside ``functions/``, where the
Lambda runtime imports them from. The synth refuses a workflow whose module is neither
there nor under ``functions/``, naming the module, instead of a worker that fails
every cold start. No CDK import here: ``python -m infra.bundle`` uses it too.

What ships stays inside the folder: only regular files whose real path lies in it
(a symbolic link is followed only while it stays inside; one that leads out, to a file
or a folder, or onto a skipped name such as a dot-folder, fails the synth naming it),
and no top-level name may replace the standard library or ``functions``
(:mod:`infra.bundle` also refuses the worker's dependencies by name).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from functions.workflows.wiring import WORKFLOW_ALIASES

# Never shipped from a workflow folder: caches, and what only builds or tests it.
_SKIPPED_NAMES = frozenset({"__pycache__", "setup.py", "conftest.py"})


class WorkflowCodeError(ValueError):
    """The workflow cannot be shipped as configured (missing module, name clash, a link
    leading out of the folder)."""


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
        """What ships from ``source``: asset-relative path -> file (its real path).

        Raises:
            WorkflowCodeError: a top-level name would shadow ``functions`` or a standard
                library module, or a symbolic link leads out of the folder.
        """
        if self.source is None:
            return {}
        root = self.source.resolve()
        files: dict[str, Path] = {}
        for entry in sorted(self.source.iterdir()):
            if _skipped(entry.name):
                continue
            # What does not ship (a README, a link to a tool's folder) is not checked.
            real = entry.resolve()
            if real.is_file() and entry.suffix == ".py":
                real = _contained(entry, root)
                _check_top_level_name(entry.name.removesuffix(".py"), entry)
                files[entry.name] = real
            elif real.is_dir() and (real / "__init__.py").is_file():
                real = _contained(entry, root)
                _check_top_level_name(entry.name, entry)
                for relative, path in _package_files(entry, root, visited={root, real}):
                    files[f"{entry.name}/{relative}"] = path
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


def _contained(entry: Path, root: Path) -> Path:
    """The real path of ``entry``, which must lie inside ``root`` and pass no skipped
    name on the way (a link called ``templates`` to ``.aws`` is a dot-folder).

    Raises:
        WorkflowCodeError: naming the link and where it leads.
    """
    real = entry.resolve()
    if not real.is_relative_to(root) or any(map(_skipped, real.relative_to(root).parts)):
        raise WorkflowCodeError(
            f"workflow_source: {entry} leads to {real}, outside the folder or to a "
            "skipped name; only files inside the workflow folder ship"
        )
    return real


def _check_top_level_name(name: str, entry: Path) -> None:
    if name == "functions":
        raise WorkflowCodeError(
            f"workflow_source: {entry} would replace the receiver's own package "
            "'functions'; rename it"
        )
    if name in sys.stdlib_module_names:
        raise WorkflowCodeError(
            f"workflow_source: {entry} would replace the standard library module "
            f"{name!r}; rename it"
        )


def _package_files(
    directory: Path, root: Path, *, visited: set[Path]
) -> Iterator[tuple[str, Path]]:
    """(path relative to ``directory``, real path) of each regular file to ship.

    ``visited`` holds the real folders walked already, so a link back up cannot loop.
    """
    for path in sorted(directory.iterdir()):
        if _skipped(path.name):
            continue
        real = _contained(path, root)
        if real.is_dir():
            if real in visited:
                continue
            for relative, file in _package_files(path, root, visited=visited | {real}):
                yield f"{path.name}/{relative}", file
        elif real.is_file():  # a regular file: never a FIFO, socket or device
            yield path.name, real


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
