"""Every setting of the stack, once: its CDK context key, its environment variable, its
type, default and bounds, the functions that read it, and one line of doc.

Infra parses and validates CDK context with these rows (``infra/config.py``) and lists
the keys it accepts from them; each function's settings reader takes its variables'
defaults and bounds from them (``row.env_integer()``); docs/deploy.md and
docs/workflows.md are checked against them (``tests/unit/test_settings_docs.py``;
``python -m functions.core.settings_table --render`` prints the docs' rows). Adding a
setting is one row here, one field of ``infra.config.StackConfig`` (or of the function
settings that read it) and, when it is checked beyond its bounds, one line of
``StackConfig.validate``.

Standard library only, and no workflow code: the receiver imports this at cold start.
Values that follow from settings (the lease, the reconciler's received age) are
computed here too, so that infra and the functions compute them alike.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from functions.core import env_names, event_source_limits, retry_policy, table_layout
from functions.core.env_parsers import BoundedInteger


class Reader(StrEnum):
    """A function whose settings read a setting's environment variable."""

    RECEIVER = "receiver"
    RELAY = "relay"
    WORKER = "worker"
    RECONCILER = "reconciler"


if TYPE_CHECKING:
    from typing import NotRequired, TypedDict, Unpack

    class _Common(TypedDict):
        """The keywords every row takes (:class:`Setting`'s); a kind adds its own."""

        key: str
        doc: str
        env: NotRequired[str | None]
        readers: NotRequired[tuple[Reader, ...]]
        context: NotRequired[bool]


# The rows are plain classes with slots rather than dataclasses: decorating a class
# compiles its generated methods at import, about a millisecond a class on the Lambda
# runtime's Python, and the receiver imports this table at cold start (figure 3).
# Frozen and compared by identity, as ``dataclass(frozen=True, eq=False)`` would make them.
class Setting:
    """One setting.

    Attributes:
        key: The CDK context key (``-c key=value``); for a setting that is not context
            (``context=False``: the stack derives or fixes it) its name.
        doc: One line: what it means.
        env: The environment variable its value reaches the functions in, or None.
        readers: The functions whose settings read ``env``.
        context: Whether a deployer sets it in CDK context.
    """

    __slots__ = ("context", "doc", "env", "key", "readers")
    key: str
    doc: str
    env: str | None
    readers: tuple[Reader, ...]
    context: bool

    def __init__(
        self,
        *,
        key: str,
        doc: str,
        env: str | None = None,
        readers: tuple[Reader, ...] = (),
        context: bool = True,
    ) -> None:
        _fill(self, key=key, doc=doc, env=env, readers=readers, context=context)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: settings are frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: settings are frozen")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r})"

    def default_text(self) -> str:
        """The default as docs/deploy.md writes it."""
        return "unset"

    def bounds_text(self) -> str:
        """The allowed values as docs/deploy.md writes them ("" for no bound)."""
        return ""


def _fill(row: Setting, **values: object) -> None:
    for name, value in values.items():
        object.__setattr__(row, name, value)


class Integer(Setting):
    """An integer from ``low`` to ``high`` (or one of ``choices``).

    Attributes:
        env_scale: The variable carries the value times this (hours as seconds).
        env_low: The variable's own lower bound when it is finer than the context's
            (the local runtime compresses time), else ``low * env_scale``.
    """

    __slots__ = ("choices", "default", "env_low", "env_scale", "high", "low")
    default: int
    low: int
    high: int
    choices: tuple[int, ...]
    env_scale: int
    env_low: int | None

    def __init__(
        self,
        *,
        default: int,
        low: int,
        high: int,
        choices: tuple[int, ...] = (),
        env_scale: int = 1,
        env_low: int | None = None,
        **common: Unpack[_Common],
    ) -> None:
        super().__init__(**common)
        _fill(
            self,
            default=default,
            low=low,
            high=high,
            choices=choices,
            env_scale=env_scale,
            env_low=env_low,
        )

    def default_text(self) -> str:
        return str(self.default)

    def bounds_text(self) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        return f"{self.low} to {self.high}"

    @property
    def env_default(self) -> int:
        """The default in the environment variable's unit."""
        return self.default * self.env_scale

    def env_integer(self) -> BoundedInteger:
        """Its environment variable, with the default and bounds in the variable's unit."""
        low = self.low * self.env_scale if self.env_low is None else self.env_low
        return BoundedInteger(
            _env_name(self), default=self.env_default, low=low, high=self.high * self.env_scale
        )


class OptionalInteger(Setting):
    """An integer from ``low`` to ``high``, or unset (meaning ``unset``).

    Attributes:
        env_default: What the functions take when the variable is not set.
    """

    __slots__ = ("env_default", "high", "low", "unset")
    low: int
    high: int
    unset: str
    env_default: int | None

    def __init__(
        self,
        *,
        low: int,
        high: int,
        unset: str,
        env_default: int | None = None,
        **common: Unpack[_Common],
    ) -> None:
        super().__init__(**common)
        _fill(self, low=low, high=high, unset=unset, env_default=env_default)

    def env_integer(self) -> BoundedInteger:
        """Its environment variable, with its default and bounds."""
        if self.env_default is None:
            raise ValueError(f"{self.key}: no default for its variable")
        return BoundedInteger(
            _env_name(self), default=self.env_default, low=self.low, high=self.high
        )

    def default_text(self) -> str:
        return self.unset

    def bounds_text(self) -> str:
        return f"{self.low} to {self.high}"


class Text(Setting):
    """A non-empty string with a default (one of ``choices`` when given)."""

    __slots__ = ("choices", "default")
    default: str
    choices: tuple[str, ...]

    def __init__(
        self,
        *,
        default: str,
        choices: tuple[str, ...] = (),
        **common: Unpack[_Common],
    ) -> None:
        super().__init__(**common)
        _fill(self, default=default, choices=choices)

    def default_text(self) -> str:
        return f"`{self.default}`"

    def bounds_text(self) -> str:
        return ", ".join(f"`{choice}`" for choice in self.choices)


class Flag(Setting):
    """``true`` or ``false``."""

    __slots__ = ("default",)
    default: bool

    def __init__(
        self,
        *,
        default: bool,
        **common: Unpack[_Common],
    ) -> None:
        super().__init__(**common)
        _fill(self, default=default)

    def default_text(self) -> str:
        return "`true`" if self.default else "`false`"


class Formatted(Setting):
    """Unset by default; its form (an ARN, an e-mail address, a list, a folder) is
    checked by ``infra.config``."""

    __slots__ = ()


class WorkflowSetting(Setting):
    """A short context key for one of a shipped workflow's own settings
    (``workflow_setting_<name>``); that workflow's settings class holds its default and
    bounds and checks it (``functions.core.workflow.read_workflow_settings``)."""

    __slots__ = ("name", "workflow")
    workflow: str
    name: str

    def __init__(
        self,
        *,
        workflow: str,
        name: str,
        **common: Unpack[_Common],
    ) -> None:
        super().__init__(**common)
        _fill(self, workflow=workflow, name=name)


def _env_name(setting: Setting) -> str:
    if setting.env is None:
        raise ValueError(f"{setting.key} has no environment variable")
    return setting.env


_R = Reader
_HOUR: Final = 3600
_DAY: Final = 24 * _HOUR
# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_CHOICES: Final = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731)
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
# A live worker's lease must outlast its invocation, and a message that comes back after
# a crash must find the lease expired: timeout < lease < visibility timeout. Five
# timeouts sits between the two (the visibility timeout is six).
LEASE_FACTOR: Final = 5

STAGE: Final = Text(
    key="stage",
    default="prod",
    doc="part of the stack name; lets you deploy `dev` next to `prod`",
)
MCP_ALLOWED_HOSTS: Final = Formatted(
    key="mcp_allowed_hosts",
    env=env_names.ENV_MCP_ALLOWED_HOSTS,
    readers=(_R.WORKER,),
    doc="hosts (exact or `*.suffix`) the worker may send its MCP token to; required",
)
NOTIFY_URL: Final = Formatted(
    key="notify_url",
    env=env_names.ENV_NOTIFY_URL,
    readers=(_R.WORKER,),
    doc="HTTPS URL the `notify` workflow posts its notification to",
)
ALARM_EMAIL: Final = Formatted(key="alarm_email", doc="address subscribed to the alarm topic")
ALERT_EMAIL: Final = Formatted(
    key="alert_email", doc="address subscribed to the workflow alert topic"
)
# RelayLink retries a delivery for up to 3 days (docs/contract.md): two weeks keep
# every retry deduplicated, with room for the dead-letter queue, whose retention infra
# derives from this (infra.schema.dead_letter_retention_seconds). At least 4 days: an
# inbox item that expired earlier would let a late retry be accepted a second time.
# Storage is billed per day kept.
INBOX_RETENTION_DAYS: Final = Integer(
    key="inbox_retention_days",
    env=env_names.ENV_INBOX_RETENTION_DAYS,
    readers=(_R.RECEIVER, _R.RECONCILER),
    default=14,
    low=4,
    high=3650,
    doc="inbox items and archived packages expire after this many days",
)
WORKER_MAX_CONCURRENCY: Final = Integer(
    key="worker_max_concurrency",
    default=5,
    low=2,  # the SQS event source accepts 2..1000
    high=1000,
    doc="upper bound of concurrent worker invocations",
)
# Attempts of unknown outcome (a workflow bug, a worker that died) before dead-lettering;
# SQS's maxReceiveCount would take 1000, the worker's settings take 100.
WORKER_MAX_ATTEMPTS: Final = Integer(
    key="worker_max_attempts",
    env=env_names.ENV_MAX_ATTEMPTS,
    readers=(_R.WORKER,),
    default=5,
    low=1,
    high=100,
    doc="attempts of unknown outcome before a work item is dead-lettered",
)
# A night and the next working day for an operator paged by McpAuthFailures or
# WorkQueueAge to fix a token or an MCP server, yet the dead-letter queue still says
# within a day that something is broken for good. At most RelayLink's own 3 days, which
# the work queue's 4-day retention outlasts.
WORKER_RETRY_HORIZON_HOURS: Final = Integer(
    key="worker_retry_horizon_hours",
    env=env_names.ENV_RETRY_HORIZON_SECONDS,
    readers=(_R.WORKER,),
    default=24,
    low=1,
    high=retry_policy.MAX_RETRY_HORIZON_SECONDS // _HOUR,
    env_scale=_HOUR,
    env_low=1,
    doc="how long after its receipt a transiently failing delivery is still retried",
)
WORKER_BATCH_SIZE: Final = Integer(
    key="worker_batch_size",
    default=event_source_limits.WORKER_BATCH_SIZE,
    low=1,
    high=event_source_limits.WORKER_BATCH_SIZE,  # without a batching window
    doc="messages per worker invocation",
)
# Without a window a poll returns what has arrived, about two messages at 100 M / month:
# the worker then waits out an MCP answer per two messages instead of per ten
# (docs/cost.md, which chose the default: the shortest that fills batches there).
WORKER_BATCHING_WINDOW_SECONDS: Final = Integer(
    key="worker_batching_window_seconds",
    default=1,
    low=0,
    high=300,  # the SQS event-source mapping's MaximumBatchingWindowInSeconds
    doc="seconds the worker's event-source mapping gathers messages before an invocation",
)
WORKER_BATCH_CONCURRENCY: Final = OptionalInteger(
    key="worker_batch_concurrency",
    env=env_names.ENV_BATCH_CONCURRENCY,
    readers=(_R.WORKER,),
    low=1,
    high=event_source_limits.WORKER_BATCH_SIZE,
    unset="the batch size",
    env_default=event_source_limits.WORKER_BATCH_SIZE,  # the whole batch at once
    doc="messages of one batch a worker processes at the same time",
)
# A message is started only while the invocation has this (plus the MCP fetch's bound)
# left. An agent's model calls take 10-60 s. The upper bound that fits the worker's
# timeout is checked by infra/worker.py.
WORKER_WORKFLOW_SECONDS: Final = Integer(
    key="worker_workflow_seconds",
    env=env_names.ENV_WORKFLOW_SECONDS,
    readers=(_R.WORKER,),
    default=60,
    low=1,
    high=900,  # Lambda's longest timeout
    doc="the longest one workflow run takes",
)
# Lambda's limits; at least the MCP fetch's bounds and a model call.
WORKER_TIMEOUT_SECONDS: Final = Integer(
    key="worker_timeout_seconds",
    default=180,
    low=30,
    high=900,
    doc="the worker's Lambda timeout; the lease and visibility timeout follow from it",
)
# Right-sized from the worker process's own measured peak with the default workflow
# (docs/benchmarks.md, figure 8: about 100 MB), with room for a batch of ten packages
# near the 1 MB result cap: the waiting is billed per MB (docs/cost.md).
WORKER_MEMORY_MB: Final = Integer(
    key="worker_memory_mb",
    default=256,
    low=128,
    high=10_240,
    doc="the worker's memory (CPU scales with it)",
)
LOG_LEVEL: Final = Text(
    key="log_level",
    default="INFO",
    choices=LOG_LEVELS,
    doc="the functions' own log level",
)
LOG_RETENTION_DAYS: Final = Integer(
    key="log_retention_days",
    default=30,
    low=1,
    high=731,
    choices=LOG_RETENTION_CHOICES,
    doc="retention of every log group",
)
SIGNING_SECRETS_ARN: Final = Formatted(
    key="signing_secrets_arn", doc="an existing signing secret (complete ARN) to use"
)
MCP_TOKEN_SECRET_ARN: Final = Formatted(
    key="mcp_token_secret_arn", doc="an existing MCP token secret (complete ARN) to use"
)
SIGNING_SECRETS_KMS_KEY_ARN: Final = Formatted(
    key="signing_secrets_kms_key_arn", doc="the customer managed key of your signing secret"
)
MCP_TOKEN_KMS_KEY_ARN: Final = Formatted(
    key="mcp_token_kms_key_arn", doc="the customer managed key of your MCP token secret"
)
# An alias (functions.core.workflow.WORKFLOW_ALIASES): archive needs nothing outside the
# stack, so a bare deployment starts and completes deliveries.
WORKFLOW: Final = Text(
    key="workflow",
    env=env_names.ENV_WORKFLOW,
    readers=(_R.WORKER,),
    default="archive",
    doc="the worker's workflow: `archive`, `notify`, `agent` or `module:attribute`",
)
WORKFLOW_SOURCE: Final = Formatted(key="workflow_source", doc="your workflow's folder")
WORKFLOW_REQUIREMENTS: Final = Formatted(
    key="workflow_requirements", doc="your workflow's pip requirements"
)
# ``workflow_setting_<name>`` keys; the workflow's own settings class checks them.
WORKFLOW_SETTINGS: Final = Formatted(
    key="workflow_setting_",
    env=env_names.ENV_WORKFLOW_SETTINGS,
    readers=(_R.WORKER,),
    doc="one of the workflow's own settings (`workflow_setting_<name>`)",
)
# It protects the table's write capacity and the bill, not the MCP server (worker
# concurrency does), so it sits well above RelayLink's bursts (docs/capacity.md). The
# bounds are the account's HTTP API quota.
API_RATE_LIMIT: Final = Integer(
    key="api_rate_limit",
    default=1_000,
    low=1,
    high=10_000,
    doc="steady-state requests per second the API stage admits",
)
API_BURST_LIMIT: Final = Integer(
    key="api_burst_limit", default=2_000, low=1, high=5_000, doc="burst the API stage admits"
)
RECEIVED_LOG_SHARDS: Final = Integer(
    key="received_log_shards",
    env=env_names.ENV_RECEIVED_LOG_SHARDS,
    # (the worker's completions spread over as many keys of the completed listing)
    readers=(_R.RECEIVER, _R.WORKER, _R.RECONCILER),
    default=8,
    low=1,
    high=table_layout.MAX_RECEIVED_LOG_SHARDS,
    doc="partitions of the received log the receiver writes (in effect increase-only)",
)
# Above 1, a run reads the received log's shards side by side, each with a watermark of
# its own (one write per shard and window): its rate follows the setting, and a shard
# that cannot be read holds back only itself.
RECONCILE_PARALLELISM: Final = Integer(
    key="reconcile_parallelism",
    env=env_names.ENV_RECONCILE_PARALLELISM,
    readers=(_R.RECONCILER,),
    default=1,
    low=1,
    high=table_layout.MAX_RECEIVED_LOG_SHARDS,
    doc="received log shards one reconciler run reads at once",
)
RELAY_PARALLELIZATION_FACTOR: Final = Integer(
    key="relay_parallelization_factor",
    default=2,
    low=1,
    high=10,  # Lambda's stream event sources accept 1..10
    doc="relay batches of one stream shard in flight at once",
)
RECONCILE_EVERY_MINUTES: Final = Integer(
    key="reconcile_every_minutes",
    default=5,
    low=1,
    high=60,
    doc="period of the reconciler's schedule",
)
# Above a healthy item's stay through a few quick retries (15+30+60+120 s, plus their
# runs): an item older than this is riding out an outage, which a person should know
# about long before its retry horizon ends.
WORK_QUEUE_AGE_ALARM_MINUTES: Final = Integer(
    key="work_queue_age_alarm_minutes",
    default=15,
    low=5,
    high=24 * 60,
    doc="the WorkQueueAge alarm's threshold",
)
# A person should hear of a waiting approval well before the gate's default timeout (a
# day) denies it.
APPROVAL_WAIT_ALARM_MINUTES: Final = Integer(
    key="approval_wait_alarm_minutes",
    default=240,
    low=5,
    high=366 * 24 * 60,
    doc="the ApprovalWait alarm's threshold",
)
WORKER_MANAGED_POLICY_ARNS: Final = Formatted(
    key="worker_managed_policy_arns", doc="managed policies attached to the worker's role"
)
WORKER_MANAGED_POLICY_ACK: Final = Formatted(
    key="worker_managed_policy_ack", doc="the privileged ones among them, acknowledged by name"
)
WORKER_SECRET_ARNS: Final = Formatted(key="worker_secret_arns", doc="secrets the worker may read")
WORKER_BEDROCK_MODEL_ARNS: Final = Formatted(
    key="worker_bedrock_model_arns", doc="Bedrock models the worker may invoke"
)
ALERT_URL_KMS_KEY_ARN: Final = Formatted(
    key="alert_url_kms_key_arn", doc="the customer managed key of `alert_url_secret_arn`"
)
ALERT_SIGNING_KMS_KEY_ARN: Final = Formatted(
    key="alert_signing_kms_key_arn",
    doc="the customer managed key of `alert_signing_secret_arn`",
)
NOTIFY_SECRET_KMS_KEY_ARN: Final = Formatted(
    key="notify_secret_kms_key_arn", doc="the customer managed key of `notify_secret_arn`"
)
# Off by default: Lambda's default sampling would be the largest line of the bill at low
# volume (docs/cost.md prices both).
TRACING: Final = Flag(key="tracing", default=False, doc="X-Ray active tracing on every function")
# Decided once per delivery, at its receipt (an incoming traceparent's flag wins): every
# later hop follows the flag stored with the delivery. 100: a person who turns tracing
# on wants the delivery an alarm names to have its trace (docs/cost.md prices it).
TRACE_SAMPLE_PERCENT: Final = Integer(
    key="trace_sample_percent",
    env=env_names.ENV_TRACE_SAMPLE_PERCENT,
    readers=(_R.RECEIVER,),
    default=100,
    low=0,
    high=100,
    doc="percent of new deliveries whose trace is recorded",
)
DASHBOARD: Final = Flag(key="dashboard", default=False, doc="the CloudWatch dashboard ($3 a month)")
ALARM_TOPIC_KEY: Final = Flag(
    key="alarm_topic_key",
    default=False,
    doc="a customer managed KMS key encrypting the alarm topic ($1 a month, $3 once rotated)",
)
# DynamoDB's warm throughput: from a new table's 4,000 to its quota's 40,000 (more once
# the quota is raised).
# Context keys the app does not know are refused (a typo would be ignored silently);
# a team's own app passes its own keys by naming them here, or namespaced (``team:key``).
CONTEXT_KEYS_ALLOWED: Final = Formatted(
    key="context_keys_allowed",
    doc="context keys of your own app that this app should not refuse as unknown",
)
TABLE_WARM_WRITE_UNITS: Final = OptionalInteger(
    key="table_warm_write_units",
    low=4_000,
    high=400_000,
    unset="unset",
    doc="write units per second the table takes from the start",
)


def _short_keys(workflow: str, pairs: tuple[tuple[str, str], ...]) -> tuple[WorkflowSetting, ...]:
    """A shipped workflow's settings by their short context keys: (key, setting name)."""
    return tuple(
        WorkflowSetting(
            key=key,
            workflow=workflow,
            name=name,
            doc=f"the {workflow} workflow's `{name}`",
            env=env_names.ENV_WORKFLOW_SETTINGS,
            readers=(_R.WORKER,),
        )
        for key, name in pairs
    )


AGENT_SETTINGS: Final = _short_keys(
    "agent",
    (
        ("agent_model_id", "model_id"),
        ("agent_max_tokens", "max_tokens"),
        ("agent_temperature", "temperature"),
        ("agent_system_prompt", "system_prompt"),
        ("agent_daily_token_budget", "daily_token_budget"),
        ("agent_delivery_token_cap", "delivery_token_cap"),
        ("agent_tools", "tools"),
        ("agent_tool_settings", "tool_settings"),
        ("agent_tools_without_approval", "tools_without_approval"),
        ("agent_max_turns", "max_turns"),
        ("agent_max_tool_calls", "max_tool_calls"),
        ("alert_url", "alert_url"),
        ("alert_url_secret_arn", "alert_url_secret_arn"),
        ("alert_signing_secret_arn", "alert_signing_secret_arn"),
        ("guardrail_id", "guardrail_id"),
        ("guardrail_version", "guardrail_version"),
    ),
)
NOTIFY_SETTINGS: Final = _short_keys("notify", (("notify_secret_arn", "notify_secret_arn"),))

# Not context: fixed for a deployment, or derived from the settings above.
SECRETS_MAX_AGE_SECONDS: Final = Integer(
    key="secrets_max_age_seconds",
    context=False,
    env=env_names.ENV_SECRETS_MAX_AGE_SECONDS,
    readers=(_R.RECEIVER, _R.WORKER),
    default=300,
    low=1,
    high=_HOUR,
    doc="how long a cached secret is used before it is read again",
)
MCP_TIMEOUT_SECONDS: Final = Integer(
    key="mcp_timeout_seconds",
    context=False,
    env=env_names.ENV_MCP_TIMEOUT_SECONDS,
    readers=(_R.WORKER,),
    default=10,
    low=1,
    high=120,
    doc="the MCP fetch's per-request timeout",
)
WORKER_RETRY_BASE_SECONDS: Final = Integer(
    key="worker_retry_base_seconds",
    context=False,
    env=env_names.ENV_RETRY_BASE_SECONDS,
    readers=(_R.WORKER,),
    default=retry_policy.RETRY_BASE_SECONDS,
    low=1,
    high=retry_policy.MAX_RETRY_DELAY_SECONDS,
    doc="the first retry's delay; it doubles",
)
WORKER_LEASE_SECONDS: Final = Integer(
    key="worker_lease_seconds",
    context=False,
    env=env_names.ENV_LEASE_SECONDS,
    readers=(_R.WORKER, _R.RECONCILER),
    default=WORKER_TIMEOUT_SECONDS.default * LEASE_FACTOR,  # see lease_seconds()
    low=2,
    high=12 * _HOUR,
    doc="how long a worker's claim holds: the worker's timeout times LEASE_FACTOR",
)
# A pending item normally reaches a worker within seconds; longer than the largest
# retry delay (15 min) so that items waiting out a back-off are not re-enqueued.
RECONCILE_PENDING_AGE_SECONDS: Final = Integer(
    key="reconcile_pending_age_seconds",
    context=False,
    env=env_names.ENV_RECONCILE_PENDING_AGE_SECONDS,
    readers=(_R.RECONCILER,),
    default=30 * 60,
    low=60,
    high=_DAY,
    doc="age of a pending item the reconciler re-enqueues",
)
RECONCILE_EFFECT_AGE_SECONDS: Final = Integer(
    key="reconcile_effect_age_seconds",
    context=False,
    env=env_names.ENV_RECONCILE_EFFECT_AGE_SECONDS,
    readers=(_R.RECONCILER,),
    default=_HOUR,
    low=60,
    high=7 * _DAY,
    doc="age of an effect intent the reconciler flags as in doubt (beyond any lease)",
)

SETTINGS: Final[tuple[Setting, ...]] = (
    STAGE,
    MCP_ALLOWED_HOSTS,
    NOTIFY_URL,
    ALARM_EMAIL,
    ALERT_EMAIL,
    INBOX_RETENTION_DAYS,
    WORKER_MAX_CONCURRENCY,
    WORKER_MAX_ATTEMPTS,
    WORKER_RETRY_HORIZON_HOURS,
    WORKER_BATCH_SIZE,
    WORKER_BATCHING_WINDOW_SECONDS,
    WORKER_BATCH_CONCURRENCY,
    WORKER_WORKFLOW_SECONDS,
    WORKER_TIMEOUT_SECONDS,
    WORKER_MEMORY_MB,
    LOG_LEVEL,
    LOG_RETENTION_DAYS,
    SIGNING_SECRETS_ARN,
    MCP_TOKEN_SECRET_ARN,
    SIGNING_SECRETS_KMS_KEY_ARN,
    MCP_TOKEN_KMS_KEY_ARN,
    WORKFLOW,
    WORKFLOW_SOURCE,
    WORKFLOW_REQUIREMENTS,
    WORKFLOW_SETTINGS,
    API_RATE_LIMIT,
    API_BURST_LIMIT,
    RECEIVED_LOG_SHARDS,
    RECONCILE_PARALLELISM,
    RELAY_PARALLELIZATION_FACTOR,
    RECONCILE_EVERY_MINUTES,
    WORK_QUEUE_AGE_ALARM_MINUTES,
    APPROVAL_WAIT_ALARM_MINUTES,
    WORKER_MANAGED_POLICY_ARNS,
    WORKER_MANAGED_POLICY_ACK,
    WORKER_SECRET_ARNS,
    WORKER_BEDROCK_MODEL_ARNS,
    ALERT_URL_KMS_KEY_ARN,
    ALERT_SIGNING_KMS_KEY_ARN,
    NOTIFY_SECRET_KMS_KEY_ARN,
    TRACING,
    TRACE_SAMPLE_PERCENT,
    DASHBOARD,
    ALARM_TOPIC_KEY,
    TABLE_WARM_WRITE_UNITS,
    CONTEXT_KEYS_ALLOWED,
    *AGENT_SETTINGS,
    *NOTIFY_SETTINGS,
    SECRETS_MAX_AGE_SECONDS,
    MCP_TIMEOUT_SECONDS,
    WORKER_RETRY_BASE_SECONDS,
    WORKER_LEASE_SECONDS,
    RECONCILE_PENDING_AGE_SECONDS,
    RECONCILE_EFFECT_AGE_SECONDS,
)


def context_keys() -> frozenset[str]:
    """Every CDK context key the stack reads (``workflow_setting_`` is a prefix)."""
    return frozenset(setting.key for setting in SETTINGS if setting.context)


# A workflow setting's name may also be spelt as its short context key (``agent_tools``
# for ``tools``): the one spelling works in CDK context, ``local --workflow-setting``
# and the construct's ``workflow_settings``, and the short names stay aliases.
SETTING_NAMES_BY_SHORT_KEY: Final = {s.key: s.name for s in AGENT_SETTINGS}


def canonical_workflow_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` with every short key (``agent_tools``) under its setting's name
    (``tools``).

    Raises:
        ValueError: one setting is given under both spellings with different values.
    """
    canonical: dict[str, str] = {}
    spelt: dict[str, str] = {}
    for given, value in settings.items():
        name = SETTING_NAMES_BY_SHORT_KEY.get(given, given)
        if name in canonical and canonical[name] != value:
            raise ValueError(f"{given} and {spelt[name]} set {name} differently")
        canonical[name], spelt[name] = value, given
    return canonical


def unknown_context_key(key: str, allowed: Collection[str] = ()) -> str | None:
    """Why the app refuses context ``key``, or None when it reads or lets it pass.

    The CDK's own keys and any namespaced key (``@aws-cdk/...``, ``aws:cdk:...``,
    ``team:key``) pass, and so do the keys ``context_keys_allowed`` names; anything else
    that is no key of this table is a typo until shown otherwise.
    """
    if key in context_keys() or key.startswith(WORKFLOW_SETTINGS.key) or key in allowed:
        return None
    if any(mark in key for mark in ":@/"):
        return None
    import difflib  # noqa: PLC0415 (only the synth asks; the receiver imports this module)

    known = sorted(context_keys() - {WORKFLOW_SETTINGS.key})
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"unknown context key {key}: {hint}(a key of your own app: name it in "
        f"-c {CONTEXT_KEYS_ALLOWED.key}=KEY,... or namespace it, team:KEY)"
    )


def lease_seconds(worker_timeout_seconds: int) -> int:
    """How long a worker's claim holds for a worker timeout (``WORKER_LEASE_SECONDS``)."""
    return worker_timeout_seconds * LEASE_FACTOR


def effect_age_seconds(lease: int) -> int:
    """When the reconciler treats an effect intent as in doubt: beyond any lease, so
    never one a live worker still holds (twice the lease, at least the default)."""
    return max(RECONCILE_EFFECT_AGE_SECONDS.default, 2 * lease)


def received_age_seconds(*, pending_age_seconds: int, lease: int) -> int:
    """How old a receipt gets before a reconciler run looks at it: the shorter of the
    pending age and the lease. A run that finishes leaves the received log this far behind."""
    return min(pending_age_seconds, lease)


def render() -> str:
    """The context settings as the rows of docs/deploy.md's table (key, default, bounds,
    meaning)."""
    lines = ["| key | default | bounds | meaning |", "| --- | --- | --- | --- |"]
    lines.extend(
        f"| `{s.key}` | {s.default_text()} | {s.bounds_text()} | {s.doc} |"
        for s in SETTINGS
        if s.context and not isinstance(s, WorkflowSetting) and s is not WORKFLOW_SETTINGS
    )
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover (python -m functions.core.settings_table --render)
    if sys.argv[1:] != ["--render"]:
        sys.exit("usage: python -m functions.core.settings_table --render")
    print(render())
