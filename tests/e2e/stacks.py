"""Stacks for the end-to-end tests, with the log audit over the children's logs.

The children's logs (the receiver, relay, worker and reconciler as Lambda would
print them) are files in the stack's run directory, outside the in-process log
capture; :func:`audited` runs the same audit over them when a stack stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from local.sender import Sender, SenderConfig, Summary
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests import log_audit, span_audit


@contextmanager
def audited(options: StackOptions) -> Iterator[LocalStack]:
    """A running stack whose children's logs must pass the log audit at the end."""
    with LocalStack(options) as running:
        for secret in running.state.signing_secrets:
            log_audit.register_secret(secret)
        log_audit.register_token(running.state.mcp_token)
        yield running
        findings = {
            log.name: log_audit.check_output(log.read_text(encoding="utf-8", errors="replace"))
            for log in sorted(running.run_dir.glob("*.log"))
        }
        spans = Path(running.state.spans_file)
        # The log rules hold for spans too (a stack that received nothing has none).
        span_findings = span_audit.check_span_file(spans) if spans.exists() else []
    assert findings, "the children wrote no logs at all"
    assert {name: rules for name, rules in findings.items() if rules} == {}
    assert span_findings == []


def send_new(stack: LocalStack, count: int, *, seed: int, concurrency: int = 4) -> Summary:
    """``count`` new signed deliveries to the stack's front door (a 30 s wait is 0.1 s)."""
    state = stack.state
    config = SenderConfig(
        url=state.webhook_url,
        secrets=tuple(state.signing_secrets),
        timeout_seconds=10.0,
        time_scale=300.0,
        concurrency=concurrency,
        seed=seed,
    )

    async def send() -> Summary:
        async with Sender(config) as sender:
            return await sender.send_new(count, mcp_url=state.mcp_url)

    return asyncio.run(send())
