"""The environment of each child process: its functions' own, plus the emulator's.

The functions' part comes from :mod:`infra.environments`, as the CDK stack's does; the
rest points boto3 at the emulator and sets what Lambda and Powertools would (Lambda's
log format and application log level, which :mod:`local.lambda_logging` applies).
"""

from __future__ import annotations

import json
import os

from cli.state import LocalState
from functions.core import env_names, metric_names, settings_table
from functions.workflows.model_client import DEFAULT_MODEL_ID
from infra.environments import (
    application_log_level,
    receiver_environment,
    reconciler_environment,
    relay_environment,
    worker_environment,
)
from local.lambda_logging import LAMBDA_JSON_FORMAT
from local.stack_options import StackOptions

# What a child keeps of the supervisor's own environment.
_INHERITED = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYTHONPATH"})


def _base_environment(state: LocalState, options: StackOptions) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k in _INHERITED}
    environment.update(state.client_environment())
    environment.update(
        {
            env_names.ENV_POWERTOOLS_SERVICE_NAME: metric_names.SERVICE,
            env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: metric_names.METRICS_NAMESPACE,
            **lambda_log_environment(options.log_level),
            "PYTHONUNBUFFERED": "1",
        }
    )
    # The collector Lambda would not have (X-Ray's daemon is its deployed counterpart).
    if state.spans_file:
        environment[env_names.ENV_SPANS_FILE] = state.spans_file
    if options.otlp_endpoint:
        environment[env_names.ENV_OTLP_ENDPOINT] = options.otlp_endpoint
    return environment


def lambda_log_environment(log_level: str) -> dict[str, str]:
    """The log settings a function deployed with ``log_level`` runs under: Powertools'
    level (the stack sets it) and the format and application log level Lambda sets
    from the function's logging configuration (``infra/lambda_function.py``)."""
    return {
        env_names.ENV_POWERTOOLS_LOG_LEVEL: log_level,
        env_names.ENV_LAMBDA_LOG_FORMAT: LAMBDA_JSON_FORMAT,
        env_names.ENV_LAMBDA_LOG_LEVEL: application_log_level(log_level),
    }


def front_door_environment(state: LocalState, options: StackOptions) -> dict[str, str]:
    """The receiver's, behind the front door."""
    resources = state.resources
    return {
        **_base_environment(state, options),
        **receiver_environment(
            table_name=resources.table_name,
            signing_secrets_arn=resources.signing_secrets_arn,
            inbox_retention_days=settings_table.INBOX_RETENTION_DAYS.default,
            secrets_max_age_seconds=options.secrets_max_age_seconds,
            trace_sample_percent=options.trace_sample_percent,
        ),
    }


def worker_side_environment(
    state: LocalState, options: StackOptions, *, notify_url: str
) -> dict[str, str]:
    """The relay's, the worker's and the reconciler's in one: they share a process.

    Raises:
        ValueError: two of them would be told different values for one key.
    """
    resources = state.resources
    parts = [
        worker_environment(
            table_name=resources.table_name,
            work_queue_url=resources.work_queue_url,
            dead_letter_queue_url=resources.dead_letter_queue_url,
            mcp_token_secret_arn=resources.mcp_token_secret_arn,
            mcp_allowed_hosts=["127.0.0.1"],
            workflow=options.workflow,
            archive_bucket=resources.archive_bucket,
            max_attempts=options.max_attempts,
            lease_seconds=options.lease_seconds,
            notify_url=notify_url,
            workflow_settings=options.workflow_settings,
            alert_topic_arn=resources.alert_topic_arn or None,
            mcp_timeout_seconds=options.mcp_timeout_seconds,
            secrets_max_age_seconds=options.secrets_max_age_seconds,
            retry_base_seconds=options.retry_base_seconds,
            workflow_seconds=options.workflow_seconds,
        ),
        relay_environment(work_queue_url=resources.work_queue_url),
        reconciler_environment(
            table_name=resources.table_name,
            work_queue_url=resources.work_queue_url,
            lease_seconds=options.lease_seconds,
            pending_age_seconds=60,
            effect_age_seconds=max(60, options.lease_seconds + 1),
        ),
    ]
    merged: dict[str, str] = {}
    for part in parts:
        for key, value in part.items():
            if merged.get(key, value) != value:
                raise ValueError(f"functions disagree on {key}")
            merged[key] = value
    # Local only: the demo MCP server is plain HTTP on loopback.
    merged[env_names.ENV_MCP_ALLOW_INSECURE_LOOPBACK] = "true"
    environment = {**_base_environment(state, options), **merged}
    if options.workflow_source:
        # What the deployed worker's asset holds at its root: the workflow folder.
        paths = [options.workflow_source, environment.get("PYTHONPATH", "")]
        environment["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    if options.model:
        environment.update(agent_environment(state, options))
    return environment


def agent_environment(state: LocalState, options: StackOptions) -> dict[str, str]:
    """The agent workflow's settings: the Bedrock emulator, and the alert topic."""
    settings = {
        "bedrock_endpoint_url": state.bedrock_url,
        "model_id": DEFAULT_MODEL_ID,
        "max_tokens": str(options.model_max_tokens),
        "daily_token_budget": str(options.daily_token_budget),
        **options.workflow_settings,
    }
    return {
        env_names.ENV_WORKFLOW_SETTINGS: json.dumps(settings, sort_keys=True),
        env_names.ENV_ALERT_TOPIC_ARN: state.resources.alert_topic_arn,
    }
