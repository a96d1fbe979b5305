"""The worker's memory setting against its own peak, on the packages that weigh most.

A fresh worker process (the real handler, its settings from the environment, the
default workflow) works batches of ten packages near the 1 MB result cap from the
demo MCP server; its own peak resident memory (``VmHWM``) must leave a quarter of the
stack's default ``worker_memory_mb`` to Lambda's runtime and the sandbox.
"""

from __future__ import annotations

from bench import worker_duration
from infra.config import StackConfig

# Lambda's runtime client shares the function's process; the sandbox needs some too.
SHARE_FOR_THE_WORKER: float = 0.75


def test_a_batch_of_the_largest_packages_fits_the_worker_memory_setting() -> None:
    measured = worker_duration.measure(batches=1, package_prefix="pkg_large")
    assert measured.max_rss_mb <= SHARE_FOR_THE_WORKER * StackConfig().worker_memory_mb
    # Every message was processed (measure raises on a failed one) with its package.
    assert measured.cpu_ms_per_message.median > 0
