"""What a simulation run reports: seeds, violations with their shrunk schedules, faults.

The JSON keys (``--json``) are an interface: ``seeds``, ``violations`` (a list),
``faults`` (by kind; always at least ``lost_answers``, ``expiry``, ``duplicates``,
``kills`` and ``clock_skew``), ``seconds`` and ``seeds_per_second``; added to, never
renamed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from local.simulate.faults import Fault
from local.simulate.shrink import invariant_of

# Always in the summary, zero or not.
REQUIRED_FAULTS: Final = (
    "lost_answers",
    "expiry",
    "duplicates",
    "kills",
    "clock_skew",
    "other_bytes_sent",
    "overlapping_attempts",
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One seed's first violation, with its fault schedule shrunk (when it was)."""

    workflow: str
    seed: int
    violation: str
    others: tuple[str, ...]  # the seed's other violations
    faults: tuple[Fault, ...]  # shrunk, or the whole schedule when not shrunk
    shrunk: bool

    @property
    def invariant(self) -> str:
        return invariant_of(self.violation)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "seed": self.seed,
            "invariant": self.invariant,
            "violation": self.violation,
            "other_violations": list(self.others),
            "schedule_shrunk": self.shrunk,
            # Shrunk schedules only: the seed alone replays the whole one.
            "schedule": [str(fault) for fault in self.faults] if self.shrunk else [],
        }

    def lines(self) -> list[str]:
        kind = "shrunk schedule" if self.shrunk else "schedule (not shrunk)"
        head = f"VIOLATION {self.workflow} seed {self.seed}: {self.violation}"
        return [head, f"  {kind} ({len(self.faults)} faults):"] + [
            f"    {fault}" for fault in self.faults
        ]


@dataclass(slots=True)
class Summary:
    workflows: tuple[str, ...]
    first_seed: int
    seeds: int = 0
    seconds: float = 0.0
    run_seconds: float = 0.0  # without the shrinking
    violations: list[Violation] = field(default_factory=list)
    violating_seeds: int = 0
    by_invariant: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)

    @property
    def passed(self) -> bool:
        return self.violating_seeds == 0

    def to_dict(self) -> dict[str, Any]:
        faults = {key: 0 for key in REQUIRED_FAULTS}
        faults.update(self.faults)
        return {
            "workflows": list(self.workflows),
            "first_seed": self.first_seed,
            "seeds": self.seeds,
            "violating_seeds": self.violating_seeds,
            "violations": [v.to_dict() for v in self.violations],
            "violations_by_invariant": dict(sorted(self.by_invariant.items())),
            "faults": dict(sorted(faults.items())),
            "seconds": round(self.seconds, 2),
            "run_seconds": round(self.run_seconds, 2),
            "seeds_per_second": self.rate,
        }

    @property
    def rate(self) -> float:
        """Seeds per second of the runs (shrinking left out)."""
        return round(self.seeds / self.run_seconds, 1) if self.run_seconds else 0.0

    def text(self) -> str:
        lines: list[str] = []
        for violation in self.violations:
            if violation.shrunk:
                lines += violation.lines()
            else:
                lines.append(
                    f"VIOLATION {violation.workflow} seed {violation.seed}: {violation.violation}"
                )
        lines.append(
            f"{self.seeds} seeds of {', '.join(self.workflows)} from seed {self.first_seed}"
            f" in {self.run_seconds:.1f} s ({self.rate:.0f} seeds/s): {self.violating_seeds}"
            " violating"
        )
        for invariant, count in sorted(self.by_invariant.items()):
            lines.append(f"  {invariant}: {count} seeds")
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.to_dict()["faults"].items()))
        lines.append(f"faults injected: {faults}")
        return "\n".join(lines)


def first_seeds_by_invariant(violations: Sequence[Violation]) -> dict[str, int]:
    """The first seed that broke each invariant."""
    first: dict[str, int] = {}
    for violation in violations:
        for line in (violation.violation, *violation.others):
            first.setdefault(invariant_of(line), violation.seed)
    return dict(sorted(first.items()))
