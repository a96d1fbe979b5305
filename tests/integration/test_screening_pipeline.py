"""Screening end to end in process: the production worker, moto, MCP, the Bedrock emulator.

The agent runs with ``guardrail_id`` / ``guardrail_version`` (the emulator's guardrail):
the verdict is a step record in the table, so a worker killed after it never screens
again; a flagged package (``pkg_flagged...``: its briefing carries the emulator's
marker) parks ``awaiting_approval`` on the table with no model call, and once approved
is summarised and alerted once, screened once.
"""

from __future__ import annotations

import json
import uuid

import pytest

from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals
from functions.core.models import State, WorkItem
from functions.core.ports.approvals import ApprovalDecision, Decision
from functions.workflows.screening import APPROVAL_SCREENING
from local.bedrock_emulator import DEMO_GUARDRAIL_ID, GUARDRAIL_MARKER
from local.testkit.moto_world import TABLE
from local.testkit.worker_rig import LEASE_SECONDS
from tests.integration import test_agent_pipeline as pipeline
from tests.integration.test_agent_pipeline import AgentStack
from tests.integration.test_pipeline import crashed

# The agent on moto, as its own pipeline tests run it (fixtures).
converse_crashes = pipeline.converse_crashes
agent_stack = pipeline.stack
GUARDRAIL = {"guardrail_id": DEMO_GUARDRAIL_ID, "guardrail_version": "1"}


def deliver(stack: AgentStack, package_id: str) -> WorkItem:
    work = WorkItem(str(uuid.uuid4()), "package.received", package_id, stack.mcp_server.url)
    stack.aws.accept(work)
    stack.aws.enqueue(work)
    return work


def test_a_worker_killed_after_the_screening_is_recorded_never_screens_again(
    agent_stack: AgentStack,
) -> None:
    stack = agent_stack
    work = deliver(stack, "pkg_01JE7Q9V5K3M8N2P4R6T")
    stack.crashes.before_send = True  # the worker dies as it sends the model call
    messages = stack.aws.receive()
    with pytest.raises(BaseException) as died:
        stack.worker(extra=GUARDRAIL).run(messages)
    assert crashed(died.value)
    stack.aws.clock.advance(LEASE_SECONDS + 1)
    stack.aws.make_visible(messages)
    stack.worker(extra=GUARDRAIL).run_visible()
    assert stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    assert len(stack.alerts_for(work.delivery_id)) == 1
    assert len(stack.emulator.emulator.guardrail_texts()) == 1


def test_a_flagged_briefing_parks_with_no_model_call_and_once_approved_is_alerted_once(
    agent_stack: AgentStack,
) -> None:
    stack = agent_stack
    work = deliver(stack, "pkg_flagged01JE7Q9V5K3M8N2P")
    _, result = stack.worker(extra=GUARDRAIL).run_visible()
    assert result == {"batchItemFailures": []}
    inbox = stack.aws.inbox(work.delivery_id)
    assert (inbox.state, inbox.approval) == (State.AWAITING_APPROVAL, APPROVAL_SCREENING)
    assert stack.emulator.calls() == {}
    assert stack.aws.queue_counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
    approvals = DynamoDbApprovals(client=stack.aws.dynamodb, table_name=TABLE)
    record = approvals.get(work.delivery_id, APPROVAL_SCREENING)
    assert record is not None
    assert "PROMPT_ATTACK" in record.proposal["summary"]
    assert GUARDRAIL_MARKER not in json.dumps(record.proposal)
    decision = Decision(ApprovalDecision.APPROVED, "operator", stack.aws.clock.now(), "t1")
    assert approvals.decide(work.delivery_id, APPROVAL_SCREENING, decision)
    stack.aws.enqueue(work)  # what approvals approve sends
    stack.worker(extra=GUARDRAIL).run_visible()
    assert stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    assert len(stack.alerts_for(work.delivery_id)) == 1
    assert stack.emulator.calls() == {work.delivery_id: 1}
    assert len(stack.emulator.emulator.guardrail_texts()) == 1


def test_the_guardrail_is_sent_exactly_the_package_text_the_model_request_carries(
    agent_stack: AgentStack,
) -> None:
    """Over the wire: ApplyGuardrail's text is the Converse request's fenced package line
    (attachments' names and media types included), byte for byte."""
    stack = agent_stack
    work = deliver(stack, "pkg_01JE7Q9V5K3M8N2P4R6T")
    stack.worker(extra=GUARDRAIL).run_visible()
    assert stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    (screened,) = stack.emulator.emulator.guardrail_texts()
    request = stack.emulator.emulator.last_request(work.delivery_id)
    assert request is not None
    user = request["messages"][0]["content"][0]["text"].split("\n")
    opening = next(line for line in user if line.startswith("<package-data-"))
    assert screened == user[user.index(opening) + 1]
    assert '"attachments": [{"name": ' in screened
