"""Figures as data, and their two renderings: ``docs/benchmarks.json`` and ``.md``."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.stats import Summary

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
}


@dataclass(frozen=True)
class Target:
    """``value <op> limit``, checked on a row's median (or single value)."""

    op: str
    limit: float

    def met(self, value: float) -> bool:
        return _COMPARE[self.op](value, self.limit)

    def __str__(self) -> str:
        limit = f"{self.limit:g}"
        return (
            limit if self.op == "==" else f"{self.op.replace('<=', '≤').replace('>=', '≥')} {limit}"
        )


@dataclass(frozen=True)
class Row:
    """One measure of a figure: a summary of samples, or a single counted value."""

    measure: str
    unit: str
    summary: Summary | None = None
    value: float | None = None
    target: Target | None = None

    @property
    def central(self) -> float:
        if self.summary is not None:
            return self.summary.median
        assert self.value is not None, self.measure
        return self.value

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.central)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"measure": self.measure, "unit": self.unit}
        if self.summary is not None:
            out.update(self.summary.to_json())
        else:
            out["value"] = self.value
        if self.target is not None:
            out["target"] = str(self.target)
            out["met"] = self.met
        return out


@dataclass
class Figure:
    number: int
    title: str
    method: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    measured: bool = True
    seconds: float = 0.0  # how long the figure took to measure

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.number,
            "title": self.title,
            "measured": self.measured,
            "method": self.method,
            "rows": [r.to_json() for r in self.rows],
            "notes": self.notes,
            "details": self.details,
            "seconds": round(self.seconds, 1),
        }


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def _cells(row: Row) -> list[str]:
    if row.summary is not None:
        s = row.summary
        central = _number(s.median)
        quartiles = f"{_number(s.p25)}-{_number(s.p75)}"
        spread = f"{quartiles} (min {_number(s.minimum)}, max {_number(s.maximum)})"
        n = str(s.n)
    else:
        central, spread, n = _number(row.central), "—", "1"
    target = "—" if row.target is None else str(row.target)
    met = "—" if row.met is None else ("**yes**" if row.met else "**NO**")
    return [row.measure, row.unit, central, spread, n, target, met]


def render_markdown(figures: list[Figure], run: dict[str, Any], preamble: str) -> str:
    lines = [preamble.rstrip(), ""]
    lines += [
        "| run | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in run.items()),
        "",
        "## Targets at a glance",
        "",
        "| figure | measure | median | target | met |",
        "|---|---|---|---|---|",
    ]
    for figure in figures:
        for row in figure.rows:
            if row.target is not None:
                met = "**yes**" if row.met else "**NO**"
                lines.append(
                    f"| {figure.number} | {row.measure} | {_number(row.central)} {row.unit} "
                    f"| {row.target} | {met} |"
                )
        if not figure.measured:
            lines.append(f"| {figure.number} | {figure.title} | not measured | — | — |")
    for figure in figures:
        lines += ["", f"## Figure {figure.number}: {figure.title}", "", figure.method, ""]
        if figure.seconds:
            lines += [f"_Measured in {figure.seconds:.0f} s._", ""]
        if figure.rows:
            lines += [
                "| measure | unit | median | spread: p25-p75 (min, max) | n | target | met |",
                "|---|---|---|---|---|---|---|",
                *("| " + " | ".join(_cells(row)) + " |" for row in figure.rows),
                "",
            ]
        if not figure.measured:
            lines += ["**Not measured in this run.**", ""]
        lines += [f"- {note}" for note in figure.notes]
    return "\n".join(lines).rstrip() + "\n"


def write(
    figures: list[Figure], run: dict[str, Any], preamble: str, markdown: Path, data: Path
) -> None:
    data.write_text(
        json.dumps({"run": run, "figures": [f.to_json() for f in figures]}, indent=2) + "\n",
        encoding="utf-8",
    )
    markdown.write_text(render_markdown(figures, run, preamble), encoding="utf-8")
