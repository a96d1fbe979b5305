"""The stack's settings, parsed once from CDK context (``cdk.json`` or ``-c key=value``).

Every knob a deployer may turn is a row of :mod:`functions.core.settings_table` with its
default and its bounds; this module parses each context value by its row (and checks
what a single value cannot say in :meth:`StackConfig.validate`), so a typo or an
out-of-range value fails the synth with a clear message instead of producing a stack
that misbehaves at run time. A shipped workflow's own settings are read by that
workflow's settings class (:func:`functions.core.workflow.read_workflow_settings`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, Final

from functions.core import event_source_limits, settings_table
from functions.core.env_parsers import SettingsError
from functions.core.host_policy import HostPolicy
from functions.core.workflow import WorkflowSettings, read_workflow_settings
from functions.workflows.wiring import SHIPPED, WORKFLOW_ALIASES
from infra import schema
from infra.workflow_code import WorkflowCode

# Context keys, by the names infra and its tests use (functions.core.settings_table).
STAGE: Final = settings_table.STAGE.key
MCP_ALLOWED_HOSTS: Final = settings_table.MCP_ALLOWED_HOSTS.key
ALARM_EMAIL: Final = settings_table.ALARM_EMAIL.key
INBOX_RETENTION_DAYS: Final = settings_table.INBOX_RETENTION_DAYS.key
WORKER_MAX_CONCURRENCY: Final = settings_table.WORKER_MAX_CONCURRENCY.key
WORKER_MAX_ATTEMPTS: Final = settings_table.WORKER_MAX_ATTEMPTS.key
WORKER_BATCH_CONCURRENCY: Final = settings_table.WORKER_BATCH_CONCURRENCY.key
WORKER_WORKFLOW_SECONDS: Final = settings_table.WORKER_WORKFLOW_SECONDS.key
WORKER_RETRY_HORIZON_HOURS: Final = settings_table.WORKER_RETRY_HORIZON_HOURS.key
LOG_LEVEL: Final = settings_table.LOG_LEVEL.key
LOG_RETENTION_DAYS: Final = settings_table.LOG_RETENTION_DAYS.key
SIGNING_SECRETS_ARN: Final = settings_table.SIGNING_SECRETS_ARN.key
MCP_TOKEN_SECRET_ARN: Final = settings_table.MCP_TOKEN_SECRET_ARN.key
SIGNING_SECRETS_KMS_KEY_ARN: Final = settings_table.SIGNING_SECRETS_KMS_KEY_ARN.key
MCP_TOKEN_KMS_KEY_ARN: Final = settings_table.MCP_TOKEN_KMS_KEY_ARN.key
NOTIFY_URL: Final = settings_table.NOTIFY_URL.key
WORKFLOW: Final = settings_table.WORKFLOW.key
API_RATE_LIMIT: Final = settings_table.API_RATE_LIMIT.key
API_BURST_LIMIT: Final = settings_table.API_BURST_LIMIT.key
RECEIVED_LOG_SHARDS: Final = settings_table.RECEIVED_LOG_SHARDS.key
RECONCILE_PARALLELISM: Final = settings_table.RECONCILE_PARALLELISM.key
RELAY_PARALLELIZATION_FACTOR: Final = settings_table.RELAY_PARALLELIZATION_FACTOR.key
RECONCILE_EVERY_MINUTES: Final = settings_table.RECONCILE_EVERY_MINUTES.key
WORK_QUEUE_AGE_ALARM_MINUTES: Final = settings_table.WORK_QUEUE_AGE_ALARM_MINUTES.key
APPROVAL_WAIT_ALARM_MINUTES: Final = settings_table.APPROVAL_WAIT_ALARM_MINUTES.key
WORKFLOW_SOURCE: Final = settings_table.WORKFLOW_SOURCE.key
WORKFLOW_REQUIREMENTS: Final = settings_table.WORKFLOW_REQUIREMENTS.key
WORKFLOW_SETTING_PREFIX: Final = settings_table.WORKFLOW_SETTINGS.key
ALERT_URL_KMS_KEY_ARN: Final = settings_table.ALERT_URL_KMS_KEY_ARN.key
ALERT_SIGNING_KMS_KEY_ARN: Final = settings_table.ALERT_SIGNING_KMS_KEY_ARN.key
NOTIFY_SECRET_KMS_KEY_ARN: Final = settings_table.NOTIFY_SECRET_KMS_KEY_ARN.key
WORKER_MANAGED_POLICY_ARNS: Final = settings_table.WORKER_MANAGED_POLICY_ARNS.key
WORKER_MANAGED_POLICY_ACK: Final = settings_table.WORKER_MANAGED_POLICY_ACK.key
WORKER_SECRET_ARNS: Final = settings_table.WORKER_SECRET_ARNS.key
WORKER_BEDROCK_MODEL_ARNS: Final = settings_table.WORKER_BEDROCK_MODEL_ARNS.key
WORKER_TIMEOUT_SECONDS: Final = settings_table.WORKER_TIMEOUT_SECONDS.key
WORKER_MEMORY_MB: Final = settings_table.WORKER_MEMORY_MB.key
WORKER_BATCH_SIZE: Final = settings_table.WORKER_BATCH_SIZE.key
ALERT_EMAIL: Final = settings_table.ALERT_EMAIL.key
TRACING: Final = settings_table.TRACING.key
TRACE_SAMPLE_PERCENT: Final = settings_table.TRACE_SAMPLE_PERCENT.key
DASHBOARD: Final = settings_table.DASHBOARD.key
ALARM_TOPIC_KEY: Final = settings_table.ALARM_TOPIC_KEY.key
TABLE_WARM_WRITE_UNITS: Final = settings_table.TABLE_WARM_WRITE_UNITS.key
CONTEXT_KEYS_ALLOWED: Final = settings_table.CONTEXT_KEYS_ALLOWED.key
# Short keys for a shipped workflow's settings: context key -> setting name.
SHORT_SETTING_KEYS: Final = {
    s.key: s.name for s in (*settings_table.AGENT_SETTINGS, *settings_table.NOTIFY_SETTINGS)
}
ALERT_URL_SECRET_ARN: Final = "alert_url_secret_arn"  # noqa: S105 (a context key, not a secret)
ALERT_SIGNING_SECRET_ARN: Final = "alert_signing_secret_arn"  # noqa: S105 (a context key)
NOTIFY_SECRET_ARN: Final = "notify_secret_arn"  # noqa: S105 (a context key, not a secret)
# The agent's screening guardrail (both or neither; the worker may apply it and no other).
GUARDRAIL_ID: Final = "guardrail_id"
GUARDRAIL_VERSION: Final = "guardrail_version"

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
        reconcile_parallelism: Received log shards one reconciler run reads at once.
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
        tracing: X-Ray active tracing on every function (``-c tracing=true``: the
            functions send their spans to Lambda's X-Ray daemon); off by default:
            Lambda's default sampling would be the largest line of the bill at low
            volume (docs/cost.md prices both).
        trace_sample_percent: Percent of new deliveries whose trace is recorded,
            decided once at receipt (a ``traceparent`` RelayLink sends decides by its
            own flag); every later hop follows that decision.
        worker_batch_size: Messages per worker invocation.
        worker_batching_window_seconds: How long the worker's event-source mapping
            gathers messages before it invokes the worker (fuller batches, a later start).
        worker_batch_concurrency: Messages of one batch a worker processes at once, or
            None for the whole batch (``batch_concurrency``).
        alert_email: Address subscribed to the workflow alert topic, or None.
        alert_url_kms_key_arn: Customer managed key encrypting the secret
            ``alert_url_secret_arn`` names, or None (the AWS managed key).
        alert_signing_kms_key_arn: The same for ``alert_signing_secret_arn``.
        notify_secret_kms_key_arn: The same for ``notify_secret_arn``.
        dashboard: The CloudWatch dashboard ($3 a month; off by default, docs/cost.md).
        alarm_topic_key: Encrypt the alarm topic with a customer managed key of its own
            (CloudWatch cannot publish to one under SNS's AWS managed key); off by
            default: the topic carries alarm states, no delivery data (docs/security.md).
        table_warm_write_units: Write units per second the table takes at once (warm
            throughput, for a launch: docs/capacity.md), or None for DynamoDB's own.
        context_keys_allowed: Context keys of a team's own app that the app passes
            over instead of refusing them as unknown.
    """

    stage: str = settings_table.STAGE.default
    mcp_allowed_hosts: tuple[str, ...] = ()
    alarm_email: str | None = None
    inbox_retention_days: int = settings_table.INBOX_RETENTION_DAYS.default
    worker_max_concurrency: int = settings_table.WORKER_MAX_CONCURRENCY.default
    worker_max_attempts: int = settings_table.WORKER_MAX_ATTEMPTS.default
    worker_workflow_seconds: int = settings_table.WORKER_WORKFLOW_SECONDS.default
    worker_retry_horizon_hours: int = settings_table.WORKER_RETRY_HORIZON_HOURS.default
    log_level: str = settings_table.LOG_LEVEL.default
    log_retention_days: int = settings_table.LOG_RETENTION_DAYS.default
    signing_secrets_arn: str | None = None
    mcp_token_secret_arn: str | None = None
    signing_secrets_kms_key_arn: str | None = None
    mcp_token_kms_key_arn: str | None = None
    notify_url: str | None = None
    workflow: str = settings_table.WORKFLOW.default
    api_rate_limit: int = settings_table.API_RATE_LIMIT.default
    api_burst_limit: int = settings_table.API_BURST_LIMIT.default
    received_log_shards: int = settings_table.RECEIVED_LOG_SHARDS.default
    relay_parallelization_factor: int = settings_table.RELAY_PARALLELIZATION_FACTOR.default
    reconcile_every_minutes: int = settings_table.RECONCILE_EVERY_MINUTES.default
    reconcile_parallelism: int = settings_table.RECONCILE_PARALLELISM.default
    work_queue_age_alarm_minutes: int = settings_table.WORK_QUEUE_AGE_ALARM_MINUTES.default
    approval_wait_alarm_minutes: int = settings_table.APPROVAL_WAIT_ALARM_MINUTES.default
    workflow_source: str | None = None
    workflow_requirements: tuple[str, ...] = ()
    workflow_settings: Mapping[str, str] = field(default_factory=dict)
    worker_managed_policy_arns: tuple[str, ...] = ()
    worker_managed_policy_ack: tuple[str, ...] = ()
    worker_secret_arns: tuple[str, ...] = ()
    worker_bedrock_model_arns: tuple[str, ...] = ()
    worker_timeout_seconds: int = settings_table.WORKER_TIMEOUT_SECONDS.default
    worker_memory_mb: int = settings_table.WORKER_MEMORY_MB.default
    worker_batch_size: int = settings_table.WORKER_BATCH_SIZE.default
    worker_batching_window_seconds: int = settings_table.WORKER_BATCHING_WINDOW_SECONDS.default
    worker_batch_concurrency: int | None = None
    alert_email: str | None = None
    alert_url_kms_key_arn: str | None = None
    alert_signing_kms_key_arn: str | None = None
    notify_secret_kms_key_arn: str | None = None
    tracing: bool = settings_table.TRACING.default
    trace_sample_percent: int = settings_table.TRACE_SAMPLE_PERCENT.default
    dashboard: bool = settings_table.DASHBOARD.default
    alarm_topic_key: bool = settings_table.ALARM_TOPIC_KEY.default
    table_warm_write_units: int | None = None
    context_keys_allowed: tuple[str, ...] = ()

    @property
    def workflow_code(self) -> WorkflowCode:
        """What the worker's asset must hold for the configured workflow."""
        return WorkflowCode(
            spec=self.workflow,
            source=Path(self.workflow_source) if self.workflow_source else None,
            requirements=self.workflow_requirements,
        )

    @property
    def shipped_workflow_settings(self) -> WorkflowSettings | None:
        """A shipped workflow's settings as its own settings class reads them (the
        agent's), or None for a workflow that declares none, or the deployer's own.

        Raises:
            SettingsError: the workflow's settings class refuses them.
        """
        shipped_as = {target: alias for alias, target in WORKFLOW_ALIASES.items()}
        alias = shipped_as.get(self.workflow_code.target)
        if alias is None:
            return None  # the deployer's own: not imported where the stack is synthesized
        return read_workflow_settings(alias, self.workflow_settings, shipped=SHIPPED)

    @property
    def screens_briefings(self) -> bool:
        """Whether the agent screens each briefing with a guardrail (and so may park a
        blocked one for a person's approval, without any ``approval`` setting)."""
        return self._runs_agent and GUARDRAIL_ID in self.workflow_settings

    @property
    def offers_agent_tools(self) -> bool:
        """Whether the agent offers tools (its acting ones wait for a person unless
        ``tools_without_approval`` exempts them: the team's code decides which act, and
        it is not imported where the stack is synthesized)."""
        return self._runs_agent and "tools" in self.workflow_settings

    @property
    def _runs_agent(self) -> bool:
        return self.workflow_code.target == WORKFLOW_ALIASES["agent"]

    @property
    def runs_notify(self) -> bool:
        """Whether the worker runs the shipped notify workflow."""
        return self.workflow_code.target == WORKFLOW_ALIASES["notify"]

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
        values = {
            setting.key: _parse(context, setting)
            for setting in settings_table.SETTINGS
            if setting.context
            and setting is not settings_table.WORKFLOW_SETTINGS
            and not isinstance(setting, settings_table.WorkflowSetting)
        }
        config = cls(**values, workflow_settings=_workflow_settings(context))
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
                + self.worker_batching_window_seconds
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
        quota = settings_table.API_BURST_LIMIT.high
        if self.api_burst_limit < min(self.api_rate_limit, quota):
            raise ConfigError(f"{API_BURST_LIMIT}: at least {API_RATE_LIMIT} (or {quota})")
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
            # The workflow's own settings class: the synth refuses what its cold start would.
            _ = self.shipped_workflow_settings
        except SettingsError as exc:
            raise ConfigError(
                f"{WORKFLOW_SETTING_PREFIX}* (workflow {self.workflow}): {exc}"
            ) from None

    @property
    def alert_secrets(self) -> tuple[tuple[str, str | None], ...]:
        """(secret ARN, its customer managed key ARN or None) of each alert secret set."""
        pairs = (
            (self.workflow_settings.get(ALERT_URL_SECRET_ARN), self.alert_url_kms_key_arn),
            (self.workflow_settings.get(ALERT_SIGNING_SECRET_ARN), self.alert_signing_kms_key_arn),
        )
        return tuple((arn, key) for arn, key in pairs if arn is not None)

    @property
    def notify_secret(self) -> tuple[str, str | None] | None:
        """(secret ARN, its customer managed key ARN or None) of the notify endpoint's
        secret, or None."""
        arn = self.workflow_settings.get(NOTIFY_SECRET_ARN)
        return None if arn is None else (arn, self.notify_secret_kms_key_arn)

    def _validate_alert_secrets(self) -> None:
        """The endpoints' secrets: complete ARNs, for their workflow, each with its key."""
        for key, kms_key, workflow, runs in (
            (
                ALERT_URL_SECRET_ARN,
                (ALERT_URL_KMS_KEY_ARN, self.alert_url_kms_key_arn),
                "agent",
                self._runs_agent,
            ),
            (
                ALERT_SIGNING_SECRET_ARN,
                (ALERT_SIGNING_KMS_KEY_ARN, self.alert_signing_kms_key_arn),
                "agent",
                self._runs_agent,
            ),
            (
                NOTIFY_SECRET_ARN,
                (NOTIFY_SECRET_KMS_KEY_ARN, self.notify_secret_kms_key_arn),
                "notify",
                self.runs_notify,
            ),
        ):
            arn = self.workflow_settings.get(key)
            if arn is not None and not _SECRET_ARN.match(arn):
                raise ConfigError(f"{key}: a complete Secrets Manager ARN (with its suffix)")
            if arn is not None and not runs:
                raise ConfigError(
                    f"{key}: only with the {workflow} workflow (-c workflow={workflow})"
                )
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


def _parse(context: Mapping[str, Any], setting: settings_table.Setting) -> Any:
    """One context value, parsed and bounded as its row of the settings table says."""
    if isinstance(setting, settings_table.Integer):
        return _integer(context, setting)
    if isinstance(setting, settings_table.OptionalInteger):
        return _optional_integer(context, setting)
    if isinstance(setting, settings_table.Text):
        return _text(context, setting)
    if isinstance(setting, settings_table.Flag):
        return _boolean(context, setting.key, setting.default)
    parse: Callable[[Mapping[str, Any], str], Any] = _FORMATTED.get(setting.key, _optional_text)
    return parse(context, setting.key)


def _text(context: Mapping[str, Any], setting: settings_table.Text) -> str:
    key = setting.key
    value = context.get(key, setting.default)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: a non-empty string")
    if not setting.choices:
        return value.strip()
    # A choice in any case (``-c log_level=debug``), stored as the table spells it.
    chosen = [choice for choice in setting.choices if choice.lower() == value.strip().lower()]
    if not chosen:
        raise ConfigError(f"{key}: one of {', '.join(setting.choices)}")
    return chosen[0]


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


def _integer(context: Mapping[str, Any], setting: settings_table.Integer) -> int:
    key, low, high = setting.key, setting.low, setting.high
    value = _bounded(context.get(key, setting.default), key, low=low, high=high)
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"{key}: one of {setting.choices}")
    return value


def _optional_integer(
    context: Mapping[str, Any], setting: settings_table.OptionalInteger
) -> int | None:
    value = context.get(setting.key)
    if value is None or value == "":
        return None
    return _bounded(value, setting.key, low=setting.low, high=setting.high)


def _bounded(value: Any, key: str, *, low: int, high: int) -> int:
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
    context: Mapping[str, Any], key: str, *, pattern: re.Pattern[str], what: str
) -> tuple[str, ...]:
    arns = [part.strip() for item in _listed(context.get(key), key) for part in item.split(",")]
    for arn in arns:
        if arn and not pattern.match(arn):
            raise ConfigError(f"{key}: {arn!r} is not {what}")
    return tuple(dict.fromkeys(arn for arn in arns if arn))


def names_in(context: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """The names context ``key`` lists (a JSON list or comma-separated), in order.

    Raises:
        ConfigError: the value is no list of strings.
    """
    return _names(context, key)


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
            # The construct's workflow_settings={"agent_tools": ...}: the short key's setting.
            name = SHORT_SETTING_KEYS.get(name, name)
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
    if isinstance(value, dict):  # a JSON setting (tool_settings) written as JSON in cdk.json
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if not isinstance(value, str):
        raise ConfigError(f"{key}: a string, number, boolean or JSON object")
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


def _hosts_of(context: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return _hosts(context.get(key))


def _requirements_of(context: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return _requirements(context.get(key))


# Context values whose form only infra checks (lists, ARNs, a folder); any other
# formatted setting is an optional string (checked by ``StackConfig.validate``).
_FORMATTED: dict[str, Callable[[Mapping[str, Any], str], Any]] = {
    MCP_ALLOWED_HOSTS: _hosts_of,
    WORKFLOW_SOURCE: _folder,
    WORKFLOW_REQUIREMENTS: _requirements_of,
    WORKER_MANAGED_POLICY_ARNS: partial(
        _arns, pattern=_MANAGED_POLICY_ARN, what="an IAM policy ARN"
    ),
    WORKER_MANAGED_POLICY_ACK: _names,
    CONTEXT_KEYS_ALLOWED: _names,
    WORKER_SECRET_ARNS: partial(
        _arns, pattern=_SECRET_ARN, what="a complete Secrets Manager ARN (with its suffix)"
    ),
    WORKER_BEDROCK_MODEL_ARNS: partial(
        _arns,
        pattern=_BEDROCK_ARN,
        what="a Bedrock model or inference profile ARN, without wildcards",
    ),
}
