"""Build the CDK app: settings from context, the stack, cdk-nag. ``app.py`` calls this."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Environment

from functions.core import metric_names
from infra import config as keys
from infra.config import StackConfig
from infra.nag import add_checks
from infra.stack import ReceiverStack

_CONTEXT_KEYS = (
    keys.STAGE,
    keys.MCP_ALLOWED_HOSTS,
    keys.ALARM_EMAIL,
    keys.INBOX_RETENTION_DAYS,
    keys.WORKER_MAX_CONCURRENCY,
    keys.WORKER_MAX_ATTEMPTS,
    keys.WORKER_RETRY_HORIZON_HOURS,
    keys.LOG_LEVEL,
    keys.LOG_RETENTION_DAYS,
    keys.SIGNING_SECRETS_ARN,
    keys.MCP_TOKEN_SECRET_ARN,
    keys.SIGNING_SECRETS_KMS_KEY_ARN,
    keys.MCP_TOKEN_KMS_KEY_ARN,
    keys.NOTIFY_URL,
    keys.WORKFLOW,
    keys.API_RATE_LIMIT,
    keys.API_BURST_LIMIT,
    keys.RECEIVED_LOG_SHARDS,
    keys.RELAY_PARALLELIZATION_FACTOR,
    keys.RECONCILE_EVERY_MINUTES,
    keys.WORK_QUEUE_AGE_ALARM_MINUTES,
    keys.APPROVAL_WAIT_ALARM_MINUTES,
    keys.WORKFLOW_SOURCE,
    keys.WORKFLOW_REQUIREMENTS,
    *keys.SHORT_SETTING_KEYS,
    keys.WORKER_MANAGED_POLICY_ARNS,
    keys.WORKER_MANAGED_POLICY_ACK,
    keys.WORKER_SECRET_ARNS,
    keys.WORKER_BEDROCK_MODEL_ARNS,
    keys.WORKER_TIMEOUT_SECONDS,
    keys.WORKER_MEMORY_MB,
    keys.WORKER_BATCH_SIZE,
    keys.WORKER_BATCH_CONCURRENCY,
    keys.WORKER_WORKFLOW_SECONDS,
    keys.ALERT_EMAIL,
    keys.ALERT_URL_KMS_KEY_ARN,
    keys.ALERT_SIGNING_KMS_KEY_ARN,
    keys.TRACING,
    keys.DASHBOARD,
    keys.TABLE_WARM_WRITE_UNITS,
)


def build_app(
    *, context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[App, ReceiverStack]:
    """The app with one receiver stack and AwsSolutions checks; not yet synthesized.

    Args:
        context: Extra context (tests pass cdk.json's context plus overrides; the CDK
            CLI passes its own through the environment).
        outdir: Cloud assembly directory (the CLI sets it itself).
    """
    app = App(context=dict(context or {}), outdir=outdir)
    everything = app.node.get_all_context()
    settings = {
        key: value
        for key, value in everything.items()
        if value is not None
        and (key in _CONTEXT_KEYS or key.startswith(keys.WORKFLOW_SETTING_PREFIX))
    }
    config = StackConfig.from_context(settings)
    stack = ReceiverStack(
        app,
        f"{metric_names.SERVICE}-{config.stage}",
        config=config,
        # Environment-agnostic unless the CLI knows the account (deploy); synth stays offline.
        env=Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=os.environ.get("CDK_DEFAULT_REGION"),
        ),
    )
    add_checks(app)
    return app, stack
