"""The settings table is the one place a setting's default and bounds are written.

Read off the source with ``ast``: outside ``functions/core/settings_table.py``, no code in
``infra/`` or ``functions/`` binds a number literal to a name that is a setting's
(its context key, its variable, or the key without its ``worker_``/``reconcile_``
prefix, as the functions' own settings name their fields), and no bounded reader
(``BoundedInteger``, ``integer``, ``_integer``) is given a literal default or bound.
The shipped workflows' own settings (``functions/workflows``) are their own table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from functions.core import settings_table
from functions.core.workflow import read_workflow_settings
from functions.workflows.wiring import SHIPPED
from infra.config import StackConfig

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "functions" / "core" / "settings_table.py"
_READERS = frozenset({"BoundedInteger", "integer", "_integer", "_bounded"})
_BOUNDS = frozenset({"default", "low", "high"})


def _names(setting: settings_table.Setting) -> set[str]:
    names = {setting.key, setting.key.removeprefix("worker_").removeprefix("reconcile_")}
    if setting.env is not None and not isinstance(setting, settings_table.WorkflowSetting):
        names.add(setting.env.lower())
    return names


SETTING_NAMES = frozenset(
    name
    for setting in settings_table.SETTINGS
    if isinstance(setting, settings_table.Integer | settings_table.OptionalInteger)
    for name in _names(setting)
)


def _referenced_by_the_table() -> frozenset[str]:
    """``NAME`` of each ``module.NAME`` the table reads: a limit written once where it
    belongs (``event_source_limits.WORKER_BATCH_SIZE``), which the table names."""
    tree = ast.parse(TABLE.read_text(encoding="utf-8"))
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    )


REFERENCED = _referenced_by_the_table()


def _sources() -> Iterator[Path]:
    for package in ("infra", "functions"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != TABLE and "workflows" not in path.relative_to(ROOT).parts:
                yield path


def _number(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def _bound_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def _offences(path: Path, root: Path = ROOT) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(root)
    for node in ast.walk(tree):
        bound: list[tuple[str | None, ast.AST | None]] = []
        if isinstance(node, ast.Assign):
            bound = [(_bound_name(target), node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign):
            bound = [(_bound_name(node.target), node.value)]
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            bound = [
                (arg.arg, default)
                for arg, default in zip(positional[::-1], node.defaults[::-1], strict=False)
            ]
            bound += [
                (arg.arg, default)
                for arg, default in zip(node.kwonlyargs, node.kw_defaults, strict=True)
            ]
        elif isinstance(node, ast.Call):
            bound = [(keyword.arg, keyword.value) for keyword in node.keywords]
            if _bound_name(node.func) in _READERS:
                yield from (
                    f"{where}:{node.lineno} {keyword.arg}= of {_bound_name(node.func)}"
                    for keyword in node.keywords
                    if keyword.arg in _BOUNDS and _number(keyword.value)
                )
        for name, value in bound:
            if (
                name is not None
                and name not in REFERENCED
                and name.lower().lstrip("_") in SETTING_NAMES
                and _number(value)
            ):
                yield f"{where}:{getattr(value, 'lineno', '?')} {name} = a literal"


def test_no_setting_default_or_bound_is_written_outside_the_table() -> None:
    offences = [offence for path in _sources() for offence in _offences(path)]
    assert offences == []


def test_the_check_sees_a_default_written_twice(tmp_path: Path) -> None:
    # The scan itself: each form a second default or bound took before the table.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "worker_memory_mb: int = 256\n"
        "def f(lease_seconds=900): ...\n"
        "_integer(context, KEY, 5, low=2, high=1000)\n"
        "env(INBOX_RETENTION_DAYS=14)\n",
        encoding="utf-8",
    )
    found = list(_offences(sample, tmp_path))
    assert len(found) == 5, found


def test_each_key_and_variable_is_one_row() -> None:
    keys = [setting.key for setting in settings_table.SETTINGS]
    assert len(keys) == len(set(keys))
    variables = [
        setting.env
        for setting in settings_table.SETTINGS
        if setting.env is not None and not isinstance(setting, settings_table.WorkflowSetting)
    ]
    assert len(variables) == len(set(variables))


@pytest.mark.parametrize(
    "setting",
    [s for s in settings_table.SETTINGS if isinstance(s, settings_table.Integer)],
    ids=lambda setting: setting.key,
)
def test_each_default_lies_within_its_bounds(setting: settings_table.Integer) -> None:
    assert setting.low <= setting.default <= setting.high
    assert not setting.choices or setting.default in setting.choices
    if setting.env is not None:
        reader = setting.env_integer()
        assert reader.read({}) == setting.env_default
        assert reader.read({reader.name: str(reader.high)}) == reader.high


def test_every_context_row_is_a_field_of_the_stack_config() -> None:
    fields = set(StackConfig.__dataclass_fields__) - {"workflow_settings"}
    rows = {
        s.key
        for s in settings_table.SETTINGS
        if s.context
        and not isinstance(s, settings_table.WorkflowSetting)
        and s is not settings_table.WORKFLOW_SETTINGS
    }
    assert rows == fields


def test_the_defaults_are_the_stacks_defaults() -> None:
    config = StackConfig()
    for setting in settings_table.SETTINGS:
        if isinstance(setting, settings_table.Integer | settings_table.Text) and setting.context:
            assert getattr(config, setting.key) == setting.default, setting.key


def test_derived_values_follow_the_worker_timeout() -> None:
    timeout = settings_table.WORKER_TIMEOUT_SECONDS.default
    lease = settings_table.lease_seconds(timeout)
    assert lease == settings_table.WORKER_LEASE_SECONDS.default
    assert timeout < lease < settings_table.effect_age_seconds(lease)
    assert settings_table.received_age_seconds(pending_age_seconds=60, lease=lease) == 60
    assert settings_table.received_age_seconds(pending_age_seconds=10**6, lease=lease) == lease


def test_a_shipped_workflows_settings_are_read_by_its_own_class() -> None:
    assert read_workflow_settings("archive", {}, shipped=SHIPPED) is None
    assert read_workflow_settings("mymod:build", {"anything": "x"}, shipped=SHIPPED) is None
    agent = read_workflow_settings("agent", {"model_id": "m"}, shipped=SHIPPED)
    assert agent is not None and agent.bedrock_model_ids == ("m",)
    with_endpoint = read_workflow_settings(
        "agent", {"model_id": "m", "bedrock_endpoint_url": "http://127.0.0.1:1"}, shipped=SHIPPED
    )
    assert with_endpoint is not None and with_endpoint.bedrock_model_ids == ()


def test_a_row_is_frozen_and_is_its_own_only_equal() -> None:
    row = settings_table.INBOX_RETENTION_DAYS
    with pytest.raises(AttributeError, match="frozen"):
        row.default = 1
    with pytest.raises(AttributeError, match="frozen"):
        del row.low
    twin = settings_table.Integer(
        key=row.key, doc=row.doc, default=row.default, low=row.low, high=row.high
    )
    assert twin != row and row == row  # compared by identity: one row per setting
    assert row.default == 14 and row.env_integer().name == "INBOX_RETENTION_DAYS"
    assert "inbox_retention_days" in repr(row)
