"""The stack's settings, parsed once from CDK context (``cdk.json`` or ``-c key=value``).

Every knob a deployer may turn lives here with its default and its bounds, so a
typo or an out-of-range value fails the synth with a clear message instead of
producing a stack that misbehaves at run time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from functions.core import event_source_limits, retry_policy, setting_defaults, table_layout
from functions.core.host_policy import HostPolicy
from functions.core.settings_env import SettingsError
from functions.core.workflow import WORKFLOW_ALIASES
from functions.workflows.agent import AgentSettings
from infra import schema
from infra.workflow_code import WorkflowCode

# Context keys (documented in docs/deploy.md).
STAGE = "stage"
MCP_ALLOWED_HOSTS = "mcp_allowed_hosts"
ALARM_EMAIL = "alarm_email"
INBOX_RETENTION_DAYS = "inbox_retention_days"
WORKER_MAX_CONCURRENCY = "worker_max_concurrency"
WORKER_MAX_ATTEMPTS = "worker_max_attempts"
WORKER_BATCH_CONCURRENCY = "worker_batch_concurrency"
WORKER_WORKFLOW_SECONDS = "worker_workflow_seconds"
WORKER_RETRY_HORIZON_HOURS = "worker_retry_horizon_hours"
LOG_LEVEL = "log_level"
LOG_RETENTION_DAYS = "log_retention_days"
SIGNING_SECRETS_ARN = "signing_secrets_arn"
MCP_TOKEN_SECRET_ARN = "mcp_token_secret_arn"  # noqa: S105 (a context key, not a secret)
SIGNING_SECRETS_KMS_KEY_ARN = "signing_secrets_kms_key_arn"
MCP_TOKEN_KMS_KEY_ARN = "mcp_token_kms_key_arn"  # noqa: S105 (a context key, not a secret)
NOTIFY_URL = "notify_url"
WORKFLOW = "workflow"
API_RATE_LIMIT = "api_rate_limit"
API_BURST_LIMIT = "api_burst_limit"
RECEIVED_LOG_SHARDS = "received_log_shards"
RELAY_PARALLELIZATION_FACTOR = "relay_parallelization_factor"
RECONCILE_EVERY_MINUTES = "reconcile_every_minutes"
WORK_QUEUE_AGE_ALARM_MINUTES = "work_queue_age_alarm_minutes"
APPROVAL_WAIT_ALARM_MINUTES = "approval_wait_alarm_minutes"
WORKFLOW_SOURCE = "workflow_source"
WORKFLOW_REQUIREMENTS = "workflow_requirements"
# ``workflow_setting_<name>``: one entry of the worker's WORKFLOW_SETTINGS.
WORKFLOW_SETTING_PREFIX = "workflow_setting_"
# Short keys for the shipped agent workflow's settings: context key -> setting name.
SHORT_SETTING_KEYS = {
    "agent_model_id": "model_id",
    "agent_max_tokens": "max_tokens",
    "agent_temperature": "temperature",
    "agent_system_prompt": "system_prompt",
    "agent_daily_token_budget": "daily_token_budget",
    "agent_tools": "tools",
    "agent_max_turns": "max_turns",
    "agent_max_tool_calls": "max_tool_calls",
    "alert_url": "alert_url",
    "alert_url_secret_arn": "alert_url_secret_arn",
    "alert_signing_secret_arn": "alert_signing_secret_arn",
    "guardrail_id": "guardrail_id",
    "guardrail_version": "guardrail_version",
}
# The agent's screening guardrail (both or neither; the worker may apply it and no other).
GUARDRAIL_ID = "guardrail_id"
GUARDRAIL_VERSION = "guardrail_version"
ALERT_URL_KMS_KEY_ARN = "alert_url_kms_key_arn"
ALERT_SIGNING_KMS_KEY_ARN = "alert_signing_kms_key_arn"
ALERT_URL_SECRET_ARN = "alert_url_secret_arn"  # noqa: S105 (a context key, not a secret)
ALERT_SIGNING_SECRET_ARN = "alert_signing_secret_arn"  # noqa: S105 (a context key)
WORKER_MANAGED_POLICY_ARNS = "worker_managed_policy_arns"
WORKER_MANAGED_POLICY_ACK = "worker_managed_policy_ack"
WORKER_SECRET_ARNS = "worker_secret_arns"  # noqa: S105 (a context key, not a secret)
WORKER_BEDROCK_MODEL_ARNS = "worker_bedrock_model_arns"
WORKER_TIMEOUT_SECONDS = "worker_timeout_seconds"
WORKER_MEMORY_MB = "worker_memory_mb"
WORKER_BATCH_SIZE = "worker_batch_size"
ALERT_EMAIL = "alert_email"
TRACING = "tracing"
DASHBOARD = "dashboard"
TABLE_WARM_WRITE_UNITS = "table_warm_write_units"

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$"
)
# A key ARN, not an alias: IAM authorises key use on the key's ARN only.
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
_WORKFLOW = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_SETTING_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MANAGED_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(aws|\d{12}):policy/[\w+=,.@/-]+$")
# A model, inference profile or provisioned throughput, named exactly (no wildcard).
_BEDROCK_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:(\d{12})?:[a-z-]+/[\w.:/-]+$")
# pip would read a leading "-" as one of its own options (another index, a file).
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][^\s,]*(\s*[<>=!~,;@\[][^\n]*)?$")
# Lambda allows 4 KB for all variables; leave room for the worker's own.
WORKFLOW_SETTINGS_MAX_BYTES = 2048

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_CHOICES = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731)


class ConfigError(ValueError):
    """A context value is missing, malformed or out of range."""


@dataclass(frozen=True, slots=True)
class StackConfig:
    """Typed deploy-time settings of one stack.

    Attributes:
        stage: Short lower-case name that distinguishes deployments (``prod``, ``dev``).
        mcp_allowed_hosts: Hosts (exact or ``*.suffix``) the worker may send its token to.
        alarm_email: Address subscribed to the alarm topic, or None.
        inbox_retention_days: How long inbox items and archived packages are kept.
        worker_max_concurrency: Upper bound of concurrent worker invocations (SQS ESM).
        worker_max_attempts: Attempts of unknown outcome (a workflow's unexpected
            error, a worker that died) before a delivery is dead-lettered.
        worker_retry_horizon_hours: How long after its receipt a delivery whose
            attempts fail transiently (MCP down, token refused) is still retried.
        worker_workflow_seconds: The workflow's time allowance per message; a worker
            starts a message only while its invocation has this, plus the MCP fetch's
            bound, left.
        log_level: Powertools and Lambda application log level.
        log_retention_days: Retention of every log group of the stack.
        signing_secrets_arn: Existing signing secret to use, or None to create one.
        mcp_token_secret_arn: Existing MCP token secret to use, or None to create one.
        signing_secrets_kms_key_arn: Customer managed key encrypting the existing
            signing secret, or None (the AWS managed key, which needs no grant).
        mcp_token_kms_key_arn: The same for the existing MCP token secret.
        notify_url: Where the default workflow posts its notification, or None.
        workflow: The worker's workflow as ``module:attribute``.
        api_rate_limit: Steady-state requests per second the API stage admits: it
            protects the table's write capacity and the bill, not the MCP server (worker
            concurrency does), so it sits well above RelayLink's bursts (docs/capacity.md).
        api_burst_limit: Burst the API stage admits.
        received_log_shards: Partitions of the received log the receiver writes; in
            effect only ever raised (the reconciler keeps reading every shard any deploy
            it ran with wrote).
        relay_parallelization_factor: Concurrent relay batches per stream shard.
        reconcile_every_minutes: Period of the reconciler's schedule.
        work_queue_age_alarm_minutes: Age of the work queue's oldest message above
            which the backlog alarm fires.
        approval_wait_alarm_minutes: How long a delivery may wait for a person's
            approval before the ApprovalWait alarm fires.
        workflow_source: Folder of the deployer's workflow code (absolute), or None.
        workflow_requirements: Extra pip requirements of the workflow.
        workflow_settings: The workflow's own settings (WORKFLOW_SETTINGS).
        worker_managed_policy_arns: Managed policies attached to the worker's role.
        worker_managed_policy_ack: Names of the privileged ones among them (see
            :func:`is_privileged_policy`) the deployer acknowledges; any other is refused.
        worker_secret_arns: Secrets the worker may read (GetSecretValue).
        worker_bedrock_model_arns: Bedrock models the worker may invoke, beyond the
            agent workflow's configured one.
        worker_timeout_seconds: The worker's Lambda timeout; the lease and the work
            queue's visibility timeout follow from it.
        worker_memory_mb: The worker's memory (CPU scales with it).
        tracing: X-Ray active tracing on every function (``-c tracing=true``, which
            also enables Powertools' Tracer); off by default: Lambda's default sampling
            would be the largest line of the bill at low volume (docs/cost.md prices
            both).
        worker_batch_size: Messages per worker invocation.
        worker_batch_concurrency: Messages of one batch a worker processes at once, or
            None for the whole batch (``batch_concurrency``).
        alert_email: Address subscribed to the workflow alert topic, or None.
        alert_url_kms_key_arn: Customer managed key encrypting the secret
            ``alert_url_secret_arn`` names, or None (the AWS managed key).
        alert_signing_kms_key_arn: The same for ``alert_signing_secret_arn``.
        dashboard: The CloudWatch dashboard ($3 a month; off by default, docs/cost.md).
        table_warm_write_units: Write units per second the table takes at once (warm
            throughput, for a launch: docs/capacity.md), or None for DynamoDB's own.
    """

    stage: str = "prod"
    mcp_allowed_hosts: tuple[str, ...] = ()
    alarm_email: str | None = None
    inbox_retention_days: int = setting_defaults.DEFAULT_INBOX_RETENTION_DAYS
    worker_max_concurrency: int = 5
    worker_max_attempts: int = setting_defaults.DEFAULT_MAX_ATTEMPTS
    worker_workflow_seconds: int = setting_defaults.DEFAULT_WORKFLOW_SECONDS
    worker_retry_horizon_hours: int = setting_defaults.DEFAULT_RETRY_HORIZON_SECONDS // 3600
    log_level: str = "INFO"
    log_retention_days: int = 30
    signing_secrets_arn: str | None = None
    mcp_token_secret_arn: str | None = None
    signing_secrets_kms_key_arn: str | None = None
    mcp_token_kms_key_arn: str | None = None
    notify_url: str | None = None
    workflow: str = setting_defaults.DEFAULT_WORKFLOW
    api_rate_limit: int = 1_000
    api_burst_limit: int = 2_000
    received_log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS
    relay_parallelization_factor: int = 2
    reconcile_every_minutes: int = 5
    # Above a healthy item's stay through a few quick retries (15+30+60+120 s, plus
    # their runs): an item older than this is riding out an outage, which a person
    # should know about long before its retry horizon ends.
    work_queue_age_alarm_minutes: int = 15
    # A person should hear of a waiting approval well before the gate's default timeout
    # (a day) denies it.
    approval_wait_alarm_minutes: int = 240
    workflow_source: str | None = None
    workflow_requirements: tuple[str, ...] = ()
    workflow_settings: Mapping[str, str] = field(default_factory=dict)
    worker_managed_policy_arns: tuple[str, ...] = ()
    worker_managed_policy_ack: tuple[str, ...] = ()
    worker_secret_arns: tuple[str, ...] = ()
    worker_bedrock_model_arns: tuple[str, ...] = ()
    worker_timeout_seconds: int = 180
    # Right-sized from the worker process's own measured peak with the default workflow
    # (docs/benchmarks.md, figure 8: about 100 MB), with room for a batch of ten
    # packages near the 1 MB result cap: a batch waits on its messages concurrently,
    # and the waiting is billed per MB (docs/cost.md).
    worker_memory_mb: int = 256
    worker_batch_size: int = event_source_limits.WORKER_BATCH_SIZE
    worker_batch_concurrency: int | None = None
    alert_email: str | None = None
    alert_url_kms_key_arn: str | None = None
    alert_signing_kms_key_arn: str | None = None
    tracing: bool = False
    dashboard: bool = False
    table_warm_write_units: int | None = None

    @property
    def workflow_code(self) -> WorkflowCode:
        """What the worker's asset must hold for the configured workflow."""
        return WorkflowCode(
            spec=self.workflow,
            source=Path(self.workflow_source) if self.workflow_source else None,
            requirements=self.workflow_requirements,
        )

    @property
    def agent_settings(self) -> AgentSettings | None:
        """The agent workflow's settings as it will read them, or None for another
        workflow."""
        if not self._runs_agent:
            return None
        return AgentSettings.from_mapping(self.workflow_settings)

    @property
    def screens_briefings(self) -> bool:
        """Whether the agent screens each briefing with a guardrail (and so may park a
        blocked one for a person's approval, without any ``approval`` setting)."""
        return self._runs_agent and GUARDRAIL_ID in self.workflow_settings

    @property
    def _runs_agent(self) -> bool:
        return self.workflow_code.target == WORKFLOW_ALIASES["agent"]

    @property
    def batch_concurrency(self) -> int:
        """Messages of one batch processed at once (the whole batch unless set)."""
        return self.worker_batch_concurrency or self.worker_batch_size

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> StackConfig:
        """Parse CDK context values (strings from ``-c``, or JSON values from cdk.json).

        Raises:
            ConfigError: when a value is malformed or out of range.
        """
        defaults = cls()
        config = cls(
            stage=_text(context, STAGE, defaults.stage),
            mcp_allowed_hosts=_hosts(context.get(MCP_ALLOWED_HOSTS)),
            alarm_email=_optional_text(context, ALARM_EMAIL),
            inbox_retention_days=_integer(
                context, INBOX_RETENTION_DAYS, defaults.inbox_retention_days, low=4, high=3650
            ),
            worker_max_concurrency=_integer(
                # The SQS event source accepts 2..1000.
                context,
                WORKER_MAX_CONCURRENCY,
                defaults.worker_max_concurrency,
                low=2,
                high=1000,
            ),
            worker_max_attempts=_integer(
                # The worker's settings accept 1..100 (SQS's maxReceiveCount would take
                # 1000): more would fail every worker cold start.
                context,
                WORKER_MAX_ATTEMPTS,
                defaults.worker_max_attempts,
                low=1,
                high=100,
            ),
            worker_workflow_seconds=_integer(
                # The upper bound that fits the worker's timeout is checked by infra/worker.py.
                context,
                WORKER_WORKFLOW_SECONDS,
                defaults.worker_workflow_seconds,
                low=1,
                high=900,
            ),
            worker_retry_horizon_hours=_integer(
                # Up to RelayLink's own 3 days, which the work queue's 4-day retention
                # outlasts.
                context,
                WORKER_RETRY_HORIZON_HOURS,
                defaults.worker_retry_horizon_hours,
                low=1,
                high=retry_policy.MAX_RETRY_HORIZON_SECONDS // 3600,
            ),
            log_level=_text(context, LOG_LEVEL, defaults.log_level).upper(),
            log_retention_days=_integer(
                context, LOG_RETENTION_DAYS, defaults.log_retention_days, low=1, high=731
            ),
            signing_secrets_arn=_optional_text(context, SIGNING_SECRETS_ARN),
            mcp_token_secret_arn=_optional_text(context, MCP_TOKEN_SECRET_ARN),
            signing_secrets_kms_key_arn=_optional_text(context, SIGNING_SECRETS_KMS_KEY_ARN),
            mcp_token_kms_key_arn=_optional_text(context, MCP_TOKEN_KMS_KEY_ARN),
            notify_url=_optional_text(context, NOTIFY_URL),
            workflow=_text(context, WORKFLOW, defaults.workflow),
            api_rate_limit=_integer(
                context, API_RATE_LIMIT, defaults.api_rate_limit, low=1, high=10_000
            ),
            api_burst_limit=_integer(
                context, API_BURST_LIMIT, defaults.api_burst_limit, low=1, high=5_000
            ),
            received_log_shards=_integer(
                context,
                RECEIVED_LOG_SHARDS,
                defaults.received_log_shards,
                low=1,
                high=table_layout.MAX_RECEIVED_LOG_SHARDS,
            ),
            # Lambda's stream event sources accept 1..10.
            relay_parallelization_factor=_integer(
                context,
                RELAY_PARALLELIZATION_FACTOR,
                defaults.relay_parallelization_factor,
                low=1,
                high=10,
            ),
            reconcile_every_minutes=_integer(
                context, RECONCILE_EVERY_MINUTES, defaults.reconcile_every_minutes, low=1, high=60
            ),
            approval_wait_alarm_minutes=_integer(
                context,
                APPROVAL_WAIT_ALARM_MINUTES,
                defaults.approval_wait_alarm_minutes,
                low=5,
                high=366 * 24 * 60,
            ),
            work_queue_age_alarm_minutes=_integer(
                context,
                WORK_QUEUE_AGE_ALARM_MINUTES,
                defaults.work_queue_age_alarm_minutes,
                low=5,
                high=24 * 60,
            ),
            workflow_source=_folder(context, WORKFLOW_SOURCE),
            workflow_requirements=_requirements(context.get(WORKFLOW_REQUIREMENTS)),
            workflow_settings=_workflow_settings(context),
            worker_managed_policy_arns=_arns(
                context, WORKER_MANAGED_POLICY_ARNS, _MANAGED_POLICY_ARN, "an IAM policy ARN"
            ),
            worker_managed_policy_ack=_names(context, WORKER_MANAGED_POLICY_ACK),
            worker_secret_arns=_arns(
                context,
                WORKER_SECRET_ARNS,
                _SECRET_ARN,
                "a complete Secrets Manager ARN (with its suffix)",
            ),
            worker_bedrock_model_arns=_arns(
                context,
                WORKER_BEDROCK_MODEL_ARNS,
                _BEDROCK_ARN,
                "a Bedrock model or inference profile ARN, without wildcards",
            ),
            # Lambda's limits; at least the MCP fetch's bounds and a model call.
            worker_timeout_seconds=_integer(
                context, WORKER_TIMEOUT_SECONDS, defaults.worker_timeout_seconds, low=30, high=900
            ),
            worker_memory_mb=_integer(
                context, WORKER_MEMORY_MB, defaults.worker_memory_mb, low=128, high=10_240
            ),
            # An SQS event source takes up to 10 messages without a batching window.
            worker_batch_size=_integer(
                context,
                WORKER_BATCH_SIZE,
                defaults.worker_batch_size,
                low=1,
                high=event_source_limits.WORKER_BATCH_SIZE,
            ),
            worker_batch_concurrency=(
                _integer(
                    context,
                    WORKER_BATCH_CONCURRENCY,
                    0,
                    low=1,
                    high=event_source_limits.WORKER_BATCH_SIZE,
                )
                if context.get(WORKER_BATCH_CONCURRENCY) not in (None, "")
                else None
            ),
            alert_email=_optional_text(context, ALERT_EMAIL),
            alert_url_kms_key_arn=_optional_text(context, ALERT_URL_KMS_KEY_ARN),
            alert_signing_kms_key_arn=_optional_text(context, ALERT_SIGNING_KMS_KEY_ARN),
            tracing=_boolean(context, TRACING, defaults.tracing),
            dashboard=_boolean(context, DASHBOARD, defaults.dashboard),
            # DynamoDB's warm throughput: from a new table's 4,000 to its quota's 40,000
            # (more once the quota is raised).
            table_warm_write_units=(
                _integer(context, TABLE_WARM_WRITE_UNITS, 0, low=4_000, high=400_000)
                if context.get(TABLE_WARM_WRITE_UNITS) not in (None, "")
                else None
            ),
        )
        config.validate()
        return config

    def checked(self) -> StackConfig:
        """These settings as the context parser reads them: a directly built value (a
        construct's props) gets the same bounds, normalisation and messages as
        ``cdk.json`` or ``-c key=value``.

        Raises:
            ConfigError: naming the offending setting (its context key).
        """
        return StackConfig.from_context(self.as_context())

    def as_context(self) -> dict[str, Any]:
        """The CDK context that :meth:`from_context` reads back into these settings."""
        context: dict[str, Any] = {}
        for setting in fields(self):
            value = getattr(self, setting.name)
            if setting.name == "workflow_settings":
                context.update({WORKFLOW_SETTING_PREFIX + k: v for k, v in value.items()})
            elif isinstance(value, tuple):
                context[setting.name] = list(value)
            elif value is not None:
                context[setting.name] = value
        return context

    @property
    def worker_retry_horizon_seconds(self) -> int:
        return self.worker_retry_horizon_hours * 3600

    @property
    def dead_letter_retention_seconds(self) -> int:
        """The work dead-letter queue's retention, derived so that no dead letter the
        worker sends outlives its inbox item (:func:`infra.schema.dead_letter_retention_seconds`).

        Raises:
            ConfigError: the inbox is not kept long enough for that, naming the setting.
        """
        age = schema.worker_dead_letter_age(
            retry_horizon_seconds=self.worker_retry_horizon_seconds,
            max_attempts=self.worker_max_attempts,
            visibility_timeout_seconds=(
                self.worker_timeout_seconds * event_source_limits.VISIBILITY_TIMEOUT_FACTOR
            ),
        )
        try:
            return schema.dead_letter_retention_seconds(
                inbox_retention_seconds=self.inbox_retention_days * 86400, dead_letter_age=age
            )
        except ValueError as exc:
            raise ConfigError(
                f"{INBOX_RETENTION_DAYS}: {exc} ({WORKER_RETRY_HORIZON_HOURS},"
                f" {WORKER_MAX_ATTEMPTS}, {WORKER_TIMEOUT_SECONDS})"
            ) from None

    def validate(self) -> None:
        """Check what a single value's type cannot say.

        Raises:
            ConfigError: naming the offending context key.
        """
        if not _STAGE.match(self.stage):
            raise ConfigError(f"{STAGE}: lower-case letters, digits and '-', at most 20")
        if not self.mcp_allowed_hosts:
            # An empty allowlist would fail every package permanently: refuse to deploy it.
            raise ConfigError(f"{MCP_ALLOWED_HOSTS}: at least one host (e.g. *.relaylink.example)")
        if self.log_level not in _LOG_LEVELS:
            raise ConfigError(f"{LOG_LEVEL}: one of {', '.join(_LOG_LEVELS)}")
        if self.log_retention_days not in LOG_RETENTION_CHOICES:
            raise ConfigError(f"{LOG_RETENTION_DAYS}: one of {LOG_RETENTION_CHOICES}")
        if self.alarm_email is not None and not _EMAIL.match(self.alarm_email):
            raise ConfigError(f"{ALARM_EMAIL}: not an e-mail address")
        for key, arn in (
            (SIGNING_SECRETS_ARN, self.signing_secrets_arn),
            (MCP_TOKEN_SECRET_ARN, self.mcp_token_secret_arn),
        ):
            if arn is not None and not _SECRET_ARN.match(arn):
                raise ConfigError(f"{key}: a complete Secrets Manager ARN (with its suffix)")
        _check_secret_key(
            SIGNING_SECRETS_KMS_KEY_ARN,
            self.signing_secrets_kms_key_arn,
            secret=(SIGNING_SECRETS_ARN, self.signing_secrets_arn),
        )
        _check_secret_key(
            MCP_TOKEN_KMS_KEY_ARN,
            self.mcp_token_kms_key_arn,
            secret=(MCP_TOKEN_SECRET_ARN, self.mcp_token_secret_arn),
        )
        if self.notify_url is not None and not self.notify_url.startswith("https://"):
            raise ConfigError(f"{NOTIFY_URL}: an https:// URL")
        # At least the rate, or the account's burst quota (5,000) for a rate above it.
        if self.api_burst_limit < min(self.api_rate_limit, 5_000):
            raise ConfigError(f"{API_BURST_LIMIT}: at least {API_RATE_LIMIT} (or 5000)")
        self._validate_worker()

    def _validate_worker(self) -> None:
        """The workflow's and the worker's own knobs."""
        if self.workflow not in WORKFLOW_ALIASES and not _WORKFLOW.match(self.workflow):
            aliases = ", ".join(sorted(WORKFLOW_ALIASES))
            raise ConfigError(f"{WORKFLOW}: one of {aliases}, or module:attribute")
        if self.alert_email is not None and not _EMAIL.match(self.alert_email):
            raise ConfigError(f"{ALERT_EMAIL}: not an e-mail address")
        alert_url = self.workflow_settings.get("alert_url")
        if alert_url is not None and not alert_url.startswith("https://"):
            raise ConfigError(f"{WORKFLOW_SETTING_PREFIX}alert_url (alert_url): an https:// URL")
        self._validate_alert_secrets()
        for key in (GUARDRAIL_ID, GUARDRAIL_VERSION):
            if key in self.workflow_settings and not self._runs_agent:
                raise ConfigError(f"{key}: only with the agent workflow (-c workflow=agent)")
        if len(json.dumps(dict(self.workflow_settings))) > WORKFLOW_SETTINGS_MAX_BYTES:
            raise ConfigError(
                f"{WORKFLOW_SETTING_PREFIX}*: at most {WORKFLOW_SETTINGS_MAX_BYTES} bytes of "
                "settings in all (Lambda allows 4 KB of environment); keep long texts in S3 "
                "or a secret and name them"
            )
        self._validate_managed_policies()
        if self.batch_concurrency > self.worker_batch_size:
            raise ConfigError(f"{WORKER_BATCH_CONCURRENCY}: at most {WORKER_BATCH_SIZE}")
        _ = self.dead_letter_retention_seconds  # no dead letter outlives its item
        try:
            # The agent's own parser: the synth refuses what its cold start would.
            _ = self.agent_settings
        except SettingsError as exc:
            raise ConfigError(f"{WORKFLOW_SETTING_PREFIX}* (workflow agent): {exc}") from None

    @property
    def alert_secrets(self) -> tuple[tuple[str, str | None], ...]:
        """(secret ARN, its customer managed key ARN or None) of each alert secret set."""
        pairs = (
            (self.workflow_settings.get(ALERT_URL_SECRET_ARN), self.alert_url_kms_key_arn),
            (self.workflow_settings.get(ALERT_SIGNING_SECRET_ARN), self.alert_signing_kms_key_arn),
        )
        return tuple((arn, key) for arn, key in pairs if arn is not None)

    def _validate_alert_secrets(self) -> None:
        """The alert endpoint's secrets: complete ARNs, for the agent, each with its key."""
        for key, kms_key in (
            (ALERT_URL_SECRET_ARN, (ALERT_URL_KMS_KEY_ARN, self.alert_url_kms_key_arn)),
            (ALERT_SIGNING_SECRET_ARN, (ALERT_SIGNING_KMS_KEY_ARN, self.alert_signing_kms_key_arn)),
        ):
            arn = self.workflow_settings.get(key)
            if arn is not None and not _SECRET_ARN.match(arn):
                raise ConfigError(f"{key}: a complete Secrets Manager ARN (with its suffix)")
            if arn is not None and not self._runs_agent:
                raise ConfigError(f"{key}: only with the agent workflow (-c workflow=agent)")
            _check_secret_key(*kms_key, secret=(key, arn))

    def _validate_managed_policies(self) -> None:
        """A privileged managed policy is attached only when acknowledged by name."""
        privileged = {
            policy_name(arn): arn
            for arn in self.worker_managed_policy_arns
            if is_privileged_policy(arn)
        }
        for name, arn in privileged.items():
            if name not in self.worker_managed_policy_ack:
                raise ConfigError(
                    f"{WORKER_MANAGED_POLICY_ARNS}: {arn} grants administrator or full-access "
                    f"power to every workflow run; to attach it anyway, acknowledge it by "
                    f"name: -c {WORKER_MANAGED_POLICY_ACK}={name}"
                )
        for name in self.worker_managed_policy_ack:
            if name not in privileged:
                raise ConfigError(
                    f"{WORKER_MANAGED_POLICY_ACK}: {name!r} is no privileged policy that "
                    f"{WORKER_MANAGED_POLICY_ARNS} names"
                )


def policy_name(arn: str) -> str:
    """The policy's name: the last part of its ARN (``AdministratorAccess``)."""
    return arn.rsplit("/", 1)[-1]


def is_privileged_policy(arn: str) -> bool:
    """Whether a managed policy's name says it grants administrator or full-access power
    (``AdministratorAccess``, ``PowerUserAccess``, ``IAMFullAccess``,
    ``AmazonS3FullAccess``, ``job-function/SystemAdministrator`` ...)."""
    name = policy_name(arn)
    return "Administrator" in name or "FullAccess" in name or name == "PowerUserAccess"


def _check_secret_key(key: str, key_arn: str | None, *, secret: tuple[str, str | None]) -> None:
    """A customer managed key is given only for a secret the deployer brings, in its region."""
    if key_arn is None:
        return
    secret_key, secret_arn = secret
    if not _KMS_KEY_ARN.match(key_arn):
        raise ConfigError(f"{key}: a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)")
    if secret_arn is None:
        # A secret the stack creates uses the AWS managed key: nothing to grant.
        raise ConfigError(f"{key}: only with {secret_key} (a secret you bring)")
    if _region(key_arn) != _region(secret_arn):
        # Secrets Manager encrypts a secret with a key of the secret's own region.
        raise ConfigError(f"{key}: a key in the region of {secret_key}")


def _region(arn: str) -> str:
    return arn.split(":")[3]


def _text(context: Mapping[str, Any], key: str, default: str) -> str:
    value = context.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: a non-empty string")
    return value.strip()


def _boolean(context: Mapping[str, Any], key: str, default: bool) -> bool:
    value = context.get(key)
    if value is None or value == "":
        return default
    # ``-c key=false`` arrives as a string; cdk.json gives a boolean.
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: true or false")
    return value


def _optional_text(context: Mapping[str, Any], key: str) -> str | None:
    value = context.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{key}: a string")
    return value.strip()


def _integer(context: Mapping[str, Any], key: str, default: int, *, low: int, high: int) -> int:
    value = context.get(key, default)
    # ``-c key=7`` arrives as a string; cdk.json gives a number. bool is an int: refuse it.
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{key}: an integer from {low} to {high}")
    return value


def _folder(context: Mapping[str, Any], key: str) -> str | None:
    # Relative to where the app runs: the CDK CLI runs it in the project folder.
    text = _optional_text(context, key)
    if text is None:
        return None
    folder = Path(text).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"{key}: no folder {folder}")
    return str(folder)


def _listed(value: Any, key: str) -> list[str]:
    """A JSON list (cdk.json, or ``-c key='["a","b"]'``) or a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text) if text.startswith("[") else [text]
        except ValueError:
            raise ConfigError(f"{key}: a JSON list of strings, or comma-separated") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{key}: a list of strings")
    return [item.strip() for item in value if item.strip()]


def _arns(
    context: Mapping[str, Any], key: str, pattern: re.Pattern[str], what: str
) -> tuple[str, ...]:
    arns = [part.strip() for item in _listed(context.get(key), key) for part in item.split(",")]
    for arn in arns:
        if arn and not pattern.match(arn):
            raise ConfigError(f"{key}: {arn!r} is not {what}")
    return tuple(dict.fromkeys(arn for arn in arns if arn))


def _names(context: Mapping[str, Any], key: str) -> tuple[str, ...]:
    names = [part.strip() for item in _listed(context.get(key), key) for part in item.split(",")]
    return tuple(dict.fromkeys(name for name in names if name))


def _requirements(value: Any) -> tuple[str, ...]:
    """pip requirement specifiers; on the command line comma-separated, where a comma
    followed by a version operator continues the specifier (``pkg>=1,<2``)."""
    found: list[str] = []
    for item in _listed(value, WORKFLOW_REQUIREMENTS):
        found.extend(part.strip() for part in re.split(r",\s*(?=[A-Za-z0-9])", item))
    for requirement in found:
        if not _REQUIREMENT.match(requirement):
            raise ConfigError(
                f"{WORKFLOW_REQUIREMENTS}: {requirement!r} is not a requirement (name, "
                "then optional extras, version and marker; no pip options)"
            )
    return tuple(dict.fromkeys(r for r in found if r))


def _workflow_settings(context: Mapping[str, Any]) -> dict[str, str]:
    """``workflow_setting_<name>`` and the short keys, as the worker's string settings."""
    settings: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key in sorted(context):
        if key.startswith(WORKFLOW_SETTING_PREFIX):
            name = key.removeprefix(WORKFLOW_SETTING_PREFIX)
        elif key in SHORT_SETTING_KEYS:
            name = SHORT_SETTING_KEYS[key]
        else:
            continue
        if not _SETTING_NAME.match(name):
            raise ConfigError(f"{key}: a setting name is lower-case letters, digits and '_'")
        value = _setting_value(key, context[key])
        if value is None:
            continue
        if name in settings and settings[name] != value:
            raise ConfigError(f"{key} and {origin[name]} set {name} differently")
        settings[name], origin[name] = value, key
    return settings


def _setting_value(key: str, value: Any) -> str | None:
    # cdk.json may give a number or a boolean; the worker reads strings only.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key}: a string, number or boolean")
    return value if value.strip() else None


def _hosts(value: Any) -> tuple[str, ...]:
    # ``-c mcp_allowed_hosts=a.example,*.b.example`` or a JSON list in cdk.json.
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        items: Any = json.loads(text) if text.startswith("[") else text.split(",")
    else:
        items = value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ConfigError(f"{MCP_ALLOWED_HOSTS}: a list of host names")
    # The worker's own parser: synth refuses exactly the entries that would make every
    # worker cold start fail (``*.com``, a numeric last label, ...), and stores them
    # normalised as the worker will read them.
    try:
        policy = HostPolicy(tuple(item.strip() for item in items if item.strip()))
    except ValueError as exc:
        raise ConfigError(f"{MCP_ALLOWED_HOSTS}: {exc}") from None
    return policy.allowed_hosts
