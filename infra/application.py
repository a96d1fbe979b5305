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
    keys.RECONCILE_EVERY_MINUTES,
    keys.WORK_QUEUE_AGE_ALARM_MINUTES,
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
    settings = {
        key: app.node.try_get_context(key)
        for key in _CONTEXT_KEYS
        if app.node.try_get_context(key) is not None
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
