"""The agent's durable tool loop end to end in process: worker -> Bedrock emulator
(scripted to ask for tools) -> the team's tools -> SNS, killed inside a tool window."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from functions.core.models import State
from local.testkit.worker_rig import LEASE_SECONDS
from tests.integration.agent_tools import FAR_SIDE
from tests.integration.test_agent_pipeline import (  # noqa: F401 (fixtures)
    AgentStack,
    converse_crashes,
    stack,
)
from tests.integration.test_pipeline import crashed

# These tests are about acting once: the ticket runs without a person's yes, by name.
TOOLS_SETTINGS = {
    "tools": "tests.integration.agent_tools:TOOLS",
    "tools_without_approval": "open_ticket",
}
# Above the first turn's estimate (its prompt, generously counted, plus max_tokens),
# below that plus the tokens the first turn used and the second turn's estimate.
FIRST_TURN_FITS = 1400
SCRIPT = [[("lookup", {"customer": "acme"})], [("open_ticket", {"customer": "acme"})]]


@pytest.fixture
def tools_stack(stack: AgentStack) -> Iterator[AgentStack]:  # noqa: F811 (the fixture)
    FAR_SIDE.reset()
    stack.emulator.emulator.script_tools(SCRIPT)
    yield stack
    stack.emulator.emulator.script_tools([])
    FAR_SIDE.reset()


def test_an_acting_tool_waits_for_a_person_unless_exempted_by_name(
    tools_stack: AgentStack,
) -> None:
    """No ``approval`` setting, no exemption: the lookup runs, the ticket's call parks
    the delivery with its proposal, and nothing is opened or alerted."""
    work = tools_stack.deliver()
    settings = {"tools": TOOLS_SETTINGS["tools"]}
    _, result = tools_stack.worker(extra=settings).run_visible()
    assert result == {"batchItemFailures": []}
    item = tools_stack.aws.inbox(work.delivery_id)
    assert item.state is State.AWAITING_APPROVAL
    assert item.approval is not None and item.approval.startswith("tool.")
    assert FAR_SIDE.lookups == [{"customer": "acme"}]
    assert not FAR_SIDE.ticket_posts
    assert tools_stack.alerts_for(work.delivery_id) == []


def test_tool_using_delivery_reads_acts_once_and_alerts_once(tools_stack: AgentStack) -> None:
    work = tools_stack.deliver()
    _, result = tools_stack.worker(extra=TOOLS_SETTINGS).run_visible()
    assert result == {"batchItemFailures": []}
    assert tools_stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    assert FAR_SIDE.lookups == [{"customer": "acme"}]
    (key,) = FAR_SIDE.ticket_posts
    assert key.startswith(f"{work.delivery_id}:tool:tooluse_")
    assert FAR_SIDE.ticket_posts[key] == 1
    assert len(tools_stack.alerts_for(work.delivery_id)) == 1
    assert tools_stack.emulator.calls() == {work.delivery_id: 3}  # two tool turns, one answer
    request = tools_stack.emulator.emulator.last_request(work.delivery_id)
    assert request is not None
    assert [t["toolSpec"]["name"] for t in request["toolConfig"]["tools"]] == [
        "lookup",
        "open_ticket",
    ]
    assert "You have no tools" not in request["system"][0]["text"]
    # Over the wire, each tool result is fenced text, never raw JSON.
    results = [
        block["toolResult"]
        for message in request["messages"]
        for block in message["content"]
        if "toolResult" in block
    ]
    assert len(results) == 2
    for tool_result in results:
        ((content,),) = [tool_result["content"]]
        opening, data, closing = content["text"].split("\n")
        assert opening.startswith("<tool-result-") and closing == "</" + opening[1:]
        assert json.loads(data)
    spend = tools_stack.spend(work.delivery_id)
    assert (spend.model_calls, spend.answered) == (3, 3)


def test_killed_between_a_tool_call_and_its_record_applies_it_once(
    tools_stack: AgentStack,
) -> None:
    FAR_SIDE.crash_after_ticket = True
    work = tools_stack.deliver()
    messages = tools_stack.aws.receive()
    with pytest.raises(BaseException) as died:
        tools_stack.worker(extra=TOOLS_SETTINGS).run(messages)
    assert crashed(died.value)
    tools_stack.aws.clock.advance(LEASE_SECONDS + 1)
    tools_stack.aws.make_visible(messages)
    _, result = tools_stack.worker(extra=TOOLS_SETTINGS).run_visible()
    assert result == {"batchItemFailures": []}
    assert tools_stack.aws.inbox(work.delivery_id).state is State.COMPLETED
    # The recorded turns kept the tool-use id: the retry posted with the same key, and
    # the keyed far side kept one ticket; the lookup's recorded answer was reused.
    assert FAR_SIDE.tickets == 1
    assert sum(FAR_SIDE.ticket_posts.values()) == 2
    assert len(FAR_SIDE.lookups) == 1
    assert len(tools_stack.alerts_for(work.delivery_id)) == 1
    # Two recorded tool turns were never asked again: the answer turn only.
    assert tools_stack.emulator.calls() == {work.delivery_id: 3}


def test_a_runaway_tool_loop_fails_naming_its_cap(tools_stack: AgentStack) -> None:
    tools_stack.emulator.emulator.script_tools([[("lookup", {"customer": "acme"})]] * 5)
    work = tools_stack.deliver()
    tools_stack.worker(extra={**TOOLS_SETTINGS, "max_turns": "3"}).run_visible()
    inbox = tools_stack.aws.inbox(work.delivery_id)
    assert (inbox.state, inbox.last_error) == (State.FAILED, "max_turns_reached")
    assert tools_stack.alerts_for(work.delivery_id) == []
    assert tools_stack.emulator.calls() == {work.delivery_id: 3}


def test_a_delivery_past_its_token_cap_fails_naming_it_and_the_model_sees_no_call_past_it(
    tools_stack: AgentStack,
) -> None:
    """The cap lets the first turn through; with its tokens counted, the second turn's
    estimate would pass it: the delivery fails ``delivery_token_cap``, the emulator got
    one call, no ticket and no alert."""
    work = tools_stack.deliver()
    capped = TOOLS_SETTINGS | {"delivery_token_cap": str(FIRST_TURN_FITS)}
    tools_stack.worker(extra=capped).run_visible()
    item = tools_stack.aws.inbox(work.delivery_id)
    assert (item.state, item.last_error) == (State.FAILED, "delivery_token_cap")
    assert tools_stack.emulator.calls() == {work.delivery_id: 1}
    assert FAR_SIDE.lookups == [{"customer": "acme"}]  # the first turn's tool ran
    assert not FAR_SIDE.ticket_posts
    assert tools_stack.alerts_for(work.delivery_id) == []
    spend = tools_stack.spend(work.delivery_id)
    assert spend.model_calls == 1 and spend.tokens <= FIRST_TURN_FITS
