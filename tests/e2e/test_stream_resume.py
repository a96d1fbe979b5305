"""A restarted worker side relays new receipts from the table's stream within seconds.

Once, after the worker's first SIGKILL, a restarted stack relayed nothing new for about
seven minutes: every delivery waited for the reconciler (its pending age, 60 s here).
This kills the worker side while receipts are being relayed, several times, and after
each restart sends a new delivery, which must complete well before the reconciler
could have found it: only the stream and the relay can have carried it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.sender import Summary
from local.stack import READY_DEADLINE_SECONDS, LocalStack
from local.stack_options import StackOptions
from tests.e2e.stacks import audited, send_new
from tests.polling import poll

# Far below the reconciler's pending age (60 s) plus its period: a delivery done by
# then was relayed from the stream.
RELAYED_DEADLINE_SECONDS = 20.0
KILLS = 3


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with audited(StackOptions(seed=23)) as running:
        yield running


def _completed_within(stack: LocalStack, summary: Summary, seconds: float) -> dict[str, str]:
    ids = {result.delivery_id for result in summary.results}

    def states() -> dict[str, str]:
        found = stack.inbox_states()
        return {i: found.get(i, "absent") for i in ids}

    return poll(
        states,
        lambda seen: set(seen.values()) == {"completed"},
        deadline_seconds=seconds,
        pause_seconds=0.2,
    )


def test_a_new_receipt_is_relayed_within_seconds_after_each_worker_kill(
    stack: LocalStack,
) -> None:
    stack.wait_ready(READY_DEADLINE_SECONDS)
    for round_ in range(KILLS):
        # Receipts in the stream and in the relay as the worker side dies.
        in_flight = send_new(stack, 6, seed=100 + round_)
        stack.kill("worker")
        stack.wait_ready(READY_DEADLINE_SECONDS)
        fresh = send_new(stack, 1, seed=200 + round_)
        seen = _completed_within(stack, fresh, RELAYED_DEADLINE_SECONDS)
        assert set(seen.values()) == {"completed"}, (round_, seen, stack.queue_depths())
        assert set(_completed_within(stack, in_flight, 90.0).values()) == {"completed"}
