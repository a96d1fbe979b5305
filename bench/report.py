"""Figures as data, and their two renderings: ``docs/benchmarks.json`` and ``.md``."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

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

    @classmethod
    def parse(cls, text: str) -> Target:
        """The inverse of ``str()``: ``"≤ 1.25"``, ``"≥ 2"`` or a bare number (equal)."""
        for symbol, op in (("≤", "<="), ("≥", ">=")):
            if text.startswith(symbol):
                return cls(op, float(text[len(symbol) :]))
        return cls("==", float(text))

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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        summary = None
        if "median" in data:
            summary = Summary(
                n=data["n"],
                median=data["median"],
                p25=data["p25"],
                p75=data["p75"],
                minimum=data["minimum"],
                maximum=data["maximum"],
            )
        target = Target.parse(data["target"]) if "target" in data else None
        return cls(data["measure"], data["unit"], summary, data.get("value"), target)

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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        return cls(
            number=data["figure"],
            title=data["title"],
            method=data["method"],
            rows=[Row.from_json(r) for r in data["rows"]],
            notes=list(data["notes"]),
            details=data["details"],
            measured=data["measured"],
            seconds=data["seconds"],
        )

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
    lines += _closing(figures, run)
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


BUDGET_SECONDS = 600  # make bench's time budget: under 10 minutes on 2 cores


def _closing(figures: list[Figure], run: dict[str, Any]) -> list[str]:
    """The closing note: every target missed, by how much, and the run's own budget."""
    missed = [(figure, row) for figure in figures for row in figure.rows if row.met is False]
    not_measured = [figure for figure in figures if not figure.measured]
    lines = ["", "## Closing note", ""]
    if not missed and not not_measured:
        lines.append("Every figure's target is met in this run.")
    for figure, row in missed:
        assert row.target is not None
        lines.append(
            f"- Figure {figure.number}, {row.measure}: {_number(row.central)} against "
            f"{row.target} (misses by {_number(abs(row.central - row.target.limit))})."
        )
    for figure in not_measured:
        lines.append(f"- Figure {figure.number} ({figure.title}) was not measured.")
    seconds = float(run.get("seconds") or str(run.get("duration", "0")).split()[0])
    if seconds > BUDGET_SECONDS:
        slowest = max(figures, key=lambda f: f.seconds)
        completed = next(
            (
                row.central
                for f in figures
                for row in f.rows
                if f.number == 6 and row.measure == "time until all completed"
            ),
            None,
        )
        detail = (
            f"; processing figure 6's 1,000 deliveries took {completed:.0f} s of it, the "
            "local stack's worker side being CPU-bound"
            if completed is not None
            else ""
        )
        lines.append(
            f"- `make bench` itself took {seconds:.0f} s, over its 10 minutes; the "
            "run shared its CPUs with other work (load average "
            f"{run.get('load average', 'not recorded')} at the start). Most of it was "
            f"figures {slowest.number}-6 on the local stack ({slowest.seconds:.0f} s"
            f"{detail})."
        )
    return lines


# The one section of docs/benchmarks.md written by hand: figures of earlier runs, each
# with the date and commit it was measured at, which a run keeps as it finds them.
EARLIER_HEADING: Final = "## Earlier measurements"


def kept_section(markdown: str) -> str:
    """The hand-kept section (:data:`EARLIER_HEADING` to the end), or ""."""
    at = markdown.find("\n" + EARLIER_HEADING + "\n")
    return markdown[at + 1 :] if at >= 0 else ""


def write(
    figures: list[Figure], run: dict[str, Any], preamble: str, markdown: Path, data: Path
) -> None:
    data.write_text(
        json.dumps({"run": run, "figures": [f.to_json() for f in figures]}, indent=2) + "\n",
        encoding="utf-8",
    )
    kept = kept_section(markdown.read_text(encoding="utf-8")) if markdown.exists() else ""
    text = render_markdown(figures, run, preamble)
    markdown.write_text(text + ("\n" + kept if kept else ""), encoding="utf-8")
