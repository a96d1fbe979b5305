"""docs/deploy.md and docs/workflows.md state the defaults and bounds the settings table
holds (functions/core/settings_table.py), and the agent's defaults its settings class holds.

Every Markdown table whose first column is ``key`` and which has a ``default`` column is
checked: for each key of the settings table in a row's first cell, the ``default`` cell
(and the ``bounds`` cell, where the table has one) must read as the table renders it.
docs/deploy.md lists every context setting exactly once. The agent's short-key table
(docs/workflows.md) must start each ``agent default`` with the agent's own default.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from functions.core import settings_table
from functions.workflows.agent import NO_APPROVAL, AgentSettings
from functions.workflows.tool_settings import ToolSettings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/deploy.md", "docs/workflows.md")
ROWS = {setting.key: setting for setting in settings_table.SETTINGS}
# The settings docs/deploy.md documents, each in a row of its own.
DEPLOY_KEYS = frozenset(
    setting.key
    for setting in settings_table.SETTINGS
    if setting.context
    and not isinstance(setting, settings_table.WorkflowSetting)
    and setting is not settings_table.WORKFLOW_SETTINGS
)
_CODE = re.compile(r"`([^`]+)`")


def _tables(text: str) -> Iterator[list[list[str]]]:
    """Each Markdown table: its header, then its rows, as lists of stripped cells."""
    table: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= {"-", " "} for cell in cells):
                table.append(cells)
        elif table:
            yield table
            table = []


def _settings_rows(text: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(key, {column: cell}) for each settings-table key in a key/default table."""
    for header, *rows in _tables(text):
        if not header or header[0] != "key" or "default" not in header:
            continue
        for row in rows:
            cells = dict(zip(header, row, strict=False))
            for key in _CODE.findall(cells["key"]):
                if key in ROWS:
                    yield key, cells


def drift(path: Path) -> list[str]:
    """Where a document's settings tables disagree with the settings table."""
    text = path.read_text(encoding="utf-8")
    found: list[str] = []
    seen: Counter[str] = Counter()
    for key, cells in _settings_rows(text):
        seen[key] += 1
        setting = ROWS[key]
        if cells["default"] != setting.default_text():
            found.append(
                f"{path.name}: {key} default {cells['default']!r}, table {setting.default_text()!r}"
            )
        if "bounds" in cells and cells["bounds"] != setting.bounds_text():
            found.append(
                f"{path.name}: {key} bounds {cells['bounds']!r}, table {setting.bounds_text()!r}"
            )
    if path.name == "deploy.md":
        found += [f"{path.name}: {key} listed {n} times" for key, n in seen.items() if n > 1]
        found += [f"{path.name}: {key} not listed" for key in sorted(DEPLOY_KEYS - set(seen))]
    found += _agent_drift(path.name, text)
    return found


def _agent_drift(name: str, text: str) -> Iterator[str]:
    defaults = {field.name: _default(field) for field in dataclasses.fields(AgentSettings)}
    for header, *rows in _tables(text):
        if header[:3] != ["short key", "setting", "agent default"]:
            continue
        for _short, setting, default in (row[:3] for row in rows):
            (field,) = _CODE.findall(setting)
            shown = default.split()[0].strip("`")
            expected = _as_docs_write(defaults[field])
            if shown != expected:
                yield f"{name}: agent {field} default {shown!r}, its class {expected!r}"


def _default(field: dataclasses.Field[object]) -> object:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _as_docs_write(value: object) -> str:
    """A default as the docs write it: ``none`` for nothing (no approval, no name), ``1440`` for
    1440.0."""
    if value is None or value in (NO_APPROVAL, frozenset(), ToolSettings()):
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_state_the_tables_defaults_and_bounds(doc: str) -> None:
    assert drift(ROOT / doc) == []


def test_a_changed_default_in_a_copy_of_the_docs_is_caught(tmp_path: Path) -> None:
    for doc, before, after in (
        ("deploy.md", "| `worker_memory_mb` | 256 |", "| `worker_memory_mb` | 320 |"),
        ("deploy.md", "| 1 to 100 |", "| 1 to 1000 |"),
        (
            "workflows.md",
            "| `worker_timeout_seconds` | 180 |",
            "| `worker_timeout_seconds` | 120 |",
        ),
        ("workflows.md", "| `max_tokens` | 512 |", "| `max_tokens` | 256 |"),
    ):
        text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
        assert before in text
        copy = tmp_path / doc
        copy.write_text(text.replace(before, after, 1), encoding="utf-8")
        assert len(drift(copy)) == 1, (doc, after)


def test_a_setting_listed_twice_or_not_at_all_is_caught(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    copy = tmp_path / "deploy.md"
    copy.write_text(
        text.replace(
            "| `dashboard` | `false` |",
            "| `tracing` | `true` |  | active X-Ray tracing |\n| `dashboard` | `false` |",
        ).replace("| `reconcile_every_minutes` |", "| reconcile_every_minutes |"),
        encoding="utf-8",
    )
    assert sorted(drift(copy)) == [
        "deploy.md: reconcile_every_minutes not listed",
        "deploy.md: tracing default '`true`', table '`false`'",
        "deploy.md: tracing listed 2 times",
    ]


def test_the_render_lists_every_documented_setting() -> None:
    rendered = settings_table.render()
    assert {key for key, _ in _settings_rows(rendered)} == DEPLOY_KEYS
    assert drift_free(rendered)


def drift_free(text: str) -> bool:
    return all(
        cells["default"] == ROWS[key].default_text() and cells["bounds"] == ROWS[key].bounds_text()
        for key, cells in _settings_rows(text)
    )
