"""The shipped workflows wired to their production adapters (the only part that knows AWS).

``WORKFLOW`` names a factory here (by alias, see :data:`SHIPPED`, or as
``module:attribute``); the worker calls it once per container with the
:class:`~functions.core.workflow.WorkflowContext` its settings give.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import boto3
from botocore.config import Config

from functions.core.adapters.archive_s3 import S3Archive
from functions.core.adapters.cloudwatch_metrics import EmfMetrics
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals
from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.adapters.dynamodb_spend import DynamoDbSpend
from functions.core.adapters.notifier_http import HttpNotifier, check_target
from functions.core.adapters.webhook_signing import WebhookSigner
from functions.core.budget import TokenBudget
from functions.core.effects import EffectMode
from functions.core.ports.workflow import Workflow
from functions.core.workflow import (
    WorkflowContext,
    WorkflowFactory,
    factory_name,
    load_workflow,
    reads_settings,
)
from functions.workflows.adapters.alert_http import HttpAlerts
from functions.workflows.adapters.alert_secrets import SecretBackedAlerts
from functions.workflows.adapters.alert_sns import SnsAlerts
from functions.workflows.adapters.bedrock_converse import BedrockConverse
from functions.workflows.adapters.bedrock_guardrail import BedrockGuardrail
from functions.workflows.adapters.endpoint_secrets import secret_text
from functions.workflows.adapters.notify_secret import SecretBackedNotifier, parse_endpoint
from functions.workflows.agent import (
    SETTING_ALERT_SIGNING_SECRET_ARN,
    SETTING_ALERT_URL_SECRET_ARN,
    AgentSettings,
    AgentWorkflow,
    configured_tools,
)
from functions.workflows.archive import ArchiveWorkflow
from functions.workflows.model_client import ModelClient, ModelSettings
from functions.workflows.notify import (
    SETTING_NOTIFY_SECRET_ARN,
    Notifier,
    NotifySettings,
    NotifyWorkflow,
)

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.client import BedrockRuntimeClient

# One HTTP attempt per Converse call, within 50 s (connect and read): a summary of a
# few hundred tokens takes seconds, and one hung call ends within the default workflow
# allowance (WORKER_WORKFLOW_SECONDS, 60 s). No botocore retry: a resent call after a
# 5xx or a timeout may run the model twice, and its answer would hide the first call
# from the token budget (a 500 then a throttle looked like a call that never ran). The
# adapter maps the one answer; our own back-off retries, each call reserved anew.
BEDROCK_CONFIG: Final = Config(
    connect_timeout=5, read_timeout=45, retries={"mode": "standard", "total_max_attempts": 1}
)
# ApplyGuardrail only reads: botocore's own retry of a throttle or a 5xx is safe (the
# screening's outcome contract is the read-only one). It is a short call; two
# attempts of at most 13 s keep screening, the model call and the alert together within
# the worker's default timeout after the MCP fetch's bound (45 + 26 + 50 s of 180 s).
GUARDRAIL_CONFIG: Final = Config(
    connect_timeout=3, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 2}
)
# One attempt per publish: SNS cannot deduplicate a standard topic's messages, so
# botocore must never resend one after a 5xx or a timeout (the ledger decides).
SNS_CONFIG: Final = Config(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 1})
DYNAMODB_CONFIG: Final = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})
# An endpoint's secrets are read again every SECRETS_MAX_AGE_SECONDS while a batch's
# posts wait for the read (one at a time: endpoint_secrets.BuiltOnFirstUse): short
# bounds, as the receiver's reads of its signing secrets have, not botocore's 60 s.
SECRETS_CONFIG: Final = Config(
    connect_timeout=1, read_timeout=2, retries={"mode": "standard", "total_max_attempts": 2}
)


def build_archive(context: WorkflowContext) -> ArchiveWorkflow:
    """``WORKFLOW=archive``: keep every package (its record is the archive), nothing else.

    Raises:
        ValueError: ``ARCHIVE_BUCKET`` is missing (a package too large for its record
            is kept there, under its digest).
    """
    if not context.archive_bucket:
        raise ValueError("the archive workflow needs ARCHIVE_BUCKET")
    return ArchiveWorkflow()


@reads_settings(NotifySettings.from_mapping)
def build_notify(context: WorkflowContext) -> NotifyWorkflow:
    """``WORKFLOW=notify``: archive to S3, notify over HTTP (signed, with a signing
    secret in ``notify_secret_arn``).

    Raises:
        ValueError: neither ``NOTIFY_URL`` nor ``notify_secret_arn`` is set;
            ``ARCHIVE_BUCKET`` is missing; ``NOTIFY_URL`` is not allowed; the setting
            ``notify_url_deduplicates`` is not ``true`` or ``false``.
    """
    settings = NotifySettings.from_mapping(context.settings)
    if not context.notify_url and settings.notify_secret_arn is None:
        raise ValueError("the notify workflow needs NOTIFY_URL (or its secret) and ARCHIVE_BUCKET")
    if context.notify_url:  # checked at cold start, with or without a secret
        _check_url("NOTIFY_URL", context.notify_url, context)
    notifier: Notifier
    if settings.notify_secret_arn is None:
        notifier = _http_notifier(context.notify_url, None, context)
    else:
        notifier = SecretBackedNotifier(
            functools.partial(_notifier_from_secret, settings.notify_secret_arn, context),
            max_age_seconds=context.secrets_max_age_seconds,
            clock=context.clock,
        )
    return NotifyWorkflow(
        deduplicates=settings.notify_url_deduplicates,
        archive=_archive(context, "notify"),
        notifier=notifier,
    )


def _notifier_from_secret(secret_arn: str, context: WorkflowContext) -> HttpNotifier:
    """The notifier to the URL and with the signer the secret holds (NOTIFY_URL serves as
    the URL when it holds only a key).

    Raises:
        ValueError: naming the setting, never a value.
    """
    name = SETTING_NOTIFY_SECRET_ARN
    text = secret_text(boto3.client("secretsmanager", config=SECRETS_CONFIG), secret_arn, name=name)
    endpoint = parse_endpoint(text, name=name)
    if endpoint.url is not None and context.notify_url:
        raise ValueError(f"NOTIFY_URL and the url in {name}: one or the other")
    url = endpoint.url or context.notify_url
    if url:
        _check_url(name, url, context)
    signer = None
    if endpoint.signing_secret is not None:
        signer = WebhookSigner(secret=endpoint.signing_secret, clock=context.clock)
    return _http_notifier(url, signer, context)


def _http_notifier(
    url: str | None, signer: WebhookSigner | None, context: WorkflowContext
) -> HttpNotifier:
    if not url:
        raise ValueError("the notify workflow needs NOTIFY_URL or a url in its secret")
    return HttpNotifier(
        url=url,
        timeout_seconds=context.timeout_seconds,
        allow_insecure_loopback=context.allow_insecure_loopback,
        signer=signer,
    )


@reads_settings(AgentSettings.from_mapping)
def build_agent(context: WorkflowContext) -> AgentWorkflow:
    """``WORKFLOW=agent``: archive, summarise with Bedrock, alert over SNS and/or HTTP.

    Raises:
        ValueError: a workflow setting is malformed or not known; ``ARCHIVE_BUCKET``
            is missing; there is neither ``ALERT_TOPIC_ARN`` nor ``alert_url``; a URL
            is not HTTPS (or loopback HTTP, when allowed); the ``tools`` setting names
            no sequence of tools; a guardrail or an approval gate without ``TABLE_NAME``.
    """
    settings = AgentSettings.from_mapping(context.settings)
    parts = _model_parts(context, "agent")
    topic = None
    if context.alert_topic_arn:
        sns = boto3.client("sns", config=SNS_CONFIG)
        topic = SnsAlerts(client=sns, topic_arn=context.alert_topic_arn)
    webhook = build_alert_webhook(settings, context) if settings.has_alert_url else None
    approvals = None
    guardrail = None
    if settings.guardrail is not None:
        client = guardrail_client(settings.bedrock_endpoint_url)
        guardrail = BedrockGuardrail(client=client, guardrail=settings.guardrail)
    tools = configured_tools(settings)
    if settings.approval.any or guardrail is not None or tools:
        if not context.table_name:
            raise ValueError("the agent workflow's approval gate needs TABLE_NAME")
        approvals = DynamoDbApprovals(
            client=boto3.client("dynamodb", config=DYNAMODB_CONFIG), table_name=context.table_name
        )
    return AgentWorkflow(
        settings=settings,
        archive=_archive(context, "agent"),
        model=parts.model,
        topic=topic,
        webhook=webhook,
        budget=parts.budget,
        clock=context.clock,
        metrics=parts.metrics,
        spend=parts.spend,
        tools=tools,
        approvals=approvals,
        guardrail=guardrail,
    )


def model_client(context: WorkflowContext) -> ModelClient:
    """A budgeted, counted Bedrock ``Converse`` client for ``effects.model``, in any workflow.

    Call it once in the workflow's factory. It reads the model settings from
    ``WORKFLOW_SETTINGS`` (``model_id``, ``max_tokens``, ``temperature``,
    ``daily_token_budget``, ``bedrock_endpoint_url``; other names are the workflow's)
    and keeps the day's token budget and each delivery's spend in the stack's table.

    Raises:
        ValueError: a model setting is malformed; a budget or spend record without
            ``TABLE_NAME``; ``bedrock_endpoint_url`` is not HTTPS (or loopback HTTP,
            when allowed).
    """
    settings = ModelSettings.from_mapping(context.settings)
    parts = _model_parts(context, "model client")
    return ModelClient(
        model=parts.model,
        clock=context.clock,
        metrics=parts.metrics,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        budget=parts.budget,
        spend=parts.spend,
        token_cap=settings.delivery_token_cap,
    )


@dataclass(frozen=True, slots=True)
class _ModelParts:
    model: BedrockConverse
    budget: TokenBudget | None
    spend: DynamoDbSpend | None
    metrics: EmfMetrics


def _model_parts(context: WorkflowContext, user: str) -> _ModelParts:
    settings = ModelSettings.from_mapping(context.settings)
    if settings.bedrock_endpoint_url is not None:
        _check_url("bedrock_endpoint_url", settings.bedrock_endpoint_url, context)
    wants_budget = settings.daily_token_budget > 0
    if wants_budget and not context.table_name:
        raise ValueError(f"the {user}'s token budget needs TABLE_NAME")
    dynamodb = boto3.client("dynamodb", config=DYNAMODB_CONFIG) if context.table_name else None
    budget = None
    if wants_budget and dynamodb is not None:
        store = DynamoDbBudget(
            client=dynamodb,
            table_name=context.table_name,
            default_limit=settings.daily_token_budget,
        )
        budget = TokenBudget(store)
    bedrock = bedrock_client(settings.bedrock_endpoint_url)
    return _ModelParts(
        model=BedrockConverse(client=bedrock, model_id=settings.model_id),
        budget=budget,
        spend=(
            None
            if dynamodb is None
            else DynamoDbSpend(client=dynamodb, table_name=context.table_name)
        ),
        # The worker's own metric set: it is flushed after every batch.
        metrics=EmfMetrics(),
    )


def bedrock_client(endpoint_url: str | None) -> BedrockRuntimeClient:
    """The agent's ``bedrock-runtime`` client: one HTTP attempt per call (``BEDROCK_CONFIG``)."""
    return boto3.client("bedrock-runtime", endpoint_url=endpoint_url, config=BEDROCK_CONFIG)


def guardrail_client(endpoint_url: str | None) -> BedrockRuntimeClient:
    """The screening's ``bedrock-runtime`` client: botocore's retries on (``GUARDRAIL_CONFIG``)."""
    return boto3.client("bedrock-runtime", endpoint_url=endpoint_url, config=GUARDRAIL_CONFIG)


def build_alert_webhook(
    settings: AgentSettings, context: WorkflowContext
) -> HttpAlerts | SecretBackedAlerts:
    """The HTTP alert channel: to ``alert_url`` as it is, or (with a secret named) one
    whose URL and signer are read from their secrets on its first alert (and again once
    they are ``secrets_max_age_seconds`` old).

    Raises:
        ValueError: a plain ``alert_url`` that is not HTTPS (or loopback, when allowed).
    """
    if settings.alert_url_secret_arn is None and settings.alert_signing_secret_arn is None:
        return _http_alerts(settings.alert_url, None, settings, context)
    if settings.alert_url is not None:  # a plain URL is checked at cold start, as without a signer
        _check_url("alert_url", settings.alert_url, context)

    def from_secrets() -> HttpAlerts:
        secrets = boto3.client("secretsmanager", config=SECRETS_CONFIG)
        url = settings.alert_url
        if settings.alert_url_secret_arn is not None:
            name = SETTING_ALERT_URL_SECRET_ARN
            url = secret_text(secrets, settings.alert_url_secret_arn, name=name)
            _check_url(name, url, context)
        signer = None
        if settings.alert_signing_secret_arn is not None:
            name = SETTING_ALERT_SIGNING_SECRET_ARN
            secret = secret_text(secrets, settings.alert_signing_secret_arn, name=name)
            signer = WebhookSigner(secret=secret, clock=context.clock)
        return _http_alerts(url, signer, settings, context)

    keyed = settings.alert_url_deduplicates
    return SecretBackedAlerts(
        from_secrets,
        mode=EffectMode.KEYED if keyed else EffectMode.OPERATOR,
        max_age_seconds=context.secrets_max_age_seconds,
        clock=context.clock,
    )


def _http_alerts(
    url: str | None,
    signer: WebhookSigner | None,
    settings: AgentSettings,
    context: WorkflowContext,
) -> HttpAlerts:
    if url is None:
        raise ValueError("the agent workflow's HTTP alerts need alert_url or its secret")
    return HttpAlerts(
        url=url,
        timeout_seconds=context.timeout_seconds,
        allow_insecure_loopback=context.allow_insecure_loopback,
        deduplicates=settings.alert_url_deduplicates,
        signer=signer,
    )


def _archive(context: WorkflowContext, workflow: str) -> S3Archive:
    if not context.archive_bucket:
        raise ValueError(f"the {workflow} workflow needs ARCHIVE_BUCKET")
    return S3Archive(client=boto3.client("s3"), bucket=context.archive_bucket)


def _check_url(name: str, url: str, context: WorkflowContext) -> None:
    try:
        check_target(url, allow_insecure_loopback=context.allow_insecure_loopback)
    except ValueError:
        raise ValueError(f"{name} must be https (http only to loopback, when allowed)") from None


# The shipped workflows by the short names ``WORKFLOW`` (and CDK context) accept.
SHIPPED: Final[Mapping[str, WorkflowFactory]] = {
    "archive": build_archive,
    "notify": build_notify,
    "agent": build_agent,
}
# This module as the worker's asset lays it out (``functions.…``, also when installed
# from the wheel under ``relaylink_receiver``): where infra finds an alias's code.
_ASSET_MODULE: Final = __name__[__name__.index("functions.") :]
# Each alias as the ``module:attribute`` it stands for.
WORKFLOW_ALIASES: Final[Mapping[str, str]] = {
    alias: f"{_ASSET_MODULE}:{factory_name(factory)}" for alias, factory in SHIPPED.items()
}


def load(spec: str, context: WorkflowContext) -> Workflow:
    """The workflow ``WORKFLOW`` names: a shipped one by alias, or ``module:attribute``.

    Raises:
        ValueError: The spec is malformed or names nothing usable (fail at cold start).
    """
    return load_workflow(spec, context, shipped=SHIPPED)
