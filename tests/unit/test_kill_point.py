"""Kill points: what `--kill-worker` accepts, which writes it holds, and that it kills once."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from local.aws_emulator.faults import FaultInjector
from local.kill_point import KillPoint, KillPointWatch, Kind, When, WriteHold
from tests.polling import poll


def test_a_point_parses_and_prints_back() -> None:
    point = KillPoint.parse("after:tool:open_ticket")
    assert (point.when, point.kind, point.name) == (When.AFTER, Kind.TOOL, "open_ticket")
    assert str(point) == "after:tool:open_ticket"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("after:tool", "'after:tool' is not WHEN:KIND:NAME"),
        ("aftr:tool:x", "WHEN 'aftr' is unknown: did you mean 'after'?"),
        ("before:toll:x", "KIND 'toll' is unknown: did you mean 'tool'?"),
        ("during:step:x", "WHEN 'during' is unknown: one of before, after"),
    ],
)
def test_a_point_that_is_not_one_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="^" + problem.replace("?", r"\?")):
        KillPoint.parse(text)


def test_each_point_holds_the_write_that_records_it() -> None:
    step, effect = '"step#triage"', '"effect#post_tag"'
    assert KillPoint.parse("before:step:triage").holds() == (
        WriteHold("UpdateItem", (step, "SET #status = :started")),
    )
    assert KillPoint.parse("after:step:triage").holds() == (
        WriteHold("UpdateItem", (step, "recorded_at = :now")),
    )
    assert KillPoint.parse("before:effect:post_tag").holds() == (WriteHold("PutItem", (effect,)),)
    assert KillPoint.parse("after:effect:post_tag").holds() == (
        WriteHold("UpdateItem", (effect, "done_at = :now")),
    )


def test_a_tool_point_holds_the_records_of_its_own_tool_uses_only() -> None:
    point = KillPoint.parse("after:tool:open_ticket")
    assert point.for_tool_use("lookup", "tooluse_1") == ()
    done, result = point.for_tool_use("open_ticket", "tooluse_1")
    assert done.operation == result.operation == "UpdateItem"
    assert done.containing[0].startswith('"effect#tool.')
    assert result.containing[0].startswith('"step#tool.')
    (intent,) = KillPoint.parse("before:tool:open_ticket").for_tool_use("open_ticket", "t")
    assert intent.operation == "PutItem"


def test_a_hold_is_taken_by_the_first_write_that_has_every_text() -> None:
    faults = FaultInjector()
    faults.hold_next("UpdateItem", ['"effect#x"', "done_at = :now"], 5.0)
    assert faults.delays_pending("UpdateItem")
    assert faults.hold_for("UpdateItem", b'{"sk": "effect#x"}') == 0.0  # an intent's update
    assert faults.hold_for("UpdateItem", b'{"sk": "effect#x", "u": "done_at = :now"}') == 5.0
    assert faults.counts() == {"held": 1}
    assert faults.hold_for("UpdateItem", b'{"sk": "effect#x", "u": "done_at = :now"}') == 0.0


class _Stack:
    """The emulator's faults and a worker to kill, in memory."""

    def __init__(self) -> None:
        self.faults = FaultInjector()
        self.kills = 0
        self.said: list[str] = []

    def watch(self, point: str) -> KillPointWatch:
        def kill() -> int:
            self.kills += 1
            return 4242

        return KillPointWatch(
            KillPoint.parse(point),
            hold=self.faults.hold_next,
            clear=self.faults.clear_holds,
            held=lambda: self.faults.counts().get("held", 0),
            kill=kill,
            announce=self.said.append,
        )

    def write(self, operation: str, body: Sequence[str]) -> float:
        return self.faults.hold_for(operation, " ".join(body).encode())


def test_the_worker_is_killed_once_at_the_first_tool_use_to_get_there() -> None:
    stack = _Stack()
    watch = stack.watch("after:tool:open_ticket")
    watch.start()
    try:
        watch.tool_used("d1", "open_ticket", "tooluse_a")
        watch.tool_used("d2", "open_ticket", "tooluse_b")
        done, _result = watch.point.for_tool_use("open_ticket", "tooluse_a")
        assert stack.write("UpdateItem", done.containing) > 0
        assert poll(lambda: watch.fired, bool, deadline_seconds=5.0)
        assert (stack.kills, watch.killed_pid) == (1, 4242)
        assert stack.said == ["kill point after:tool:open_ticket: SIGKILLed worker pid 4242"]
        # Once: the other delivery's holds are gone, and later tool uses arm none.
        watch.tool_used("d3", "open_ticket", "tooluse_c")
        other, _result = watch.point.for_tool_use("open_ticket", "tooluse_b")
        assert stack.write("UpdateItem", other.containing) == 0.0
    finally:
        watch.stop()
    assert stack.kills == 1


def test_a_step_point_is_armed_at_start() -> None:
    stack = _Stack()
    watch = stack.watch("before:step:model")
    watch.start()
    try:
        (hold,) = watch.point.holds()
        assert stack.write("UpdateItem", hold.containing) > 0
        assert poll(lambda: watch.fired, bool, deadline_seconds=5.0)
        assert stack.kills == 1
    finally:
        watch.stop()
