"""The faults a simulated seed can inject, and where each one is injected.

A fault is one decision at one call boundary: ``site`` names the boundary (a port's
method, a far side's request, a configuration choice), ``call`` is the boundary's own
call counter (1-based; 0 for a configuration fault), ``kind`` what happens there and
``value`` its parameter (seconds of skew, a budget, an outage's length). Keyed by site
and call, a fault stays where it was when other faults are removed, which is what the
shrinker needs (:mod:`local.simulate.shrink`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Kind(StrEnum):
    """What happens at a call boundary (docs/simulation.md has the table)."""

    ERROR = "error"  # the call fails before anything is written or acted on
    LOST_ANSWER = "lost_answer"  # the write committed, the caller sees a failure
    SDK_RETRY = "sdk_retry"  # the write committed, the answer was lost, the SDK sent it again
    KILL_BEFORE = "kill_before"  # the process dies before the call
    KILL_AFTER = "kill_after"  # the process dies after the call committed
    DUPLICATE = "duplicate"  # a message (or a delivery) arrives twice
    SLOW = "slow"  # the call takes long enough to end the invocation (a timeout)
    REFUSED = "refused"  # far side: the connection never opened
    REJECTED = "rejected"  # far side: a definite "no" (4xx), nothing done
    UNAVAILABLE = "unavailable"  # far side: 503/throttled before acting
    ACTED_THEN_FAILED = "acted_then_failed"  # far side: acted, then answered 5xx
    ACTED_ANSWER_LOST = "acted_answer_lost"  # far side: acted, the answer never came
    CLOCK_SKEW = "clock_skew"  # configuration: a process's clock is off by ``value`` s
    TINY_BUDGET = "tiny_budget"  # configuration: the daily budget is ``value`` tokens
    TIGHT_BUDGET = "tight_budget"  # configuration: a budget of a few calls
    OUTAGE = "outage"  # configuration: a far side is down for ``value`` seconds
    NO_DEDUP = "no_dedup"  # configuration: the far side does not deduplicate on the key
    DAYS_PASS = "days_pass"  # noqa: S105 (a fault kind, not a secret); configuration: ``value`` seconds pass, TTL deletes, late operator
    OPERATOR = "operator"  # configuration: an operator visit at ``value`` s (action bits)
    OTHER_BYTES = "other_bytes"  # RelayLink (or a forger with the secret): other bytes, known id
    # A worker process stalls past its lease right after a read, and the other worker
    # container takes the delivery over (a copy of its message) before it goes on.
    OVERLAP = "overlap"
    # Configuration: the MCP server answers a package id with other content from its
    # second fetch on (packages are not immutable: docs/contract.md).
    PACKAGE_CHANGES = "package_changes"
    # Configuration: the agent's alert waits for a person (``value``: the timeout, s).
    APPROVAL = "approval"
    # Configuration: what a person does about one approval (local/simulate/approvals.py).
    DECISION = "decision"
    # Configuration: the agent offers the model an acting tool (``keyed``) that waits too.
    TOOLS = "tools"


@dataclass(frozen=True, slots=True, order=True)
class Fault:
    site: str
    call: int
    kind: Kind
    value: int = 0

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.site}#{self.call}:{self.kind.value}{value}"

    def to_dict(self) -> dict[str, object]:
        return {"site": self.site, "call": self.call, "kind": self.kind.value, "value": self.value}


# The summary's fault counts: each kind under the key the report names it by.
SUMMARY_KEYS: Final = {
    Kind.ERROR: "errors",
    Kind.LOST_ANSWER: "lost_answers",
    Kind.SDK_RETRY: "lost_answers",
    Kind.ACTED_ANSWER_LOST: "lost_answers",
    Kind.KILL_BEFORE: "kills",
    Kind.KILL_AFTER: "kills",
    Kind.DUPLICATE: "duplicates",
    Kind.SLOW: "slow_calls",
    Kind.REFUSED: "far_side_refused",
    Kind.REJECTED: "far_side_rejected",
    Kind.UNAVAILABLE: "far_side_unavailable",
    Kind.ACTED_THEN_FAILED: "acted_then_failed",
    Kind.CLOCK_SKEW: "clock_skew",
    Kind.TINY_BUDGET: "budget_limits",
    Kind.TIGHT_BUDGET: "budget_limits",
    Kind.OUTAGE: "outages",
    Kind.NO_DEDUP: "far_sides_without_dedup",
    Kind.DAYS_PASS: "days_passed",
    Kind.OPERATOR: "operator_visits",
    Kind.OTHER_BYTES: "other_bytes_sent",
    Kind.OVERLAP: "overlapping_attempts",
    Kind.PACKAGE_CHANGES: "packages_changing",
    Kind.APPROVAL: "approvals_configured",
    Kind.DECISION: "decisions",
    Kind.TOOLS: "acting_tools",
}
# Counted by the world as they happen rather than drawn: TTL deletions and timeouts.
EXPIRY: Final = "expiry"
TIMEOUTS: Final = "timeouts"
SDK_RETRIES: Final = "sdk_retries"


class Killed(BaseException):
    """The process died (a kill, or the invocation's timeout).

    A ``BaseException``: the code under test must not catch it, as it cannot catch a
    SIGKILL; it unwinds the invocation and the world writes nothing more for it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
