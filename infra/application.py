"""Build the CDK app: settings from context, the stack, cdk-nag. ``app.py`` calls this."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Environment

from functions.core import metric_names, settings_table
from infra import config as keys
from infra.config import ConfigError, StackConfig
from infra.nag import add_checks
from infra.stack import ReceiverStack

# Every context key of the settings table, and the agent's short keys.
_CONTEXT_KEYS = settings_table.context_keys()


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
    _refuse_unknown_keys(everything)
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


def _refuse_unknown_keys(context: Mapping[str, Any]) -> None:
    """A misspelt key would be ignored, and its setting silently left at its default.

    Raises:
        ConfigError: naming the first unknown key and the closest known one.
    """
    allowed = keys.names_in(context, keys.CONTEXT_KEYS_ALLOWED)
    for key in sorted(context):
        if (reason := settings_table.unknown_context_key(key, allowed)) is not None:
            raise ConfigError(reason)
