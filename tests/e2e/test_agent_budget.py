"""The agent workflow on the local stack with a daily token budget below one model call:
every delivery fails at once, with a reason that names the budget, and no call is made.

The stack is the one ``relaylink-receiver local --workflow agent --workflow-setting
daily_token_budget=50`` starts (the Bedrock emulator, the alert topic, the worker in
its own process); deliveries come in signed over HTTP.
"""

from __future__ import annotations

import time

from functions.core.adapters import dynamodb_items
from functions.core.models import InboxItem, State
from local.stack import LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited
from tests.e2e.test_pipeline_over_http import _send as send
from tests.polling import poll

COUNT = 4
BUDGET = 50  # tokens a day: one call reserves the prompt's estimate + max_tokens (256)
# Failing at once: well within one delivery's first attempt, nowhere near a day's wait.
DEADLINE_SECONDS = 60.0


def _inbox(stack: LocalStack, delivery_ids: list[str]) -> list[InboxItem | None]:
    dynamodb = stack.state.aws_client("dynamodb")
    table = stack.state.resources.table_name
    items = []
    for delivery_id in delivery_ids:
        answer = dynamodb.get_item(
            TableName=table, Key=dynamodb_items.inbox_key(delivery_id), ConsistentRead=True
        )
        items.append(dynamodb_items.inbox_from_item(answer["Item"]) if "Item" in answer else None)
    return items


def test_a_daily_budget_below_one_call_fails_every_delivery_at_once_naming_it() -> None:
    options = StackOptions(
        seed=13, workflow="agent", workflow_settings={"daily_token_budget": str(BUDGET)}
    )
    with audited(options) as stack:
        started = time.monotonic()
        summary = send(stack, COUNT)
        assert summary.all_acknowledged
        ids = [result.delivery_id for result in summary.results]
        items = poll(
            lambda: _inbox(stack, ids),
            lambda seen: all(i is not None and i.state is State.FAILED for i in seen),
            deadline_seconds=DEADLINE_SECONDS,
            pause_seconds=0.2,
        )
        took = time.monotonic() - started
        assert [(i.state, i.last_error, i.attempts) for i in items if i is not None] == [
            (State.FAILED, "budget_too_small", 1)
        ] * COUNT, items
        print(f"{COUNT} deliveries failed budget_too_small within {took:.1f} s")
        assert stack.model_calls() == {}
        # Acknowledged: nothing waits in the queue or its dead letters.
        assert stack.quiet(DEADLINE_SECONDS), stack.queue_depths()
        worker_log = (stack.run_dir / "worker.log").read_text(encoding="utf-8")
        named = [
            line
            for line in worker_log.splitlines()
            if "daily_token_budget" in line and f'"daily_token_limit":{BUDGET}' in line
        ]
        assert len(named) == COUNT, worker_log[-2000:]
