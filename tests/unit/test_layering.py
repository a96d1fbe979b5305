"""Dependencies run one way: functions ← infra ← cli ← local, ops ← bench; tests use them all.

Read off the source with ``ast`` (no imports executed), so a stray import in any
module — even inside a function or under ``TYPE_CHECKING`` — fails here rather than in
a reviewer's head. Besides the five floors: no two modules import each other, however
long the way round; inside ``functions/`` the core sits below its adapters, the
adapters below the workflows, and those below the handlers; and no module names
another of the project's modules in a string (an import no reader or tool can follow).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# package -> the repository packages it must never import
FORBIDDEN: dict[str, frozenset[str]] = {
    "functions": frozenset({"infra", "cli", "local", "ops", "bench", "tests"}),
    "infra": frozenset({"cli", "local", "ops", "bench", "tests"}),
    "cli": frozenset({"local", "ops", "bench", "tests"}),
    "local": frozenset({"ops", "bench", "tests"}),
    "ops": frozenset({"bench", "tests"}),
    "bench": frozenset({"tests"}),
}


# The floors inside ``functions/``, lowest first: a module imports only its own floor
# and the ones below. The ports live in the core, beside the use cases that take them.
FUNCTION_FLOORS: tuple[tuple[str, ...], ...] = (
    ("functions.core",),
    ("functions.core.adapters",),
    ("functions.workflows",),
    ("functions.receiver", "functions.relay", "functions.worker", "functions.reconciler"),
)

# ``module`` or ``module:attribute``, the form an import by name takes.
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")

# Strings that name a project module and are no import in this process, each with why.
NAMED_IN_STRINGS: Mapping[tuple[str, str], str] = {
    ("infra/bundle.py", "functions.worker"): "a package copied whole into the worker asset",
    ("infra/bundle.py", "functions.core"): "a package copied whole into the worker asset",
    ("infra/bundle.py", "functions.workflows"): "a package copied whole into the worker asset",
    ("bench/no_workflow.py", "bench.no_workflow:workflow"): (
        "the WORKFLOW setting's value, as a team names its own workflow"
    ),
    ("local/chaos/run.py", "local.agent_tools:TOOLS"): (
        "the agent workflow's tools setting, as a team names its own tools"
    ),
    ("local/tool_demo.py", "local.agent_tools:CHECKED_TOOLS"): (
        "the agent workflow's tools setting, as a team names its own tools"
    ),
    ("bench/local_figures.py", "bench.baseline.server"): (
        "a peer the bench runs as a process of its own (python -m)"
    ),
    ("bench/local_figures.py", "bench.async_peer.server"): (
        "a peer the bench runs as a process of its own (python -m)"
    ),
    ("bench/local_figures.py", "bench.async_peer.worker"): (
        "a peer the bench runs as a process of its own (python -m)"
    ),
}


def _modules(package: str) -> Iterator[Path]:
    yield from sorted((ROOT / package).rglob("*.py"))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_roots(path: Path) -> Iterator[tuple[int, str]]:
    tree = _tree(path)
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


@cache
def _module_files() -> Mapping[str, Path]:
    """Every module of the five packages by its dotted name (a package by its own)."""
    found: dict[str, Path] = {}
    for package in FORBIDDEN:
        for path in _modules(package):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _project_module(name: str) -> str | None:
    """The project module ``name`` (or the closest package above it) is in, if any."""
    modules = _module_files()
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> Iterator[tuple[int, str]]:
    """The project modules ``module`` imports, wherever the import stands."""
    path = _module_files()[module]
    tree = _tree(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # ``from package import module`` imports the module, else the package's name.
            names = [f"{base}.{alias.name}" for alias in node.names]
            names = [name if name in _module_files() else base for name in names]
        else:
            continue
        for name in names:
            target = _project_module(name)
            if target is not None and target != module:
                yield node.lineno, target


def _import_graph() -> dict[str, set[str]]:
    return {module: {target for _, target in _imports(module)} for module in _module_files()}


def _circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def test_circles_found_through_any_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    """A circle (even of ``TYPE_CHECKING`` imports, type names only) means two modules
    are one concept split in two, or a third one missing (a port both can import)."""
    assert _circles(_import_graph()) == []


def _strings_naming_modules(module: str) -> Iterator[tuple[int, str, str]]:
    """``(line, string, module it names)`` for each string literal naming a project
    module, except docstrings and a program ``python -m`` runs in another process."""
    path = _module_files()[module]
    tree = _tree(path)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring
        if isinstance(node, ast.List | ast.Tuple):
            for before, element in zip(node.elts, node.elts[1:], strict=False):
                if isinstance(before, ast.Constant) and before.value == "-m":
                    skipped.update(id(inner) for inner in ast.walk(element))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
            and _MODULE_NAME.match(node.value)
        ):
            named = _project_module(node.value.partition(":")[0])
            if named is not None and named.count(".") >= node.value.partition(":")[0].count("."):
                yield node.lineno, node.value, named


def test_no_project_module_named_in_a_string() -> None:
    """``importlib.import_module("functions.x")`` hides a dependency from the floors,
    the circles, mypy and a reader: import it, or have the caller pass it in."""
    offences = [
        f"{path.relative_to(ROOT)}:{line} names {text!r}"
        for module, path in _module_files().items()
        for line, text, _ in _strings_naming_modules(module)
        if (str(path.relative_to(ROOT)), text) not in NAMED_IN_STRINGS
    ]
    assert offences == []


def _function_floor(module: str) -> int | None:
    floors = [
        (len(prefix), floor)
        for floor, prefixes in enumerate(FUNCTION_FLOORS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(floors)[1] if floors else None


def test_functions_import_only_their_floor_and_below() -> None:
    """Inside ``functions/``: core ← adapters ← workflows ← handlers. A module named in a
    string counts as imported (it is, at run time)."""
    offences = []
    for module, path in _module_files().items():
        floor = _function_floor(module)
        if floor is None:
            continue
        named = [(line, target) for line, _, target in _strings_naming_modules(module)]
        for line, target in [*_imports(module), *named]:
            target_floor = _function_floor(target)
            if target_floor is not None and target_floor > floor:
                offences.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert offences == []


# What ops may take from local, each with why; its CLI base comes from cli/.
OPS_FROM_LOCAL: Mapping[str, frozenset[str]] = {
    # The one CLI registers the local stack's commands beside the operator's.
    "ops.cli": frozenset(
        {
            "local.commands.chaos",
            "local.commands.demo",
            "local.commands.local_stack",
            "local.commands.send",
            "local.simulate.cli",
        }
    ),
    # The console serves on loopback with the local stack's HTTP server.
    "ops.console.server": frozenset({"local.loopback_http"}),
}


def test_ops_takes_its_cli_base_from_cli_not_local() -> None:
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for module, path in _module_files().items()
        if module.split(".")[0] == "ops"
        for line, target in _imports(module)
        if target.split(".")[0] == "local" and target not in OPS_FROM_LOCAL.get(module, ())
    ]
    assert offences == []


PORTS = "functions.core.ports"


def _takes_ports(module: str) -> bool:
    """Whether ``module`` is a port or uses one (a use case, a service of the core)."""
    return (
        module == PORTS
        or module.startswith(PORTS + ".")
        or any(target == PORTS or target.startswith(PORTS + ".") for _, target in _imports(module))
    )


def test_ports_import_only_ports_and_the_values_they_carry() -> None:
    """A port names protocols and the values they pass (models, claims, packages): it
    never imports a use case or a service that takes ports (the effect ledger, the
    processor). Such an import turns the dependency upside down: the port would change
    whenever the service does; the port names a protocol the service satisfies instead."""
    offences = [
        f"{_module_files()[module].relative_to(ROOT)}:{line} imports {target}"
        for module in _module_files()
        if module.startswith(PORTS + ".")
        for line, target in _imports(module)
        if not target.startswith(PORTS) and _takes_ports(target)
    ]
    assert offences == []
