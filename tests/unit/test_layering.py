"""Dependencies run one way: functions ← infra ← local, ops ← bench; tests use them all.

Read off the source with ``ast`` (no imports executed), so a stray import in any
module — even inside a function — fails here rather than in a reviewer's head.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> the repository packages it must never import
FORBIDDEN: dict[str, frozenset[str]] = {
    "functions": frozenset({"infra", "local", "ops", "bench", "tests"}),
    "infra": frozenset({"local", "ops", "bench", "tests"}),
    "local": frozenset({"ops", "bench", "tests"}),
    "ops": frozenset({"bench", "tests"}),
    "bench": frozenset({"tests"}),
}


def _modules(package: str) -> Iterator[Path]:
    yield from sorted((ROOT / package).rglob("*.py"))


def _imported_roots(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_downstream(package: str) -> None:
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {root}"
        for path in _modules(package)
        for line, root in _imported_roots(path)
        if root in FORBIDDEN[package]
    ]
    assert offences == []


def test_pure_core_does_not_import_aws_sdk() -> None:
    """Only adapters know boto3/botocore; the use cases stay testable with fakes."""
    core = ROOT / "functions" / "core"
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {root}"
        for path in sorted(core.rglob("*.py"))
        if "adapters" not in path.relative_to(core).parts
        for line, root in _imported_roots(path)
        if root in {"boto3", "botocore"}
    ]
    assert offences == []
