"""Figure 8's measurement: the worker's time and memory per batch at a 300 ms MCP answer.

A fresh worker process (as Lambda runs it: the real handler and its settings from the
environment) gets a warm-up batch, then ``batches`` timed batches of ten, each message
for the demo MCP server answering ``get_package`` after ``MCP_LATENCY_MS``. AWS is
moto's server and the MCP server and notify sink serve from the bench's process, so
the worker process's own CPU time (``time.process_time``) is the worker's alone: the
emulator's and the MCP server's work is not charged to it. The process reports its
peak resident memory, which right-sizes the function's memory (docs/cost.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from bench.cold_start import run_script, worker_world
from bench.stats import Summary, summarize
from functions.core import settings_table

MCP_LATENCY_MS: Final = 300
BATCH: Final = 10

# Reads a JSON list of SQS events: the first warms the process up, the rest are timed.
SCRIPT: Final = """
import json, resource, sys, time
from functions.worker import handler
events = json.loads(sys.stdin.read())
class Context:
    aws_request_id = "duration"
    def get_remaining_time_in_millis(self):
        return 180_000
samples, failures = [], 0
for i, event in enumerate(events):
    t, c = time.perf_counter(), time.process_time()
    response = handler.lambda_handler(event, Context())
    failures += len(response["batchItemFailures"])
    if i:
        samples.append({
            "wall_ms": (time.perf_counter() - t) * 1000,
            "cpu_ms": (time.process_time() - c) * 1000,
        })
def peak_mb():
    # VmHWM is this process's own peak; ru_maxrss also keeps the peak of the process
    # that forked it (Linux carries it across exec), the bench's, not the worker's.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
sys.stderr.write("BENCH-RESULT " + json.dumps({
    "samples": samples,
    "failures": failures,
    "max_rss_mb": peak_mb(),
}) + "\\n")
"""


@dataclass(frozen=True)
class WorkerDuration:
    """Per message of a batch of ``batch``: elapsed and CPU time; the peak memory."""

    wall_ms_per_message: Summary
    cpu_ms_per_message: Summary
    max_rss_mb: float
    batch: int
    concurrency: int
    mcp_latency_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_ms_per_message": self.wall_ms_per_message.to_json(2),
            "cpu_ms_per_message": self.cpu_ms_per_message.to_json(2),
            "max_rss_mb": round(self.max_rss_mb, 1),
            "batch_size": self.batch,
            "batch_concurrency": self.concurrency,
            "mcp_latency_ms": self.mcp_latency_ms,
        }


def measure(
    *, batches: int, package_prefix: str = "pkg_", workflow: str = settings_table.WORKFLOW.default
) -> WorkerDuration:
    """One warm-up batch and ``batches`` timed batches of ten in one worker process,
    for the demo MCP server's packages whose ids start with ``package_prefix``, with
    ``workflow`` (the default one: figure 7, docs/cost.md)."""
    with worker_world(workflow=workflow, mcp_latency_ms=MCP_LATENCY_MS) as stack:
        events = [stack.event(BATCH, package_prefix=package_prefix) for _ in range(batches + 1)]
        result, _wall = run_script(SCRIPT, stack.env, json.dumps(events))
    if result["failures"]:
        raise RuntimeError(f"the worker failed {result['failures']} messages")
    samples = result["samples"]
    return WorkerDuration(
        wall_ms_per_message=summarize([s["wall_ms"] / BATCH for s in samples]),
        cpu_ms_per_message=summarize([s["cpu_ms"] / BATCH for s in samples]),
        max_rss_mb=float(result["max_rss_mb"]),
        batch=BATCH,
        concurrency=settings_table.WORKER_BATCH_CONCURRENCY.env_integer().default,
        mcp_latency_ms=MCP_LATENCY_MS,
    )
