"""The processing use case: claim, read the recorded package (or fetch it), run, complete.

One call of :meth:`Processor.process` handles one work item (one queue message)
and returns a :class:`Decision` that tells the worker what to do with the message
(:mod:`functions.core.batch` runs a batch of them).
The state of the delivery lives in the inbox item (see :mod:`functions.core.claim`),
never in the queue: a message is only a reminder that a delivery may need work, so
duplicated or re-enqueued messages are harmless. What to run (the package id and the
MCP server) is read from the claimed inbox item too: a message that names anything else
is refused (acknowledged, not run, counted). The package a delivery runs on is fetched
once and recorded (:mod:`functions.core.package_record`): before the run, or, for a
workflow without effects, by the completion's own write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from functions.core import metric_names, settings_table, tracing
from functions.core.approval import AwaitingApproval
from functions.core.claim import (
    ITEM_EXPIRED,
    Claim,
    ClaimAttempt,
    ClaimLost,
    ClaimStatus,
    new_owner_token,
)
from functions.core.clock import Clock
from functions.core.effects import EffectLedger
from functions.core.errors import (
    BudgetExhausted,
    McpAuthError,
    PackageChanged,
    PermanentError,
    ProcessingError,
    TransientError,
    UncertainEffect,
)
from functions.core.models import WorkItem
from functions.core.observability import logger, trace_in_logs
from functions.core.package import Package
from functions.core.package_record import PackageRecorder, PackageStorage
from functions.core.ports.claims import ClaimStore
from functions.core.ports.effects import EffectStore
from functions.core.ports.metrics import MetricsSink
from functions.core.ports.package import AdmittingSource, PackageSource
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.workflow import has_effects
from functions.core.retry_policy import RETRY_BASE_SECONDS, next_attempt_at

if TYPE_CHECKING:
    from functions.core.ports.workflow import Workflow
    from functions.core.steps import StepStorage

# last_error-style code of a message that disagrees with its inbox item.
WORK_ITEM_MISMATCH = "work_item_mismatch"

# SQS caps a message's delay (DelaySeconds) at 15 minutes; a deferral waiting out a
# longer lease is deferred again.
MAX_QUEUE_DELAY_SECONDS = 900


class Disposition(StrEnum):
    """What the worker does with the queue message."""

    ACK = "ack"  # done with it (completed, failed, nothing to do)
    RETRY = "retry"  # return it to the queue after ``delay_seconds``
    DEFER = "defer"  # send a fresh copy after ``delay_seconds``, ack this one
    DEAD_LETTER = "dead_letter"  # move it to the dead-letter queue
    # Claimed beside other messages, and suspect (earlier attempts died unexplained):
    # given back unrun, to be processed again alone (functions.core.batch).
    RUN_ALONE = "run_alone"


class Result(StrEnum):
    """Why, for logs and tests."""

    COMPLETED = "completed"
    ALREADY_DONE = "already_done"
    DEFERRED = "deferred"
    RETRYING = "retrying"
    FAILED = "failed"
    EXHAUSTED = "exhausted"
    UNCERTAIN = "uncertain"
    CLAIM_LOST = "claim_lost"
    MISSING = "missing"
    SET_ASIDE = "set_aside"  # suspect, claimed in company: given back to run alone
    EXPIRED = "expired"  # past its TTL before it could run again: closed, not run
    AWAITING_APPROVAL = "awaiting_approval"  # parked for a person's decision
    # The message names another package or server than the inbox item: given back
    # unrun (the reconciler sends the item's own work item again).
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Decision:
    """What became of one work item.

    Attributes:
        failure: For a dead letter, the failure it is sent for (the owner token of the
            claim that failed the delivery): a redrive reopens that failure only.
    """

    result: Result
    disposition: Disposition
    delay_seconds: int = 0
    error_code: str | None = None
    # A random token, not part of what was decided (nor of equality).
    failure: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ProcessConfig:
    """How the processor retries (see :mod:`functions.core.retry_policy`).

    Attributes:
        max_attempts: Attempts of unknown outcome (a workflow's unexpected error, an
            attempt that died) after which a delivery is dead-lettered.
        lease_seconds: How long a claim lasts.
        retry_base_seconds: The first retry delay; it doubles. The local runtime
            compresses time: its retries must not wait out real minutes.
        retry_horizon_seconds: How long after its receipt a delivery is still retried.
        alone_after: Earlier attempts of unknown outcome after which a delivery runs
            alone in its invocation: one that times out the invocation (a poison
            message) must not keep killing its batch-mates' attempts with it.
    """

    max_attempts: int
    lease_seconds: int
    retry_base_seconds: int = RETRY_BASE_SECONDS
    retry_horizon_seconds: int = settings_table.WORKER_RETRY_HORIZON_HOURS.env_default
    alone_after: int = 2

    @property
    def runs_alone_after(self) -> int:
        """``alone_after``, lowered so that an innocent batch-mate still has an attempt
        left to run alone when ``max_attempts`` is small (never below 1)."""
        return max(1, min(self.alone_after, self.max_attempts - 1))


@dataclass
class Processor:
    """Processes work items; one instance serves every batch of a warm Lambda."""

    claims: ClaimStore
    effects: EffectStore
    workflow: Workflow
    clock: Clock
    metrics: MetricsSink
    config: ProcessConfig
    # Where each delivery's package is recorded once (every attempt runs on it).
    packages: PackageStorage
    new_owner: Callable[[], str] = field(default=new_owner_token)
    # Where the ledger keeps workflow steps (``ledger.step``); None: steps unavailable.
    steps: StepStorage | None = None

    async def process(
        self, work: WorkItem, source: PackageSource, *, alone: bool = True
    ) -> Decision:
        """Take one work item as far as it can go now, inside its attempt span.

        Args:
            alone: nothing else runs in this invocation meanwhile. When False, a
                delivery whose earlier attempts died unexplained ``runs_alone_after`` times or
                more is given back unrun (:attr:`Disposition.RUN_ALONE`).
        """
        # Announced at its start: an attempt killed with its worker stays in the trace.
        with (
            tracing.span(
                tracing.SPAN_ATTEMPT,
                parent=tracing.parent_from(work.traceparent),
                attributes={"delivery_id": work.delivery_id},
                announce=True,
            ) as attempt_span,
            trace_in_logs(attempt_span.context.trace_id),
        ):
            decision = await self._attempt(work, source, alone=alone)
            attempt_span.set("result", decision.result.value)
            attempt_span.set("error_code", decision.error_code)
            return decision

    async def _attempt(self, work: WorkItem, source: PackageSource, *, alone: bool) -> Decision:
        now = self.clock.now()
        with tracing.span(tracing.SPAN_CLAIM) as claim_span:
            attempt = self.claims.claim(
                work.delivery_id,
                owner=self.new_owner(),
                now=now,
                lease_seconds=self.config.lease_seconds,
            )
            claim_span.set("status", attempt.status.value)
            claim_span.set("attempt", attempt.claim.attempts if attempt.claim else None)
        if attempt.status is not ClaimStatus.CLAIMED or attempt.claim is None:
            return self._not_claimed(work, attempt, now=now)
        claim = attempt.claim
        try:
            if claim.work != work:
                return self._refuse(work, claim)
            if claim.unexplained_attempts > self.config.max_attempts:
                # Earlier attempts ended without a known-transient outcome (a workflow
                # bug, or a worker that died, e.g. a Lambda timeout) and used up the
                # budget for those: do not run the workflow again.
                self.claims.fail(claim, now=self.clock.now(), error_code="attempts_exhausted")
                return self._decide(
                    work,
                    Decision(
                        Result.EXHAUSTED,
                        Disposition.DEAD_LETTER,
                        0,
                        "attempts_exhausted",
                        failure=claim.owner,
                    ),
                )
            if not alone and claim.unexplained_attempts - 1 >= self.config.runs_alone_after:
                self.claims.give_back(claim, now=self.clock.now())
                return self._decide(work, Decision(Result.SET_ASIDE, Disposition.RUN_ALONE))
            return await self._run(work, source, claim)
        except ClaimLost:
            return self._decide(work, Decision(Result.CLAIM_LOST, Disposition.ACK, 0, "claim_lost"))

    def _refuse(self, work: WorkItem, claim: Claim) -> Decision:
        """A message that names another package or server than the signed delivery's
        inbox item: nothing of it runs. The claim is given back, so the delivery stays
        pending for its own work item."""
        self.claims.give_back(claim, now=self.clock.now())
        logger.warning(
            "queue message disagrees with its inbox item: refused, not run",
            extra={
                "delivery_id": work.delivery_id,
                "package_id_matches": claim.work is not None
                and claim.work.package_id == work.package_id,
                "mcp_url_matches": claim.work is not None and claim.work.mcp_url == work.mcp_url,
            },
        )
        return self._decide(work, Decision(Result.REFUSED, Disposition.ACK, 0, WORK_ITEM_MISMATCH))

    def _not_claimed(self, work: WorkItem, attempt: ClaimAttempt, *, now: int) -> Decision:
        """What to do with a message whose delivery could not be claimed."""
        if attempt.status in (ClaimStatus.COMPLETED, ClaimStatus.CLOSED):
            return self._decide(work, Decision(Result.ALREADY_DONE, Disposition.ACK))
        if attempt.status is ClaimStatus.MISSING:
            return self._decide(work, Decision(Result.MISSING, Disposition.ACK))
        if attempt.status is ClaimStatus.EXPIRED:
            # Past its TTL its effect records may be deleted already: running it could
            # repeat a done effect. Closed as failed (shown until TTL deletes it), counted.
            self.claims.close_expired(
                work.delivery_id, now=now, lease_seconds=self.config.lease_seconds
            )
            return self._decide(work, Decision(Result.EXPIRED, Disposition.ACK, 0, ITEM_EXPIRED))
        # Leased: another live worker holds it; come back when its lease ends.
        remaining = (attempt.lease_until or now) - now
        delay = max(1, min(MAX_QUEUE_DELAY_SECONDS, remaining))
        return self._decide(work, Decision(Result.DEFERRED, Disposition.DEFER, delay))

    async def _package(
        self, claim: Claim, work: WorkItem, source: PackageSource
    ) -> tuple[Package, PackageRecord | None]:
        """The package to run on, and its record when the completion is to write it."""
        recorder = PackageRecorder(self.packages, clock=self.clock)
        record: PackageRecord | None = None
        if has_effects(self.workflow):
            # Recorded before the run: approvals and replays resume on this package.
            package = await recorder.package(claim, work, source)
        else:
            # Recorded by the completion's own write, one write fewer: nothing
            # happens outside before it, so a crash or a lost answer in between
            # leaves no record (the next attempt fetches) or a completed item. With
            # no earlier record there is nothing to compare: no package_changed here.
            package, record = await recorder.unrecorded(claim, work, source)
        if isinstance(source, AdmittingSource):
            source.package_obtained(work.mcp_url)
        return package, record

    async def _run(  # noqa: PLR0911 (one outcome per error class, in one ordered list)
        self, work: WorkItem, source: PackageSource, claim: Claim
    ) -> Decision:
        try:
            package, record = await self._package(claim, work, source)
            ledger = EffectLedger(
                work.delivery_id,
                store=self.effects,
                clock=self.clock,
                expires_at=claim.expires_at,
                steps=self.steps,
            )
            # In a thread: a workflow may block, or run its own event loop for an agent.
            with tracing.span(tracing.SPAN_WORKFLOW):
                await asyncio.to_thread(self.workflow.run, work, package, ledger)
            self.claims.complete(
                claim, now=self.clock.now(), effects_done=ledger.repeated, package=record
            )
        except ClaimLost:
            raise
        except UncertainEffect as exc:
            self.metrics.count(metric_names.METRIC_UNCERTAIN_EFFECTS)
            # Failed, not retried: a blind retry could repeat the effect. The intent
            # record stays listed in the state index for the reconciler and operators.
            self.claims.fail(claim, now=self.clock.now(), error_code=exc.code)
            return self._decide(work, Decision(Result.UNCERTAIN, Disposition.ACK, 0, exc.code))
        except AwaitingApproval as exc:
            # Parked: no worker holds it and no message waits for it; the decision
            # sends its work item again (or ends it failed).
            self.claims.park(claim, now=self.clock.now(), approval=exc.name, deadline=exc.deadline)
            return self._decide(
                work, Decision(Result.AWAITING_APPROVAL, Disposition.ACK, 0, exc.code)
            )
        except PermanentError as exc:
            if isinstance(exc, PackageChanged):
                self.metrics.count(metric_names.METRIC_PACKAGE_CHANGED)
            self.claims.fail(claim, now=self.clock.now(), error_code=exc.code)
            return self._decide(work, Decision(Result.FAILED, Disposition.ACK, 0, exc.code))
        except BudgetExhausted as exc:
            return self._wait_for_budget(work, claim, exc)
        except TransientError as exc:
            if isinstance(exc, McpAuthError):
                self.metrics.count(metric_names.METRIC_MCP_AUTH_FAILURES)
            return self._retry_or_give_up(work, claim, exc.code, known_transient=True)
        except ProcessingError as exc:
            return self._retry_or_give_up(work, claim, exc.code, known_transient=False)
        except Exception:  # noqa: BLE001 (a workflow's own bug: retried, then dead-lettered)
            logger.exception("workflow raised an unexpected error")
            return self._retry_or_give_up(work, claim, "unexpected_error", known_transient=False)
        return self._decide(work, Decision(Result.COMPLETED, Disposition.ACK))

    def _wait_for_budget(self, work: WorkItem, claim: Claim, exc: BudgetExhausted) -> Decision:
        """Let the delivery wait for the token budget, but never past its expiry.

        The attempt is given back (waiting is no failure), and a fresh copy of the
        message comes back within 15 minutes, to wait again until ``retry_at`` (the next
        UTC day) or until an operator raises the limit. A delivery whose item expires
        before ``retry_at`` would wait until it silently vanished: it fails instead,
        visibly (``WorkFailed``), with the budget's code.
        """
        self.metrics.count(metric_names.METRIC_BUDGET_EXHAUSTED)
        now = self.clock.now()
        if claim.expires_at and exc.retry_at >= claim.expires_at:
            logger.warning(
                "the token budget opens after the delivery expires: failed, not deferred",
                extra={
                    "delivery_id": work.delivery_id,
                    "retry_at": exc.retry_at,
                    "expires_at": claim.expires_at,
                },
            )
            self.claims.fail(claim, now=now, error_code=exc.code)
            return self._decide(work, Decision(Result.FAILED, Disposition.ACK, 0, exc.code))
        self.claims.defer(claim, now=now, error_code=exc.code)
        delay = max(1, min(MAX_QUEUE_DELAY_SECONDS, exc.retry_at - now))
        return self._decide(work, Decision(Result.DEFERRED, Disposition.DEFER, delay, exc.code))

    def _retry_or_give_up(
        self, work: WorkItem, claim: Claim, code: str, *, known_transient: bool
    ) -> Decision:
        """Release the claim for a later attempt, or fail and dead-letter the delivery.

        Every failure is retried only while the next attempt starts within the horizon;
        one of unknown nature also only while such attempts stay within ``max_attempts``.
        """
        now = self.clock.now()
        retry_at = next_attempt_at(
            failed_at=now,
            attempts=claim.attempts,
            window_start=claim.retry_window_start,
            horizon_seconds=self.config.retry_horizon_seconds,
            base_seconds=self.config.retry_base_seconds,
        )
        budget_left = known_transient or claim.unexplained_attempts < self.config.max_attempts
        if retry_at is None or not budget_left:
            self.claims.fail(claim, now=now, error_code=code)
            return self._decide(
                work,
                Decision(Result.EXHAUSTED, Disposition.DEAD_LETTER, 0, code, failure=claim.owner),
            )
        if known_transient:
            self.claims.release_transient(claim, now=now, error_code=code)
        else:
            self.claims.release(claim, now=now, error_code=code)
        return self._decide(
            work, Decision(Result.RETRYING, Disposition.RETRY, retry_at - now, code)
        )

    def _decide(self, work: WorkItem, decision: Decision) -> Decision:
        self.metrics.count(_RESULT_METRICS[decision.result])
        logger.info(
            "work item processed",
            extra={
                "delivery_id": work.delivery_id,
                "result": decision.result.value,
                "error_code": decision.error_code,
            },
        )
        return decision


_RESULT_METRICS = {
    Result.COMPLETED: metric_names.METRIC_WORK_COMPLETED,
    Result.ALREADY_DONE: metric_names.METRIC_WORK_ALREADY_DONE,
    Result.MISSING: metric_names.METRIC_WORK_ALREADY_DONE,
    Result.EXPIRED: metric_names.METRIC_WORK_EXPIRED,
    Result.SET_ASIDE: metric_names.METRIC_WORK_SET_ASIDE,
    Result.DEFERRED: metric_names.METRIC_WORK_DEFERRED,
    Result.RETRYING: metric_names.METRIC_WORK_RETRIED,
    Result.FAILED: metric_names.METRIC_WORK_FAILED,
    Result.UNCERTAIN: metric_names.METRIC_WORK_FAILED,
    Result.EXHAUSTED: metric_names.METRIC_WORK_DEAD_LETTERED,
    Result.CLAIM_LOST: metric_names.METRIC_CLAIMS_LOST,
    Result.AWAITING_APPROVAL: metric_names.METRIC_WORK_PARKED,
    Result.REFUSED: metric_names.METRIC_WORK_REFUSED,
}
