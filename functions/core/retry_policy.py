"""When a failed attempt is tried again, and when the worker gives up.

Two budgets, one per kind of failure (docs/processing.md, Retries, has the table):

* A known-transient failure (a :class:`~functions.core.errors.TransientError`: the MCP
  server or a downstream system unavailable, the MCP token refused, storage throttled)
  is retried with capped exponential back-off as long as the next attempt starts within
  the *horizon* since the delivery was received: an outage or a token rotation is
  ridden out for hours, not minutes.
* A failure of unknown nature (a workflow's unexpected exception, an attempt that died
  without recording an outcome) is also bounded by ``max_attempts`` such attempts, so a
  poison message or a buggy workflow does not run for a day.

Standard library only: infra derives the queue's redrive threshold from the schedule.
"""

from __future__ import annotations

from typing import Final

RETRY_BASE_SECONDS: Final = 15
# SQS's own cap on DelaySeconds; a visibility change could wait up to 12 h, but a cap
# of 15 min notices the end of an outage within 15 min, and stays below the
# reconciler's pending age (30 min), so a delivery waiting out its back-off is never
# re-enqueued as stuck.
MAX_RETRY_DELAY_SECONDS: Final = 900
# RelayLink gives up on a delivery after 3 days (docs/contract.md, Retries and timing):
# retrying longer would outlive the sender's own interest in it.
MAX_RETRY_HORIZON_SECONDS: Final = 72 * 3600
# Doubling past this exponent only overflows the cap by more.
_MAX_DOUBLINGS: Final = 16


def retry_delay(attempts: int, base_seconds: int = RETRY_BASE_SECONDS) -> int:
    """Seconds to wait before attempt ``attempts + 1``: ``base`` doubling, capped at 15 min."""
    doublings = min(_MAX_DOUBLINGS, max(0, attempts - 1))
    return min(MAX_RETRY_DELAY_SECONDS, base_seconds << doublings)


def next_attempt_at(
    *,
    failed_at: int,
    attempts: int,
    window_start: int,
    horizon_seconds: int,
    base_seconds: int = RETRY_BASE_SECONDS,
) -> int | None:
    """When to try again after attempt number ``attempts`` failed at ``failed_at``.

    Returns:
        The time of the next attempt, or None when it would start after
        ``window_start + horizon_seconds``: no attempt is scheduled past the horizon.
    """
    at = failed_at + retry_delay(attempts, base_seconds)
    return at if at <= window_start + horizon_seconds else None


def retry_schedule(horizon_seconds: int, base_seconds: int = RETRY_BASE_SECONDS) -> tuple[int, ...]:
    """The start of every attempt of a delivery that fails transiently every time.

    In seconds after the first attempt, which starts when the delivery is received and
    takes no time: what a delivery received at the start of an outage goes through
    before it fails. Real attempts take time and queue latency, so they are fewer.
    """
    starts = [0]
    while (
        at := next_attempt_at(
            failed_at=starts[-1],
            attempts=len(starts),
            window_start=0,
            horizon_seconds=horizon_seconds,
            base_seconds=base_seconds,
        )
    ) is not None:
        starts.append(at)
    return tuple(starts)
