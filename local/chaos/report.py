"""The figures of a run and the invariants it broke, typed; the JSON report and the table.

The JSON keys (:meth:`ChaosReport.to_dict`) are a public interface: ``make chaos
--report`` files and docs/reliability.md read them. Field order is key order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from local.chaos.config import ChaosConfig
from local.chaos.load import LoadRecord
from local.chaos.plan import LoadPlan


@dataclass(frozen=True, slots=True)
class DeliveryCounts:
    genuine: int
    shared_package: int  # deliveries of a package delivered several times
    shared_packages: int  # such packages
    missing_package: int
    duplicated_by_sender: int
    conflicting: int
    forged: int
    replayed: int

    @classmethod
    def of(cls, plan: LoadPlan, load: LoadRecord) -> DeliveryCounts:
        return cls(
            genuine=len(load.genuine),
            shared_package=sum(len(ids) for ids in plan.shared_packages.values()),
            shared_packages=len(plan.shared_packages),
            missing_package=len(plan.missing_ids),
            duplicated_by_sender=sum(any(a.extra for a in r.attempts) for r in load.genuine),
            conflicting=len(plan.conflicts),
            forged=len(plan.forged),
            replayed=len(plan.replayed),
        )


@dataclass(frozen=True, slots=True)
class AttemptCounts:
    """HTTP requests sent."""

    total: int
    genuine: int
    genuine_retries: int
    duplicates: int
    adversarial: int

    @classmethod
    def of(cls, load: LoadRecord) -> AttemptCounts:
        genuine = sum(len(r.attempts) for r in load.genuine)
        duplicates = sum(1 for r in load.genuine for a in r.attempts if a.extra)
        return cls(
            total=genuine + load.adversarial_attempts,
            genuine=genuine,
            genuine_retries=genuine - duplicates - len(load.genuine),
            duplicates=duplicates,
            adversarial=load.adversarial_attempts,
        )


@dataclass(frozen=True, slots=True)
class AnswerCounts:
    """Answers by HTTP status (or ``timeout``, ``connection_error``), per kind of request."""

    genuine: dict[str, int]
    conflicting: dict[str, int]
    forged: dict[str, int]
    replayed: dict[str, int]

    @classmethod
    def of(cls, load: LoadRecord) -> AnswerCounts:
        genuine: Counter[str] = Counter()
        for result in load.genuine:
            genuine.update(result.answers)
        return cls(
            genuine=dict(sorted(genuine.items())),
            conflicting=dict(Counter(answer.answer for _, answer in load.conflicting)),
            forged=dict(Counter(a.answer for a in load.forged)),
            replayed=dict(Counter(a.answer for a in load.replayed)),
        )


@dataclass(frozen=True, slots=True)
class KillCount:
    sent: int
    survived: int


@dataclass(frozen=True, slots=True)
class FaultCounts:
    """Faults the run really injected."""

    dynamodb_throttling: int
    dynamodb_internal_error: int
    mcp_unavailable: int
    mcp_slow: int
    relay_failure: int


@dataclass(frozen=True, slots=True)
class Durations:
    """Seconds, rounded to a tenth."""

    load: float
    until_quiet: float
    total: float


@dataclass(frozen=True, slots=True)
class ChaosReport:
    """The figures of a run and the invariants it broke (none: it passed)."""

    config: ChaosConfig
    deliveries: DeliveryCounts
    attempts: AttemptCounts
    answers: AnswerCounts
    kills: dict[str, KillCount]  # by role
    faults: FaultCounts
    outcomes: dict[str, int]  # inbox states of the genuine deliveries
    items_by_worker_attempts: dict[str, int]
    max_attempts: int
    effects_applied: int
    lost: int
    duplicated: int  # effects applied more than once, counted beyond the first
    quarantined: int
    stored_forged_or_replayed: int
    queues: dict[str, int]  # messages left, by queue
    relay_failure_queue_messages: int
    worker_attempts: dict[str, int]  # by result, a retry by its error code
    mcp_server_errors_on_abandoned_requests: int
    seconds: Durations
    violations: list[str]
    # Per effect name: deliveries with it applied once, never (completed), more than once.
    effects: dict[str, dict[str, int]] = field(default_factory=dict)
    model: dict[str, int] = field(default_factory=dict)  # the agent workflow's model step
    # With --kill-worker: the point, and the worker pid it killed (0: it never fired).
    kill_point: dict[str, str | int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def figures(self) -> dict[str, Any]:
        """Everything but the verdict, as plain JSON values."""
        figures = asdict(self)
        del figures["violations"]
        return figures

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, **self.figures, "violations": list(self.violations)}

    def table(self) -> str:
        """The figures as an aligned two-column table, violations listed after it."""
        d = self.deliveries
        rows: list[tuple[str, Any]] = [
            ("deliveries (genuine)", d.genuine),
            ("  of which one package, several deliveries", d.shared_package),
            ("  of which missing packages", d.missing_package),
            ("  of which duplicated by the sender", d.duplicated_by_sender),
            ("conflicting bodies (same id)", d.conflicting),
            ("forged signatures", d.forged),
            ("replays past the tolerance", d.replayed),
            ("attempts (HTTP requests)", self.attempts.total),
        ]
        rows += [(f"answers, {kind}", n) for kind, n in asdict(self.answers).items()]
        rows += [
            (f"kills survived, {role}", f"{kills.survived} of {kills.sent}")
            for role, kills in self.kills.items()
        ]
        rows += [(f"faults injected, {kind}", n) for kind, n in asdict(self.faults).items()]
        if self.kill_point:
            pid = self.kill_point["killed_pid"]
            fired = f"killed worker pid {pid}" if pid else "never reached"
            rows.append((f"kill point {self.kill_point['point']}", fired))
        rows += [
            ("inbox states", self.outcomes),
            ("worker attempts", self.worker_attempts),
            (f"items by attempts (of {self.max_attempts})", self.items_by_worker_attempts),
            ("effects applied", self.effects_applied),
            ("lost", self.lost),
            ("duplicated effects", self.duplicated),
            ("quarantined", self.quarantined),
            ("stored forged or replayed", self.stored_forged_or_replayed),
            ("queues at the end", self.queues),
            ("relay failure queue (recovered)", self.relay_failure_queue_messages),
        ]
        rows += [(f"effect {name}", counts) for name, counts in self.effects.items()]
        if self.model:
            rows.append(("model step", self.model))
        rows += [(f"time, {phase} (s)", s) for phase, s in asdict(self.seconds).items()]
        width = max(len(label) for label, _ in rows)
        lines = [f"{label.ljust(width)}  {_text(value)}" for label, value in rows]
        verdict = "PASSED: no violation" if self.passed else f"FAILED: {len(self.violations)}"
        lines.append(verdict)
        lines.extend(f"  - {v}" for v in self.violations[:50])
        if len(self.violations) > 50:
            lines.append(f"  ... and {len(self.violations) - 50} more (see the report)")
        return "\n".join(lines)


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"
    return str(value)
