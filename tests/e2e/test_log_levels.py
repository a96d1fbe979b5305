"""The local stack at the log levels a deployer may choose, under Lambda's log handling.

Each child runs its handlers as Lambda would (``local/lambda_logging.py``): the root
logger at the application log level the stack would configure, and Lambda's filter over
what the functions write. The children's logs are what CloudWatch Logs would hold.
"""

from __future__ import annotations

import asyncio
import logging

from functions.core import metric_names
from local.lambda_logging import line_level
from local.sender import Sender, SenderConfig, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited
from tests.polling import poll
from tests.processing_harness import emitted_metrics

DELIVERIES = 3
QUIET_DEADLINE_SECONDS = 60.0
# Each function's metrics, by the child that runs it.
EXPECTED_METRICS = {
    "front_door.log": {metric_names.receiver_outcome_metric("accepted")},
    "worker.log": {
        metric_names.METRIC_WORK_RELAYED,
        metric_names.METRIC_WORK_COMPLETED,
        metric_names.METRIC_RECONCILER_PENDING_REQUEUED,
    },
}


def _deliver(stack: LocalStack) -> None:
    """A few deliveries, each completed."""
    state = stack.state
    config = SenderConfig(
        url=state.webhook_url, secrets=tuple(state.signing_secrets), timeout_seconds=10.0
    )

    async def send() -> Summary:
        async with Sender(config) as sender:
            return await sender.send_new(DELIVERIES, mcp_url=state.mcp_url)

    summary = asyncio.run(send())
    assert summary.all_acknowledged
    assert stack.quiet(QUIET_DEADLINE_SECONDS, expected=DELIVERIES), stack.queue_depths()


def _metrics(log: str) -> set[str]:
    """Every count the log reports: an EMF metric, or a field of a line of counts."""
    return set(emitted_metrics(log))


def _logs(stack: LocalStack) -> dict[str, str]:
    return {log.name: log.read_text(encoding="utf-8") for log in stack.run_dir.glob("*.log")}


def test_at_debug_the_pipeline_logs_no_secret() -> None:
    # audited() fails the test if a child's log holds a secret, the token or a body.
    with audited(StackOptions(seed=21, log_level="DEBUG")) as stack:
        _deliver(stack)
        logs = _logs(stack)

    levels = {line_level(line) for log in logs.values() for line in log.splitlines()}
    assert min(levels) == logging.DEBUG  # DEBUG lines do reach the logs


def test_at_warning_every_function_still_reports_its_metrics() -> None:
    options = StackOptions(seed=22, log_level="WARNING", reconcile_interval_seconds=0.2)
    with audited(options) as stack:
        _deliver(stack)
        missing = poll(
            lambda: {
                name: expected - _metrics(_logs(stack).get(name, ""))
                for name, expected in EXPECTED_METRICS.items()
            },
            lambda missing: not any(missing.values()),
            deadline_seconds=QUIET_DEADLINE_SECONDS,
        )
        logs = _logs(stack)

    assert not any(missing.values()), missing
    for log in logs.values():
        assert '"delivery handled"' not in log  # the receiver's INFO line: below WARNING
