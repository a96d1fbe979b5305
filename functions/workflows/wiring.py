"""The shipped workflows wired to their production adapters (the only part that knows AWS).

``WORKFLOW`` names a factory here (``module:attribute``); the worker calls it once per
container with the :class:`~functions.core.workflow.WorkflowContext` its settings give.
"""

from __future__ import annotations

import boto3

from functions.core.adapters.archive_s3 import S3Archive
from functions.core.adapters.notifier_http import HttpNotifier
from functions.core.workflow import WorkflowContext
from functions.workflows.default import DefaultWorkflow


def build_default(context: WorkflowContext) -> DefaultWorkflow:
    """The factory the ``WORKFLOW`` setting names by default: archive to S3, notify over HTTP.

    Raises:
        ValueError: ``NOTIFY_URL`` or ``ARCHIVE_BUCKET`` is missing or not allowed.
    """
    if not context.notify_url or not context.archive_bucket:
        raise ValueError("the default workflow needs NOTIFY_URL and ARCHIVE_BUCKET")
    return DefaultWorkflow(
        archive=S3Archive(client=boto3.client("s3"), bucket=context.archive_bucket),
        notifier=HttpNotifier(
            url=context.notify_url,
            timeout_seconds=context.timeout_seconds,
            allow_insecure_loopback=context.allow_insecure_loopback,
        ),
    )


# Stand-ins until the agent branch lands: the workflow aliases name these factories,
# and the synth checks that the named factory exists. The agent branch's wiring.py
# replaces this whole block with the real archive and agent workflows.
def build_archive(context: WorkflowContext) -> DefaultWorkflow:
    """``WORKFLOW=archive`` (stand-in)."""
    raise ValueError("the archive workflow comes with the agent branch")


def build_agent(context: WorkflowContext) -> DefaultWorkflow:
    """``WORKFLOW=agent`` (stand-in)."""
    raise ValueError("the agent workflow comes with the agent branch")
