"""Every third-party module the code imports comes from a distribution its install declares.

``functions/`` runs on ``[project] dependencies`` alone (the Lambda assets are built
from them), ``infra/`` and ``app.py`` add ``[infra]``, ``local/`` adds ``[local]``,
``cli/`` and ``ops/`` are the base CLI, and ``bench/`` and ``tests/`` run in the development
install (``[dev]``, which takes in the other extras). Imports under
``if TYPE_CHECKING:`` never run; only mypy reads them, so they belong to ``[dev]``.
Modules are mapped to distributions by the installed metadata, so an import name
that differs from its distribution's name (``jwt``, ``yaml``) is still recognised.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

from infra.bundle import third_party_imports

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]
# The build backend runs in the build's environment, from ``[build-system] requires``.
BUILD_BACKEND = ROOT / "infra" / "distribution.py"
OURS = frozenset(
    {"functions", "cli", "infra", "local", "ops", "bench", "tests", "bootstrap", "examples"}
)

# Where the code lives -> the extras, beyond the base dependencies, it runs with.
EXTRAS: dict[str, tuple[str, ...]] = {
    "functions": (),
    "infra": ("infra",),
    "app.py": ("infra",),
    # make runs it on the system's python3 before any venv exists: standard library only.
    "bootstrap.py": (),
    "cli": (),
    "local": ("local",),
    "ops": (),
    "bench": ("dev",),
    "tests": ("dev",),
}
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(line: str) -> tuple[str, list[str]]:
    """A requirement line's distribution name (normalised) and the extras it asks for."""
    match = _REQUIREMENT.match(line)
    assert match is not None, line
    extras = [extra.strip() for extra in (match.group(2) or "").split(",") if extra.strip()]
    return _normalised(match.group(1)), extras


def declared(extras: Iterable[str]) -> set[str]:
    """The distributions of the base install plus ``extras``, following the project's
    references to its own extras (``relaylink-receiver[infra,local]``)."""
    names = {_requirement(line)[0] for line in PROJECT["dependencies"]}
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in PROJECT["optional-dependencies"][extra]:
            name, nested = _requirement(line)
            if name == _normalised(PROJECT["name"]):
                pending.extend(nested)
            else:
                names.add(name)
    return names


def _files(where: str) -> list[Path]:
    path = ROOT / where
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [file for file in files if file != BUILD_BACKEND]


def _undeclared(modules: Iterable[str], allowed: set[str]) -> dict[str, list[str]]:
    """Each module that no allowed distribution provides -> the distributions that do."""
    providers = packages_distributions()
    return {
        module: providers.get(module, [])
        for module in sorted(set(modules) - OURS)
        if not {_normalised(d) for d in providers.get(module, [])} & allowed
    }


@pytest.mark.parametrize("where", sorted(EXTRAS))
def test_every_run_time_import_is_declared_for_its_install(where: str) -> None:
    imported = third_party_imports(_files(where))
    assert _undeclared(imported, declared(EXTRAS[where])) == {}


def test_the_build_backend_imports_only_what_the_build_requires() -> None:
    build_requires = {_requirement(line)[0] for line in PYPROJECT["build-system"]["requires"]}
    assert _undeclared(third_party_imports([BUILD_BACKEND]), build_requires) == {}
    assert _undeclared(third_party_imports([BUILD_BACKEND]), set()) != {}  # it imports one


@pytest.mark.parametrize("where", sorted(EXTRAS))
def test_every_type_checking_import_is_a_development_dependency(where: str) -> None:
    imported = third_party_imports(_files(where), type_checking=True)
    assert _undeclared(imported, declared(["dev"])) == {}


def test_requirement_lines_and_self_references_are_read() -> None:
    assert _requirement("moto[server,sqs]>=5.1") == ("moto", ["server", "sqs"])
    assert _requirement("aws_lambda_powertools>=3.0") == ("aws-lambda-powertools", [])
    assert {"aws-cdk-lib", "moto", "pytest", "boto3"} <= declared(["dev"])
    assert "moto" not in declared(["infra"])
