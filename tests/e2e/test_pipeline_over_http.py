"""Deliveries through the whole local stack: front door, stream, relay, queue, worker, MCP.

Every figure is read back from the store and the notification target's counter:
each delivery ``completed``, its effect applied exactly once, nothing lost, no work
item left in any queue — also while the front door and the worker are SIGKILLed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from local.sender import DeliveryResult, Sender, SenderConfig, Summary
from local.stack import READY_DEADLINE_SECONDS, LocalStack, Role
from tests.polling import poll

QUIET_DEADLINE_SECONDS = 90.0
# Kill a role once this many deliveries are done: the rest are still in flight.
KILLS: tuple[tuple[Role, int], ...] = (
    ("front_door", 4),
    ("worker", 12),
    ("front_door", 20),
    ("worker", 28),
)


def _config(stack: LocalStack, *, duplicate_rate: float = 0.0, seed: int = 1) -> SenderConfig:
    state = stack.state
    return SenderConfig(
        url=state.webhook_url,
        secrets=tuple(state.signing_secrets),
        timeout_seconds=10.0,
        time_scale=300.0,  # 30 s becomes 0.1 s
        concurrency=8,
        duplicate_rate=duplicate_rate,
        seed=seed,
    )


def _send(stack: LocalStack, count: int, *, duplicate_rate: float = 0.0) -> Summary:
    async def send() -> Summary:
        async with Sender(_config(stack, duplicate_rate=duplicate_rate)) as sender:
            return await sender.send_new(count, mcp_url=stack.state.mcp_url)

    return asyncio.run(send())


def _assert_each_completed_once(stack: LocalStack, summary: Summary) -> None:
    ids = {result.delivery_id for result in summary.results}
    assert summary.all_acknowledged
    assert stack.quiet(QUIET_DEADLINE_SECONDS, expected=len(ids)), stack.queue_depths()
    states = stack.inbox_states()
    assert {i: states.get(i) for i in ids} == dict.fromkeys(ids, "completed")
    effects = stack.effects()
    assert {i: effects.get(f"{i}:notify") for i in ids} == dict.fromkeys(ids, 1)
    assert stack.queue_depths() == {"work": 0, "dead_letter": 0, "relay_failure": 0}


def test_fifty_deliveries_with_duplicates_complete_with_one_effect_each(
    stack: LocalStack,
) -> None:
    summary = _send(stack, 50, duplicate_rate=0.3)

    assert summary.deliveries == 50
    assert summary.extra_attempts == 15  # the duplicates really were sent
    assert summary.answers["202"] == 50
    assert summary.answers["200"] >= 1  # duplicates answered "already have it"
    _assert_each_completed_once(stack, summary)
    # Each notification was signed: the sink verified it as a receiver would.
    assert stack.sink is not None and stack.sink.sink.verifies
    assert stack.sink.sink.unsigned == 0


def test_killing_the_front_door_and_the_worker_during_traffic_loses_nothing(
    stack: LocalStack,
) -> None:
    stack.wait_ready(READY_DEADLINE_SECONDS)
    before = dict(stack.restarts)

    async def send_while_killing() -> Summary:
        done: list[DeliveryResult] = []
        reached = {after: asyncio.Event() for _, after in KILLS}

        def progress(result: DeliveryResult) -> None:
            done.append(result)
            for after, event in reached.items():
                if len(done) >= after:
                    event.set()

        async with Sender(_config(stack, seed=2)) as sender:
            traffic = asyncio.create_task(
                sender.send_new(40, mcp_url=stack.state.mcp_url, progress=progress)
            )
            for role, after in KILLS:
                await asyncio.wait_for(reached[after].wait(), QUIET_DEADLINE_SECONDS)
                # The role killed last time must serve again first, or this kill
                # would hit the dead process and the supervisor restart it once.
                await asyncio.to_thread(stack.wait_ready, READY_DEADLINE_SECONDS)
                stack.kill(role)
            return await traffic

    summary = asyncio.run(send_while_killing())
    stack.wait_ready(READY_DEADLINE_SECONDS)  # the last kill's restart is counted

    assert stack.restarts == {
        "front_door": before["front_door"] + 2,
        "worker": before["worker"] + 2,
    }
    _assert_each_completed_once(stack, summary)


def _cli(state_file: Path, *arguments: str) -> dict[str, object] | list[object]:
    completed = subprocess.run(
        [sys.executable, "-m", "ops.cli", *arguments, "--local", str(state_file), "--json"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    parsed: dict[str, object] | list[object] = json.loads(completed.stdout)
    return parsed


def test_operator_json_matches_the_store(stack: LocalStack, tmp_path: Path) -> None:
    _assert_each_completed_once(stack, _send(stack, 5))
    state_file = tmp_path / "state.json"
    stack.state.write(state_file)
    states = stack.inbox_states()
    assert states

    # Completed items are not in the state index: the full listing shows them.
    listed = _cli(state_file, "inbox", "list", "--limit", "1000")
    one = next(iter(states))
    shown = _cli(state_file, "inbox", "show", one)

    items = listed["items"] if isinstance(listed, dict) else listed
    assert isinstance(items, list)
    assert {item["delivery_id"]: item["state"] for item in items} == states
    assert isinstance(shown, dict)
    assert shown["delivery_id"] == one
    assert shown["state"] == states[one]


def _process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return stat.rsplit(")", 1)[1].split()[0]


def test_a_paused_worker_side_holds_its_work_until_it_continues(stack: LocalStack) -> None:
    with stack.paused("worker") as pid:
        # SIGSTOP lands asynchronously: the kernel may still show the child running.
        assert poll(lambda: _process_state(pid), lambda s: s == "T", deadline_seconds=10) == "T"
        summary = _send(stack, 5)
        assert summary.answers["202"] == 5  # the receiver answers alone
        states = stack.inbox_states()
        # Nothing took the work while the worker side was stopped.
        assert {states.get(r.delivery_id) for r in summary.results} == {"pending"}
    assert poll(lambda: _process_state(pid), lambda s: s != "T", deadline_seconds=10) != "T"
    _assert_each_completed_once(stack, summary)
