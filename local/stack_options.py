"""How to run the local stack: ports, secrets, faults, and timings compressed against the
deployed stack's (``docs/local.md`` lists how)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from functions.core import settings_table
from local.kill_point import KillPoint
from local.model_script import ModelScript

AGENT_WORKFLOW = "agent"


@dataclass(frozen=True, slots=True)
class StackOptions:
    """How to run the local stack. Timings are compressed against the deployed stack's."""

    port: int = 0  # the front door's; 0 picks a free one
    signing_secrets: tuple[str, ...] = ()  # empty: generate one
    mcp_token: str | None = None  # None: generate one
    mcp_latency_ms: int = 0
    mcp_failure_rate: float = 0.0
    seed: int = 0
    state_file: str | None = None
    aws_fault_rate: float = 0.0  # DynamoDB requests answered with a throttle or 500
    relay_failure_rate: float = 0.0  # relay invocations that fail before the handler
    worker_concurrency: int = 2
    # Receiver processes behind the front door (Lambda environments; each runs 10
    # invocations at once). One is enough for tests; a burst needs the cores.
    front_door_containers: int = 1
    max_attempts: int = settings_table.WORKER_MAX_ATTEMPTS.default
    mcp_timeout_seconds: int = 2
    # A message starts only while the invocation has the MCP fetch's bound (12 s at a 2 s
    # timeout) plus this left, and the emulated invocation has 60 s.
    workflow_seconds: int = 10  # deployed: 60
    lease_seconds: int = 6  # deployed: 900
    visibility_timeout_seconds: int = 8  # deployed: 1081; must exceed the lease
    retry_base_seconds: int = 1  # deployed: 15
    reconcile_interval_seconds: float = 5.0  # deployed: every 5 minutes
    secrets_max_age_seconds: int = settings_table.SECRETS_MAX_AGE_SECONDS.default
    log_level: str = "INFO"
    receiver_clock_start: int | None = None  # replaying recorded requests (test vectors)
    receiver_clock_frozen: bool = False  # ... at their exact boundaries
    run_dir: str | None = None  # logs and checkpoints; None: a temporary directory
    # Deployed default: archive. Locally notify, whose effects the notify sink counts.
    workflow: str = "notify"
    workflow_settings: Mapping[str, str] = field(default_factory=dict)  # WORKFLOW_SETTINGS
    workflow_source: str | None = None  # a folder put first on the worker's import path
    bedrock_latency_ms: int = 0  # added to every model call (agent workflow)
    model_max_tokens: int = 256
    daily_token_budget: int = 100_000_000  # high: a budget stop is not what a run tests
    model_script: ModelScript | None = None  # what the Bedrock emulator answers
    kill_worker: KillPoint | None = None  # SIGKILL the worker once, there
    # Also send every span to this OTLP/HTTP endpoint (a team's Jaeger, Tempo, ...);
    # the run dir's span file keeps them either way.
    otlp_endpoint: str | None = None
    # The deployed trace_sample_percent. 100: locally every delivery's spans are kept
    # (the run dir's span file and ``inbox show --trace`` follow the same decision).
    trace_sample_percent: int = settings_table.TRACE_SAMPLE_PERCENT.default

    @property
    def agent(self) -> bool:
        """Whether the worker runs the agent workflow (it needs Bedrock and an alert topic)."""
        return self.workflow == AGENT_WORKFLOW

    @property
    def model(self) -> bool:
        """Whether the stack serves a model (the Bedrock emulator): the agent workflow,
        or any workflow given a model script."""
        return self.agent or self.model_script is not None

    def __post_init__(self) -> None:
        if not self.lease_seconds < self.visibility_timeout_seconds:
            raise ValueError("the lease must be shorter than the visibility timeout")
        if self.front_door_containers < 1:
            raise ValueError("the front door needs at least one container")
        for rate in (self.mcp_failure_rate, self.aws_fault_rate, self.relay_failure_rate):
            if not 0.0 <= rate <= 1.0:
                raise ValueError("rates are fractions between 0 and 1")
