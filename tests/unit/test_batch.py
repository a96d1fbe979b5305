"""A batch of messages against fakes: concurrency, the deadline, unreachable servers,
the per-message error boundary and redriven dead letters."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from functions.core import metric_names
from functions.core.batch import (
    MALFORMED_WORK_ITEM,
    BatchLimits,
    InlineExecutor,
    QueueMessage,
    process_batch,
)
from functions.core.deadline import Deadline
from functions.core.errors import (
    BudgetExhausted,
    PackageNotFound,
    StorageUnavailable,
    TransientError,
)
from functions.core.models import State, WorkItem
from functions.core.retry_policy import retry_delay
from infra.schema import max_receive_count_for
from tests.fakes import FakeClaims, FakeQueue
from tests.unit.test_process import HORIZON, LEASE, MAX_ATTEMPTS, MCP_URL
from tests.unit.test_process import Packages as ProcessPackages
from tests.unit.test_process import World as ProcessWorld

OTHER_MCP_URL = "https://backup.relaylink.example/mcp"
# How long a test waits for threads that should meet; far above what they need.
MEET_SECONDS = 10.0


def work(n: int = 0, mcp_url: str = MCP_URL) -> WorkItem:
    return WorkItem(f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}", "package.received", f"pkg_{n}", mcp_url)


def message(
    item: WorkItem | str, n: int = 0, dead_lettered: str | None = None, failure: str | None = None
) -> QueueMessage:
    body = item if isinstance(item, str) else item.to_json()
    return QueueMessage(f"m{n}", f"r{n}", body, dead_lettered, failure)


@dataclass
class Packages(ProcessPackages):
    """A batch's package source: a server in ``black_holes`` fails at transport level and
    is unreachable from then on."""

    black_holes: set[str] = field(default_factory=set)
    sessions: int = 0
    deadlines: list[Deadline] = field(default_factory=list)
    _unreachable: set[str] = field(default_factory=set)

    async def get_package(self, mcp_url: str, package_id: str) -> Any:
        if mcp_url in self.black_holes:
            self.calls.append(package_id)
            self._unreachable.add(mcp_url)
            raise TransientError("mcp_timeout")
        return await super().get_package(mcp_url, package_id)

    def unreachable(self, mcp_url: str) -> bool:
        return mcp_url in self._unreachable

    def factory(self) -> Callable[[Deadline], Any]:
        @asynccontextmanager
        async def opened(deadline: Deadline) -> Any:
            self.sessions += 1
            self.deadlines.append(deadline)
            yield self

        return opened


@dataclass
class World(ProcessWorld):
    packages: Packages = field(default_factory=Packages)
    queue: FakeQueue = field(default_factory=FakeQueue)

    def run(
        self,
        messages: list[QueueMessage],
        *,
        concurrency: int = 10,
        message_seconds: float = 0.0,
        deadline: Deadline | None = None,
        inline: bool = False,
    ) -> list[str]:
        batch = process_batch(
            self.processor(),
            self.queue,
            self.packages.factory(),
            messages,
            limits=BatchLimits(concurrency, message_seconds),
            deadline=deadline or Deadline.never(),
            inline=inline,
        )
        if not inline:
            return asyncio.run(batch)
        loop = asyncio.new_event_loop()
        loop.set_default_executor(InlineExecutor())  # so that to_thread is inline too
        try:
            return loop.run_until_complete(batch)
        finally:
            loop.close()


@pytest.fixture
def world() -> World:
    return World()


def test_batch_shares_one_source_and_maps_dispositions(world: World) -> None:
    items = [work(n) for n in range(4)]
    for item in items[:3]:
        world.accept(item)
    world.claims.claim(items[2].delivery_id, owner="x", now=world.clock.value, lease_seconds=LEASE)
    world.packages.errors = [TransientError("mcp_unavailable")]  # the first fetch
    messages = [message(item, n) for n, item in enumerate(items)]
    messages.append(QueueMessage("bad", "rbad", "{not json"))
    failures = world.run(messages, concurrency=1)
    assert failures == ["m0"]
    assert world.queue.visibility == [("r0", retry_delay(1))]
    assert world.queue.sent == [(items[2], LEASE)]
    assert world.queue.dead == [("{not json", MALFORMED_WORK_ITEM)]
    assert world.packages.sessions == 1
    assert world.state(items[1]).state is State.COMPLETED
    assert world.metrics.counts[metric_names.METRIC_WORK_ALREADY_DONE] == 1  # items[3]: no inbox


def _add_current_thread(threads: set[int]) -> None:
    threads.add(threading.get_ident())


def test_an_inline_batch_runs_every_message_on_the_calling_thread_alike() -> None:
    outcomes = []
    for inline in (False, True):
        world = World()
        threads: set[int] = set()
        world.workflow.before = functools.partial(_add_current_thread, threads)
        items = [work(n) for n in range(3)]
        for item in items:
            world.accept(item)
        world.packages.errors = [TransientError("mcp_unavailable")]  # the first fetch
        failures = world.run([message(i, n) for n, i in enumerate(items)], inline=inline)
        states = [world.state(item).state for item in items]
        outcomes.append((failures, world.queue.visibility, states, sorted(world.workflow.applied)))
        assert (threads == {threading.get_ident()}) is inline

    assert outcomes[0] == outcomes[1]


def test_exhausted_attempts_are_dead_lettered_with_their_reason(world: World) -> None:
    world.accept(work(), attempts=MAX_ATTEMPTS)  # earlier attempts died without an outcome
    assert world.run([message(work())]) == []
    assert world.queue.dead == [(work().to_json(), "attempts_exhausted")]


class FailingDeadLetters(FakeQueue):
    def dead_letter(self, body: str, *, reason: str, failure: str | None = None) -> None:
        raise StorageUnavailable("queue_unavailable")


def test_a_failed_dead_letter_send_fails_only_its_own_message(world: World) -> None:
    world.queue = FailingDeadLetters()
    items = [work(n) for n in range(3)]
    for item in items:
        world.accept(item)
    messages = [message(item, n) for n, item in enumerate(items)]
    messages.insert(1, QueueMessage("bad", "rbad", "{not json"))
    assert world.run(messages) == ["bad"]
    assert all(world.state(item).state is State.COMPLETED for item in items)


class BrokenClaims(FakeClaims):
    """Raises what DynamoDB's adapter passes on untranslated (a permissions error)."""

    broken: str = ""

    def claim(self, delivery_id: str, **kwargs: Any) -> Any:
        if delivery_id == self.broken:
            raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "UpdateItem")
        return super().claim(delivery_id, **kwargs)


def test_an_untranslated_error_in_one_message_fails_only_that_message(world: World) -> None:
    world.claims = BrokenClaims()
    items = [work(n) for n in range(3)]
    for item in items:
        world.accept(item)
    world.claims.broken = items[1].delivery_id
    assert world.run([message(item, n) for n, item in enumerate(items)]) == ["m1"]
    assert world.state(items[0]).state is State.COMPLETED
    assert world.state(items[2]).state is State.COMPLETED


def test_messages_of_a_batch_run_at_the_same_time(world: World) -> None:
    items = [work(n) for n in range(4)]
    for item in items:
        world.accept(item)
    # Each workflow waits until all four run: one after another, the first would wait
    # out the barrier's timeout and fail.
    together = threading.Barrier(len(items), timeout=MEET_SECONDS)

    def meet() -> None:
        together.wait()

    world.workflow.before = meet
    assert world.run([message(item, n) for n, item in enumerate(items)]) == []
    assert all(world.state(item).state is State.COMPLETED for item in items)


class MeetingClaims(FakeClaims):
    """A claim that blocks (as a DynamoDB call does) until ``expected`` claims are in."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.together = threading.Barrier(expected, timeout=MEET_SECONDS)

    def claim(self, delivery_id: str, **kwargs: Any) -> Any:
        self.together.wait()
        return super().claim(delivery_id, **kwargs)


def test_a_blocking_store_call_does_not_hold_up_the_other_messages(world: World) -> None:
    world.claims = MeetingClaims(3)
    items = [work(n, mcp_url=f"https://mcp{n}.relaylink.example/mcp") for n in range(3)]
    for item in items:
        world.accept(item)
    assert world.run([message(item, n) for n, item in enumerate(items)]) == []
    assert all(world.state(item).state is State.COMPLETED for item in items)


def test_no_more_messages_run_at_once_than_the_concurrency(world: World) -> None:
    items = [work(n) for n in range(6)]
    for item in items:
        world.accept(item)
    running, most = [0], [0]
    lock = threading.Lock()
    two_in = threading.Barrier(2, timeout=MEET_SECONDS)

    def count() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        two_in.wait()  # pairs meet: a third running at once would be seen above
        with lock:
            running[0] -= 1

    world.workflow.before = count
    assert world.run([message(item, n) for n, item in enumerate(items)], concurrency=2) == []
    assert most[0] == 2


def test_retries_on_their_recorded_packages_run_side_by_side(world: World) -> None:
    # A server's first message probes it while the others wait; one that reads its
    # package from its record fetches nothing, so it must not hold them for its run.
    items = [work(n) for n in range(4)]
    for item in items:
        world.accept(item)

    def fail() -> None:
        raise TransientError("model_unavailable")

    world.workflow.before = fail  # each attempt fails after its package is recorded
    world.run([message(item, n) for n, item in enumerate(items)])
    fetched = sorted(world.packages.calls)
    assert fetched == sorted(item.package_id for item in items)
    world.clock.advance(3600)  # past every retry's time
    all_in = threading.Barrier(len(items), timeout=MEET_SECONDS)

    def meet() -> None:
        all_in.wait()  # all four at once, or a broken barrier

    world.workflow.before = meet
    assert world.run([message(item, n) for n, item in enumerate(items)]) == []
    assert sorted(world.packages.calls) == fetched  # replayed: no fetch the second time
    assert {world.state(item).state for item in items} == {State.COMPLETED}


def test_nothing_starts_without_the_time_a_message_needs(world: World) -> None:
    items = [work(n) for n in range(3)]
    for item in items:
        world.accept(item)
    failures = world.run(
        [message(item, n) for n, item in enumerate(items)],
        message_seconds=30,
        deadline=Deadline.after(29),
    )
    assert failures == []  # acknowledged: each is replaced by a fresh copy
    assert all(world.state(item).attempts == 0 for item in items)  # never claimed
    assert world.packages.calls == []
    # Fresh copies (a receive count of 0 again), back after the first retry's delay.
    assert sorted(world.queue.sent, key=str) == [(item, retry_delay(1)) for item in items]
    assert world.queue.visibility == []
    assert world.metrics.counts[metric_names.METRIC_WORK_NOT_STARTED] == 3


@dataclass
class Stopwatch:
    """A monotonic clock the test moves forward."""

    value: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.value += seconds


def test_messages_stop_starting_when_the_time_runs_out(world: World) -> None:
    items = [work(n) for n in range(4)]
    for item in items:
        world.accept(item)
    watch = Stopwatch()
    world.workflow.before = lambda: watch.advance(40)  # each message takes 40 s
    failures = world.run(
        [message(item, n) for n, item in enumerate(items)],
        concurrency=1,
        message_seconds=50,
        deadline=Deadline.after(100, now=watch),
    )
    # Started at 0 and 40 (100 and 60 s left); at 80 only 20 s are left.
    assert failures == []
    assert world.queue.sent == [(items[2], retry_delay(1)), (items[3], retry_delay(1))]
    assert [world.state(item).state for item in items] == [
        State.COMPLETED,
        State.COMPLETED,
        State.PENDING,
        State.PENDING,
    ]
    assert [world.state(item).attempts for item in items] == [1, 1, 0, 0]


def test_the_package_source_gets_the_batch_deadline(world: World) -> None:
    deadline = Deadline.after(120)
    world.accept(work())
    world.run([message(work())], deadline=deadline)
    assert world.packages.deadlines == [deadline]


def test_an_unreachable_server_gets_no_more_messages_in_the_batch(world: World) -> None:
    world.packages.black_holes = {MCP_URL}
    items = [work(n) for n in range(5)]
    other = work(9, mcp_url=OTHER_MCP_URL)
    for item in [*items, other]:
        world.accept(item)
    messages = [message(item, n) for n, item in enumerate(items)]
    messages.append(message(other, 9))
    failures = world.run(messages)  # all at once, if they could
    assert failures == ["m0"]
    # One message found the server unreachable; the others waited for it and were
    # replaced without a claim: no attempt counted, fresh copies a little later.
    assert sorted(world.queue.sent, key=str) == [(item, retry_delay(1)) for item in items[1:]]
    assert world.packages.calls.count("pkg_0") == 1
    assert [world.state(item).attempts for item in items] == [1, 0, 0, 0, 0]
    assert (world.state(items[0]).state, world.state(items[0]).last_error) == (
        State.PENDING,
        "mcp_timeout",
    )
    assert world.queue.visibility == [("r0", retry_delay(1))]
    assert world.metrics.counts[metric_names.METRIC_WORK_NOT_STARTED] == 4
    assert world.state(other).state is State.COMPLETED  # another server: unaffected


def test_a_probe_that_needs_no_fetch_hands_the_server_to_the_next_message(world: World) -> None:
    items = [work(n) for n in range(3)]
    world.accept(items[0], state=State.COMPLETED)  # a duplicate: claim, nothing to fetch
    for item in items[1:]:
        world.accept(item)
    assert world.run([message(item, n) for n, item in enumerate(items)]) == []
    assert world.packages.calls == ["pkg_1", "pkg_2"]


def dead_letter_of(world: World, item: WorkItem) -> QueueMessage:
    """The delivery's dead letter, as the worker sends it and SQS's redrive brings it back."""
    (body, reason), failure = world.queue.dead[-1], world.queue.dead_failures[-1]
    assert body == item.to_json()
    return message(item, n=9, dead_lettered=reason, failure=failure)


def test_a_redriven_dead_letter_reopens_its_failed_delivery(world: World) -> None:
    item = work()
    world.accept(item, attempts=MAX_ATTEMPTS)  # earlier attempts died
    assert world.run([message(item)]) == []
    assert world.state(item).state is State.FAILED
    letter = dead_letter_of(world, item)
    assert letter.failure is not None
    assert world.run([letter]) == []
    state = world.state(item)
    assert (state.state, state.attempts) == (State.COMPLETED, 1)
    assert world.workflow.applied == [f"{item.delivery_id}:notify"]


def test_a_redriven_dead_letter_reopens_only_the_failure_it_was_sent_for(world: World) -> None:
    item = work()
    world.accept(item, attempts=MAX_ATTEMPTS)
    assert world.run([message(item)]) == []
    letter = dead_letter_of(world, item)
    # An operator requeues the delivery; it fails again, for another reason (say an effect
    # in doubt that the operator then settles by hand, leaving the delivery failed).
    assert world.claims.reopen(item.delivery_id, now=world.clock.value)
    world.packages.errors = [PackageNotFound("package_not_found")]
    assert world.run([message(item)]) == []
    assert world.state(item).last_error == "package_not_found"
    # The old letter is redriven now: it is not this failure's to reopen.
    assert world.run([letter]) == []
    state = world.state(item)
    assert (state.state, state.last_error) == (State.FAILED, "package_not_found")
    assert world.workflow.applied == []
    # A mark made before marks named their failure reopens nothing either.
    assert world.run([message(item, dead_lettered="attempts_exhausted")]) == []
    assert world.state(item).state is State.FAILED


def test_a_plain_message_for_a_failed_delivery_changes_nothing(world: World) -> None:
    item = work()
    world.accept(item, state=State.FAILED, attempts=MAX_ATTEMPTS, last_error="mcp_unavailable")
    assert world.run([message(item)]) == []
    assert world.state(item).state is State.FAILED
    assert world.packages.calls == []


def test_a_redriven_dead_letter_of_a_completed_delivery_is_acknowledged(world: World) -> None:
    item = work()
    world.accept(item, state=State.COMPLETED)
    assert world.run([message(item, dead_lettered="mcp_unavailable")]) == []
    assert world.state(item).state is State.COMPLETED
    assert world.packages.calls == []


@pytest.mark.parametrize(("concurrency", "seconds"), [(0, 1.0), (1, -1.0)])
def test_limits_refuse_nonsense(concurrency: int, seconds: float) -> None:
    with pytest.raises(ValueError):
        BatchLimits(concurrency, seconds)


def test_a_budget_wait_sends_a_fresh_delayed_copy(world: World) -> None:
    world.accept(work())
    retry_at = world.clock.value + 120

    def budget_spent() -> None:
        raise BudgetExhausted(retry_at=retry_at)

    world.workflow.before = budget_spent
    assert world.run([message(work())]) == []  # acknowledged: the copy carries on
    assert world.queue.sent == [(work(), 120)]  # with a receive count of 0
    assert world.queue.visibility == []
    assert world.queue.dead == []


class Killed(BaseException):
    """The invocation timed out: every attempt in flight dies with it, unrecorded."""


@dataclass
class Invocation:
    """One invocation's fate, shared by the claims and the workflow below: ``killed``
    once the poison ran (it times the invocation out); ``poison_settled`` once the
    poison's message is sure not to run beside the others (given back, failed unrun, or
    not claimed at all)."""

    killed: threading.Event = field(default_factory=threading.Event)
    poison_settled: threading.Event = field(default_factory=threading.Event)


class KillableClaims(FakeClaims):
    """Claims that stop once the invocation is killed: nothing is claimed or recorded
    after it (every attempt in flight stays ``processing``, as a dead worker leaves it)."""

    def __init__(self, *, poison: str = "") -> None:
        super().__init__()
        self.poison = poison
        self.invocation = Invocation()

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> Any:
        if self.invocation.killed.is_set():
            raise Killed
        attempt = super().claim(delivery_id, owner=owner, now=now, lease_seconds=lease_seconds)
        if delivery_id == self.poison and attempt.claim is None:
            self.invocation.poison_settled.set()
        return attempt

    # (every outcome of a claim is written through the adapter's _finish)
    def _finish(self, transition: Any, claim: Any, *, now: int, **values: Any) -> None:
        if self.invocation.killed.is_set():
            raise Killed
        super()._finish(transition, claim, now=now, **values)
        if claim.delivery_id == self.poison:  # given back, or failed without running
            self.invocation.poison_settled.set()


@dataclass
class PoisonWorkflow:
    """The poison times out the invocation. Its batch-mates are slow: each is still in
    flight when the poison runs beside it, so it dies with it; one the poison cannot
    run beside any more completes."""

    poison: str
    invocation: Invocation
    running: set[str] = field(default_factory=set)
    # The most runs each delivery's run saw at once, itself included (this invocation).
    company: dict[str, int] = field(default_factory=dict)
    # The same, of the runs that completed.
    completed_in_company: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, work: WorkItem, package: Any, effects: Any) -> None:
        with self.lock:
            self.running.add(work.delivery_id)
            for delivery_id in self.running:
                self.company[delivery_id] = max(self.company.get(delivery_id, 0), len(self.running))
        if work.delivery_id == self.poison:
            self.invocation.killed.set()
            raise Killed
        fate = wait_for(
            lambda: self.invocation.killed.is_set() or self.invocation.poison_settled.is_set()
        )
        assert fate, "neither killed nor settled"
        if self.invocation.killed.is_set():
            raise Killed
        with self.lock:
            self.running.discard(work.delivery_id)
            self.completed_in_company[work.delivery_id] = self.company[work.delivery_id]


def wait_for(condition: Callable[[], bool]) -> bool:
    """Poll ``condition`` until it holds, for up to MEET_SECONDS."""
    tick = threading.Event()
    for _ in range(int(MEET_SECONDS * 100)):
        if condition():
            return True
        tick.wait(0.01)
    return condition()


def test_a_poison_message_that_kills_its_invocation_does_not_exhaust_its_batch_mates(
    world: World,
) -> None:
    items = [work(n) for n in range(10)]
    poison = items[4]
    world.claims = KillableClaims(poison=poison.delivery_id)
    for item in items:
        world.accept(item)
    workflow = PoisonWorkflow(poison.delivery_id, world.claims.invocation)
    world.workflow = workflow  # type: ignore[assignment]
    kills = 0
    for _invocation in range(6):
        world.claims.invocation = workflow.invocation = Invocation()
        workflow.running.clear()
        workflow.company.clear()
        try:
            world.run([message(item, n) for n, item in enumerate(items)])
        except Killed:
            kills += 1
            world.clock.advance(LEASE)  # the dead attempts' leases run out
    # Two kills in company, then the poison runs alone: once more it kills, then it has
    # used its attempts (MAX_ATTEMPTS) and is dead-lettered without running.
    assert kills == 3
    assert (world.state(poison).state, world.state(poison).last_error) == (
        State.FAILED,
        "attempts_exhausted",
    )
    mates = [item for item in items if item is not poison]
    assert {world.state(item).state for item in mates} == {State.COMPLETED}
    assert max(world.state(item).attempts for item in mates) <= MAX_ATTEMPTS
    # Each mate completed in a run alone, never beside another message.
    assert {workflow.completed_in_company[item.delivery_id] for item in mates} == {1}
    assert world.metrics.counts[metric_names.METRIC_WORK_SET_ASIDE] > 0


def test_a_message_returned_unstarted_any_number_of_times_is_never_dead_lettered_by_sqs(
    world: World,
) -> None:
    # SQS moves a message to the dead-letter queue when its receive count exceeds the
    # redrive threshold, which counts attempts only (max_receive_count_for): a message
    # returned unstarted, time after time, must not use it up.
    item = work()
    world.accept(item)
    threshold = max_receive_count_for(MAX_ATTEMPTS, retry_horizon_seconds=HORIZON)
    current, receives = message(item), 1
    for n in range(2 * threshold):
        failures = world.run([current], message_seconds=30, deadline=Deadline.after(29))
        if failures:  # returned as it is: SQS counts one more receive of it
            receives += 1
        else:  # acknowledged, and replaced by a fresh, delayed copy
            assert world.queue.sent[-1] == (item, retry_delay(1))
            current, receives = message(world.queue.sent[-1][0], n + 1), 1
        assert receives <= threshold, n
    assert (world.state(item).state, world.state(item).attempts) == (State.PENDING, 0)
    assert world.metrics.counts[metric_names.METRIC_WORK_NOT_STARTED] == 2 * threshold
