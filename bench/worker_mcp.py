"""Figure 4: what the worker costs the MCP server, per batch and per message.

The real worker (``functions.worker.handler.handle``, default workflow) runs against
moto, the notify sink and the SDK's demo MCP server on loopback
(``local.mcp_server``). HTTP requests are the server's own count. MCP time is the
package source's life (opening it, every ``get_package``, closing it) as the
worker sees it: a batch of ten shares one session; the alternative opens one per
message (ten batches of one). A batch's fetches overlap (its messages run side by
side), so MCP time is wall time: the time during which any MCP operation was in
flight, not the sum of each one's.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from bench.output import quiet_output
from bench.stats import Summary, summarize
from functions.core.deadline import Deadline
from functions.core.models import State, WorkItem
from functions.core.package import Package
from functions.core.ports.package import BatchPackageSource, PackageSourceFactory
from local.mcp_server import RunningServer, start_in_thread
from local.notify_sink import NotifySinkServer
from local.testkit.moto_world import MotoWorld, moto_world
from local.testkit.worker_rig import WorkerRig, make_worker

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

TARGET_REQUESTS_PER_BATCH: Final = 13
BATCH: Final = 10
MCP_TOKEN: Final = "bench-mcp-token-5d1e"


class McpTimer:
    """Wraps a worker's package-source factory and times everything MCP in it: the wall
    time with at least one operation in flight (``seconds``), overlapping ones once."""

    def __init__(self, factory: PackageSourceFactory) -> None:
        self._factory = factory
        self.seconds = 0.0
        self.fetches = 0
        self._in_flight = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def _begin(self) -> None:
        with self._lock:
            if self._in_flight == 0:
                self._since = time.perf_counter()
            self._in_flight += 1

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.seconds += time.perf_counter() - self._since

    @contextlib.asynccontextmanager
    async def __call__(self, deadline: Deadline) -> AsyncIterator[BatchPackageSource]:
        timer = self
        source_cm = self._factory(deadline)
        self._begin()
        try:
            source = await source_cm.__aenter__()
        finally:
            self._end()

        class Timed:
            async def get_package(self, mcp_url: str, package_id: str) -> Package:
                timer._begin()
                try:
                    return await source.get_package(mcp_url, package_id)
                finally:
                    timer._end()
                    timer.fetches += 1

            def unreachable(self, mcp_url: str) -> bool:
                return source.unreachable(mcp_url)

        try:
            yield Timed()
        finally:
            self._begin()
            try:
                await source_cm.__aexit__(None, None, None)
            finally:
                self._end()


@dataclass(frozen=True)
class WorkerMcp:
    requests_per_batch: Summary  # HTTP requests to the server per batch of 10
    sessions_per_batch: float
    per_message_ms_batched: Summary  # one per batch: MCP wall time / 10
    per_message_ms_single: Summary  # one per message: its own session's MCP time
    batch_ms_per_message: Summary  # the whole handler call / 10
    single_ms_per_message: Summary  # the whole handler call of a batch of one
    requests_per_single: Summary
    latency_ms: int
    batches: int

    @property
    def ratio(self) -> float:
        return self.per_message_ms_single.median / self.per_message_ms_batched.median

    def to_json(self) -> dict[str, Any]:
        return {
            "mcp_latency_ms": self.latency_ms,
            "batches": self.batches,
            "http_requests_per_batch_of_10": self.requests_per_batch.to_json(1),
            "http_requests_per_batch_of_1": self.requests_per_single.to_json(1),
            "mcp_ms_per_message_batched": self.per_message_ms_batched.to_json(2),
            "mcp_ms_per_message_one_session_each": self.per_message_ms_single.to_json(2),
            "single_over_batched": round(self.ratio, 3),
            "worker_ms_per_message_batched": self.batch_ms_per_message.to_json(2),
            "worker_ms_per_message_one_session_each": self.single_ms_per_message.to_json(2),
        }


def _submit(
    aws: MotoWorld, server: RunningServer, n: int, *, prefix: str = "pkg_"
) -> list[MessageTypeDef]:
    """``n`` accepted deliveries on the queue (package ids starting with ``prefix``);
    returns them as received SQS messages."""
    for _ in range(n):
        item = WorkItem(
            str(uuid.uuid4()), "package.received", f"{prefix}{uuid.uuid4().hex[:8]}", server.url
        )
        aws.accept(item)
        aws.enqueue(item)
    messages = aws.receive(limit=n)
    if len(messages) != n:
        raise RuntimeError(f"expected {n} messages on the queue, got {len(messages)}")
    return messages


def measure(*, batches: int, latency_ms: int = 0) -> WorkerMcp:
    """``batches`` batches of ten, each beside ten batches of one, against one server."""
    requests: list[float] = []
    singles_requests: list[float] = []
    batched: list[float] = []
    single: list[float] = []
    batch_total: list[float] = []
    single_total: list[float] = []
    sessions = 0
    with (
        moto_world() as aws,
        NotifySinkServer() as sink,
        start_in_thread(token=MCP_TOKEN, latency_ms=latency_ms) as server,
        quiet_output(),
    ):
        rig = make_worker(aws, token=MCP_TOKEN, notify_url=sink.url)
        run_one = WorkerRig(aws, rig.deps, rig.settings)
        run_one.run(_submit(aws, server, 1))  # warm: clients, token cache, imports
        for _ in range(batches):
            messages = _submit(aws, server, BATCH)
            timer = McpTimer(rig.deps.packages)
            worker = WorkerRig(aws, replace(rig.deps, packages=timer), rig.settings)
            before = server.requests
            start = time.perf_counter()
            response = worker.run(messages)
            batch_total.append((time.perf_counter() - start) * 1000 / BATCH)
            if response["batchItemFailures"] or timer.fetches != BATCH:
                raise RuntimeError(f"batch not processed cleanly: {response}")
            requests.append(float(server.requests - before))
            batched.append(timer.seconds * 1000 / BATCH)
            sessions += 1
            for message in _submit(aws, server, BATCH):
                timer = McpTimer(rig.deps.packages)
                worker = WorkerRig(aws, replace(rig.deps, packages=timer), rig.settings)
                before = server.requests
                start = time.perf_counter()
                worker.run([message])
                single_total.append((time.perf_counter() - start) * 1000)
                singles_requests.append(float(server.requests - before))
                single.append(timer.seconds * 1000)
        states = {i.state for i in aws.inboxes()}
        if states != {State.COMPLETED}:
            raise RuntimeError(f"not every delivery completed: {states}")
    return WorkerMcp(
        requests_per_batch=summarize(requests),
        sessions_per_batch=sessions / batches,
        per_message_ms_batched=summarize(batched),
        per_message_ms_single=summarize(single),
        batch_ms_per_message=summarize(batch_total),
        single_ms_per_message=summarize(single_total),
        requests_per_single=summarize(singles_requests),
        latency_ms=latency_ms,
        batches=batches,
    )
