"""One fault-injection run's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# How long a killed process may take to serve again, during the load and at the end.
RESTART_DEADLINE_SECONDS: Final = 60.0
STALL_SECONDS: Final = 120.0


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """One run. Rates are fractions; ``time_scale`` divides the sender's back-off.

    ``deadline_seconds`` bounds the wait for quiet after the load; a run that is not
    quiet by then is a violation. During the load, a part waiting for its moment
    stops waiting once no effect has been applied for ``STALL_SECONDS``.
    """

    deliveries: int = 500
    kills: int = 5
    seed: int = 0
    mcp_failure_rate: float = 0.1
    mcp_slow_rate: float = 0.02
    aws_fault_rate: float = 0.02
    relay_failure_rate: float = 0.05
    time_scale: float = 100.0
    deadline_seconds: float = 600.0
    concurrency: int = 16
    backlog: int = 100  # deliveries acknowledged ahead of the effects at most
    # Worker attempts of unknown outcome per item (deployed: 5): an attempt a kill ended,
    # or an unexpected exception. The injected faults are known-transient: retried
    # within the horizon without using these (docs/reliability.md, Attempts).
    max_attempts: int = 10
    duplicate_rate: float = 0.1
    adversarial_fraction: float = 0.02  # of deliveries, for each adversarial kind (min 1)
    # An alias or module:factory. As the local stack's (and `chaos --workflow`'s):
    # notify, whose effects the notification target counts (archive has none).
    workflow: str = "notify"
    bedrock_latency_ms: int = 200  # agent workflow: widens the model-call window
    # Agent workflow: the model asks for local.agent_tools' tools (a lookup, then a
    # ticket opened at the notification target, exempted from approval by name),
    # killed inside their windows too.
    tools: bool = False
    model_script: str | None = None  # a model script file the Bedrock emulator answers from
    kill_worker: str | None = None  # a kill point (local.kill_point), fired once

    def __post_init__(self) -> None:
        if self.deliveries < 10:
            raise ValueError("deliveries must be at least 10")
        if self.kills < 0:
            raise ValueError("kills must be >= 0")
        for rate in (
            self.mcp_failure_rate,
            self.mcp_slow_rate,
            self.aws_fault_rate,
            self.relay_failure_rate,
            self.duplicate_rate,
            self.adversarial_fraction,
        ):
            if not 0.0 <= rate <= 1.0:
                raise ValueError("rates are fractions between 0 and 1")
        if self.mcp_failure_rate + self.mcp_slow_rate >= 0.5:
            # Five failed fetches in a row exhaust an item's attempts: `failed`, legitimately.
            raise ValueError("the MCP failure and slow rates together must stay below 0.5")
        if self.time_scale <= 0 or self.deadline_seconds <= 0:
            raise ValueError("time scale and deadline must be positive")
        if self.tools and self.workflow != "agent":
            raise ValueError("tools go with the agent workflow")
        if min(self.concurrency, self.backlog, self.max_attempts) < 1:
            raise ValueError("concurrency, backlog and max attempts must be at least 1")
