"""One batch of work-queue messages: run concurrently, within the invocation's time.

Each message goes through :meth:`Processor.process` in a thread of its own, up to
``BatchLimits.concurrency`` at a time: the processor's ports are blocking calls
(DynamoDB, SQS, the workflow), and one message waiting on them must not hold up the
others. The batch's package source stays on the batch's event loop, and the threads'
fetches run there, so messages that share an MCP server share its one session.

A message is started only when

* the deadline still leaves it ``BatchLimits.message_seconds`` (the longest a fetch
  can take, plus the workflow's allowance): the invocation must not end in the middle
  of it;
* its MCP server has not failed at transport level in this batch. While the first
  message to a server fetches, later messages to that server wait for the outcome,
  so a server that accepts connections and never answers holds up one message, not
  every message in turn.

A delivery whose earlier attempts died unexplained (``ProcessConfig.runs_alone_after``
times: a Lambda timeout kills every attempt of the batch) runs alone: claimed beside
other messages it is given back unrun, and processed after the rest of the batch is
done, one such message at a time. A poison message that times out the invocation then
takes no batch-mate's attempt with it.

A message that is not started is replaced **without a claim**: a fresh copy is sent
with a short delay (the first retry's) and the message acknowledged, so the delivery's
attempt count, which decides when it is given up, is untouched, and so is the
message's receive count, which decides when SQS moves it to the dead-letter queue
(``infra.schema.max_receive_count_for`` counts attempts only). A copy that cannot be
sent leaves the message to come back after the visibility timeout.

Each message runs inside its own error boundary: whatever goes wrong with one (its
body, its claim, an SQS call) fails that message only, never the messages of the
batch that are done.

A message the worker dead-letters carries a mark with the reason and the failure it
was sent for (:meth:`WorkQueue.dead_letter`). SQS's own dead-letter-queue redrive (the
console's "Start DLQ redrive") moves it back with the mark, and the worker then reopens
that failure (``failed`` -> ``pending``, attempts reset) before it processes it, as the
operator's ``redrive`` does. A delivery that failed again since (say after a requeue,
with an effect in doubt an operator settled by hand) is not the letter's to reopen: it
stays failed, and the letter is acknowledged.

``process_batch(..., inline=True)`` runs the same batch without threads: each blocking
call at once on the batch's loop, each message's processor on that loop too (a
simulation runs it so, in an order that replays; production never does).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, TypeVar

from functions.core import metric_names, tracing
from functions.core.deadline import Deadline
from functions.core.errors import ProcessingError
from functions.core.models import WorkItem
from functions.core.observability import logger
from functions.core.ports.package import BatchPackageSource, PackageSourceFactory
from functions.core.ports.queue import WorkQueue
from functions.core.process import Decision, Disposition, Processor

if TYPE_CHECKING:
    from functions.core.package import Package

T = TypeVar("T")

# The dead-letter reason of a message body that is not a work item.
MALFORMED_WORK_ITEM: Final = "malformed_work_item"


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One received queue message, as the worker needs it.

    Attributes:
        dead_lettered: the reason the worker gave when it dead-lettered this message,
            when an SQS redrive has moved it back to the work queue; else None.
        failure: the failure the worker dead-lettered it for (a mark without one was
            made before marks named their failure).
        traceparent: the span the work continues (the relay's, a re-enqueue's).
    """

    message_id: str
    receipt_handle: str
    body: str
    dead_lettered: str | None = None
    failure: str | None = None
    traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How much of a batch runs at once, and how much time a message needs to start.

    Attributes:
        concurrency: messages processed at the same time (at least 1).
        message_seconds: a message is started only while the deadline leaves this much.
    """

    concurrency: int
    message_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.message_seconds < 0:
            raise ValueError("concurrency must be positive and message_seconds not negative")


class NotStarted(StrEnum):
    """Why a message was returned without a claim."""

    NO_TIME = "no_time"  # the deadline leaves less than a message needs
    SERVER_UNREACHABLE = "mcp_server_unreachable"  # failed at transport level in this batch


async def process_batch(
    processor: Processor,
    queue: WorkQueue,
    source: PackageSourceFactory,
    messages: Sequence[QueueMessage],
    *,
    limits: BatchLimits,
    deadline: Deadline,
    inline: bool = False,
) -> list[str]:
    """Process one batch, sharing one package source (one MCP session per server).

    Args:
        inline: run every blocking call and every message's processor on the calling
            loop's thread, one step at a time, instead of a thread each (the order then
            follows the loop's alone and replays). Production leaves it False.

    Returns:
        The ids of the messages to report as batch item failures, in the batch's
        order: SQS makes them visible again after the delay set here (or the queue's
        visibility timeout).
    """
    if not messages:
        return []
    workers = min(limits.concurrency, len(messages))
    threads = (
        InlineExecutor()
        if inline
        else ThreadPoolExecutor(max_workers=workers, thread_name_prefix="work-item")
    )
    with threads:
        async with source(deadline) as packages:
            batch = _Batch(
                processor=processor,
                queue=queue,
                servers=_Servers(packages),
                limits=limits,
                deadline=deadline,
                threads=threads,
                inline=inline,
            )
            alone = len(messages) == 1
            failed = await asyncio.gather(*(batch.run(m, alone=alone) for m in messages))
            # The suspects set aside: each alone, one after another, once the rest is
            # done, so a poison message that times out the invocation takes no
            # batch-mate's attempt with it (and those after it are not even claimed).
            for position, message in enumerate(messages):
                if message.message_id in batch.set_aside:
                    failed[position] = await batch.run(message, alone=True)
    return [m.message_id for m, f in zip(messages, failed, strict=True) if f]


class _Batch:
    """The messages of one batch, each inside its own error boundary."""

    def __init__(
        self,
        *,
        processor: Processor,
        queue: WorkQueue,
        servers: _Servers,
        limits: BatchLimits,
        deadline: Deadline,
        threads: Executor,
        inline: bool,
    ) -> None:
        self._processor = processor
        self._queue = queue
        self._servers = servers
        self._limits = limits
        self._deadline = deadline
        self._threads = threads
        self._inline = inline
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(limits.concurrency)
        # Messages whose delivery was given back unrun to be processed alone.
        self.set_aside: set[str] = set()

    async def run(self, message: QueueMessage, *, alone: bool) -> bool:
        """Take one message as far as it goes; True: report it as a batch item failure.

        Args:
            alone: nothing else of the batch runs meanwhile; when False a suspect
                delivery is set aside (:attr:`set_aside`) instead of run.
        """
        # Every line about this message names its delivery's trace (the one its
        # attempt's spans continue).
        with tracing.within(message.traceparent):
            return await self._run_message(message, alone=alone)

    async def _run_message(self, message: QueueMessage, *, alone: bool) -> bool:
        work: WorkItem | None = None
        try:
            try:
                work = WorkItem.from_json(message.body, traceparent=message.traceparent)
            except ValueError:
                # Not ours to interpret and never will be: straight to the dead-letter queue.
                logger.warning("malformed work item", extra={"message_id": message.message_id})
                await self._blocking(
                    self._queue.dead_letter, message.body, reason=MALFORMED_WORK_ITEM
                )
                return False
            return await self._run(message, work, alone=alone)
        except ProcessingError as exc:
            # Storage or queue trouble: this message comes back after the queue's
            # visibility timeout (a lease it took, after the lease's own).
            logger.warning(
                "work item not processed",
                extra={
                    "message_id": message.message_id,
                    "delivery_id": work.delivery_id if work else None,
                    "error_code": exc.code,
                },
            )
            return True
        except Exception:  # noqa: BLE001
            # The last resort. A bug, or an SDK error no adapter translates (DynamoDB's
            # AccessDenied is passed on as it is, on purpose): it costs this message a
            # redelivery, never the batch, whose completed messages must stay acknowledged.
            logger.exception(
                "work item failed unexpectedly",
                extra={
                    "message_id": message.message_id,
                    "delivery_id": work.delivery_id if work else None,
                },
            )
            return True

    async def _run(self, message: QueueMessage, work: WorkItem, *, alone: bool) -> bool:
        if message.dead_lettered is not None and message.message_id not in self.set_aside:
            # First: a copy that replaces it, should it not start, carries no mark.
            await self._blocking(self._reopen, work, message)
        async with self._servers.admitted(work.mcp_url) as admitted:
            if not admitted:
                return await self._not_started(work, NotStarted.SERVER_UNREACHABLE)
            async with self._slots:
                if self._servers.unreachable(work.mcp_url):
                    return await self._not_started(work, NotStarted.SERVER_UNREACHABLE)
                if self._deadline.remaining() < self._limits.message_seconds:
                    return await self._not_started(work, NotStarted.NO_TIME)
                if self._inline:
                    decision = await self._processor.process(work, self._servers, alone=alone)
                else:
                    decision = await self._blocking(self._process, work, alone)
                if decision.disposition is Disposition.RUN_ALONE:
                    self.set_aside.add(message.message_id)
                    return False
                await self._blocking(_apply, self._queue, message, work, decision)
                return decision.disposition is Disposition.RETRY

    def _process(self, work: WorkItem, alone: bool) -> Decision:
        """In a message thread: the processor on a loop of the thread's own, fetching
        through the batch's loop."""
        source = _OnLoop(self._servers, self._loop)
        return asyncio.run(self._processor.process(work, source, alone=alone))

    def _reopen(self, work: WorkItem, message: QueueMessage) -> None:
        """A message the worker dead-lettered is back: an operator redrove it. Only the
        failure it was sent for is reopened; a mark that names none reopens nothing
        (``requeue`` the delivery)."""
        reopened = message.failure is not None and self._processor.claims.reopen(
            work.delivery_id, now=self._processor.clock.now(), failure=message.failure
        )
        logger.info(
            "dead letter redriven",
            extra={
                "delivery_id": work.delivery_id,
                "dead_letter_reason": message.dead_lettered,
                "reopened": reopened,
            },
        )

    async def _not_started(self, work: WorkItem, why: NotStarted) -> bool:
        """Replace the message by a fresh, delayed copy: an invocation with time, or a
        server answering again, takes it; its receive count starts again at 0."""
        self._processor.metrics.count(metric_names.METRIC_WORK_NOT_STARTED)
        logger.info(
            "work item not started",
            extra={"delivery_id": work.delivery_id, "reason": why.value},
        )
        delay = self._processor.config.retry_base_seconds
        await self._blocking(self._queue.send, work, delay_seconds=delay)
        return False

    async def _blocking(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._inline:
            return call(*args, **kwargs)
        return await self._loop.run_in_executor(
            self._threads, functools.partial(call, *args, **kwargs)
        )


class InlineExecutor(ThreadPoolExecutor):
    """Runs each call at once in the calling thread (no thread is ever started).

    A :class:`ThreadPoolExecutor` only so that a loop takes it as its default executor
    (``asyncio.to_thread`` then runs inline too).
    """

    def __init__(self) -> None:
        # A worker count given, so the base does not ask the OS for its CPU count: a
        # simulated run makes one per batch, thousands of them.
        super().__init__(max_workers=1)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting caller, as a thread's)
            done.set_exception(exc)
        return done


class _Servers:
    """The batch's package source, and which MCP servers messages may start on now."""

    def __init__(self, packages: BatchPackageSource) -> None:
        self._packages = packages
        self._answered: set[str] = set()  # a fetch ended without a transport failure
        self._probes: dict[str, asyncio.Event] = {}  # a first message is fetching

    def unreachable(self, mcp_url: str) -> bool:
        return self._packages.unreachable(mcp_url)

    @asynccontextmanager
    async def admitted(self, mcp_url: str) -> AsyncIterator[bool]:
        """Whether a message to ``mcp_url`` may start; waits while another one probes it.

        The first message to a server is its probe; until its fetch ends (or it ends
        without fetching, e.g. a duplicate), the server's other messages wait.
        """
        while True:
            if self._packages.unreachable(mcp_url):
                yield False
                return
            if mcp_url in self._answered:
                yield True
                return
            probe = self._probes.get(mcp_url)
            if probe is None:
                break
            await probe.wait()
        probe = self._probes[mcp_url] = asyncio.Event()
        try:
            yield True
        finally:
            self._end_probe(mcp_url, probe)

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        try:
            return await self._packages.get_package(mcp_url, package_id)
        finally:
            if not self._packages.unreachable(mcp_url):
                self._answered.add(mcp_url)
            self._end_probe(mcp_url, self._probes.get(mcp_url))

    def package_obtained(self, mcp_url: str) -> None:
        """A message has its package: a probe that read it from its record (no fetch)
        learned nothing of the server, and the next waiting message probes it instead
        of waiting for the whole run (a batch of retries would run one at a time)."""
        self._end_probe(mcp_url, self._probes.get(mcp_url))

    def _end_probe(self, mcp_url: str, probe: asyncio.Event | None) -> None:
        if probe is not None and self._probes.get(mcp_url) is probe:
            del self._probes[mcp_url]
            probe.set()


class _OnLoop:
    """The batch's package source as a message thread sees it: calls run on the batch's
    loop, where the MCP sessions live."""

    def __init__(self, servers: _Servers, loop: asyncio.AbstractEventLoop) -> None:
        self._servers = servers
        self._loop = loop

    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        fetch = self._servers.get_package(mcp_url, package_id)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fetch, self._loop))

    def package_obtained(self, mcp_url: str) -> None:
        self._loop.call_soon_threadsafe(self._servers.package_obtained, mcp_url)


def _apply(queue: WorkQueue, message: QueueMessage, work: WorkItem, decision: Decision) -> None:
    if decision.disposition is Disposition.RETRY:
        queue.change_visibility(message.receipt_handle, seconds=decision.delay_seconds)
    elif decision.disposition is Disposition.DEFER:
        # A fresh copy starts with a receive count of 0: waiting for another worker's
        # lease must not move this delivery towards the dead-letter queue.
        queue.send(work, delay_seconds=decision.delay_seconds)
    elif decision.disposition is Disposition.DEAD_LETTER:
        queue.dead_letter(
            message.body,
            reason=decision.error_code or "attempts_exhausted",
            failure=decision.failure,
        )
