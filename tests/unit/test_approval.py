"""The approval gate on fakes: parked with no lease, decided once, every lost answer."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from functions.core import metric_names
from functions.core.approval import (
    DECIDED_BY_TIMEOUT,
    EXPIRY_MARGIN_SECONDS,
    ApprovalPolicy,
    ApprovalRefused,
    AwaitingApproval,
    DecideOutcome,
    decide,
    new_decision_token,
    require_approval,
)
from functions.core.errors import StorageUnavailable
from functions.core.models import InboxItem, State, WorkItem
from functions.core.package import Package
from functions.core.package_record import PackageStorage
from functions.core.ports.approvals import ApprovalDecision, Decision
from functions.core.ports.workflow import Ledger
from functions.core.process import Disposition, ProcessConfig, Processor, Result
from functions.core.reconcile import ReconcileConfig, reconcile
from functions.core.steps import StepStorage
from local.testkit.clock import FakeClock, deadline_after_looks
from tests.fakes import (
    FakeApprovals,
    FakeClaims,
    FakeEffects,
    FakeMetrics,
    FakePackageRecords,
    FakeQueue,
    FakeReceivedLog,
    FakeSteps,
)
from tests.unit.test_process import package_of

TIMEOUT = 3600
PROPOSAL = {"title": "Package pkg_1", "summary": "ships today"}
PACKAGE_DIGEST = "a" * 64
EXPIRES = 1_760_000_000 + 14 * 86_400  # (FakeClock starts at 1_760_000_000)
WORK = WorkItem(
    "7d0c3b1a-2f4e-4c6d-9b8a-0e1f2a3b4c5d", "package.received", "pkg_1", "https://mcp.example/mcp"
)


@dataclass
class GatedWorkflow:
    """Records a proposal (a step), waits for its approval, then sends it once."""

    approvals: FakeApprovals
    clock: FakeClock
    sent: list[str] = field(default_factory=list)
    proposals: int = 0
    package_digest: str = PACKAGE_DIGEST  # what the run's package is, this attempt

    def run(self, work: WorkItem, package: Any, effects: Ledger) -> None:
        proposal = effects.step("proposal", self._propose)
        require_approval(
            self.approvals,
            delivery_id=work.delivery_id,
            name="alert",
            proposal=proposal,
            package_digest=self.package_digest,
            now=self.clock.now(),
            timeout_seconds=TIMEOUT,
            expires_at=effects.expires_at,
        )
        effects.run("alert", self.sent.append)

    def _propose(self) -> dict[str, str]:
        self.proposals += 1
        return dict(PROPOSAL)


class Packages:
    async def get_package(self, mcp_url: str, package_id: str) -> Package:
        return package_of(package_id)


@dataclass
class World:
    clock: FakeClock = field(default_factory=FakeClock)
    claims: FakeClaims = field(default_factory=FakeClaims)
    metrics: FakeMetrics = field(default_factory=FakeMetrics)
    steps: FakeSteps = field(default_factory=FakeSteps)
    effects: FakeEffects = field(default_factory=FakeEffects)
    approvals: FakeApprovals = field(init=False)
    workflow: GatedWorkflow = field(init=False)

    def __post_init__(self) -> None:
        self.approvals = FakeApprovals(self.claims)
        self.workflow = GatedWorkflow(self.approvals, self.clock)
        self.claims.add(
            InboxItem(
                delivery_id=WORK.delivery_id,
                event=WORK.event,
                body_sha256="0" * 64,
                received_at=self.clock.value,
                state=State.PENDING,
                expires_at=EXPIRES,
                package_id=WORK.package_id,
                mcp_url=WORK.mcp_url,
                state_changed_at=self.clock.value,
            )
        )

    def process(self) -> Any:
        processor = Processor(
            claims=self.claims,
            effects=self.effects,
            workflow=self.workflow,
            clock=self.clock,
            metrics=self.metrics,
            config=ProcessConfig(max_attempts=3, lease_seconds=300),
            steps=StepStorage(records=self.steps, metrics=self.metrics),
            packages=PackageStorage(FakePackageRecords(claims=self.claims)),
        )
        return asyncio.run(processor.process(WORK, Packages()))

    def item(self) -> InboxItem:
        return self.claims.items[WORK.delivery_id]

    def decide(
        self,
        wanted: ApprovalDecision,
        *,
        token: str | None = None,
        name: str = "alert",
        proposal: str | None = None,
    ) -> DecideOutcome:
        token = token or new_decision_token()
        decision = Decision(wanted, "operator", self.clock.now(), token, proposal=proposal)
        return decide(self.approvals, WORK.delivery_id, name, decision).outcome


def test_policy_reads_alert_tools_and_both() -> None:
    assert ApprovalPolicy.parse("alert") == ApprovalPolicy(alert=True)
    assert ApprovalPolicy.parse(None) == ApprovalPolicy()
    both = ApprovalPolicy.parse("alert; tools:open_ticket, post.message")
    assert both.alert
    assert both.needs_tool("open_ticket")
    assert both.needs_tool("post.message")
    assert not both.needs_tool("lookup")


@pytest.mark.parametrize("text", ["alerts", "tools:", "tools:a,,b", "tools:Bad Name"])
def test_policy_refuses_what_it_does_not_understand(text: str) -> None:
    with pytest.raises(ValueError, match="approval"):
        ApprovalPolicy.parse(text)


def test_a_delivery_parks_with_no_lease_and_its_attempt_given_back() -> None:
    world = World()
    decision = world.process()
    assert decision.result is Result.AWAITING_APPROVAL
    assert decision.disposition is Disposition.ACK  # no message waits for the person
    item = world.item()
    assert item.state is State.AWAITING_APPROVAL
    assert item.lease_until is None
    assert world.claims.owners == {}
    assert item.attempts == 0
    assert item.approval == "alert"
    assert item.approval_deadline == world.clock.value + TIMEOUT
    assert world.workflow.sent == []
    assert world.metrics.counts[metric_names.METRIC_WORK_PARKED] == 1
    # A copy of the message that comes while it waits is acknowledged, nothing runs.
    assert world.process().result is Result.ALREADY_DONE
    assert world.workflow.proposals == 1


def test_approved_it_resumes_reusing_the_recorded_proposal_and_sends_once() -> None:
    world = World()
    world.process()
    world.clock.advance(60)
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.APPLIED
    assert world.item().state is State.PENDING
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.UNCHANGED
    assert world.process().result is Result.COMPLETED
    assert world.process().result is Result.ALREADY_DONE
    assert world.workflow.sent == [f"{WORK.delivery_id}:alert"]
    assert world.workflow.proposals == 1  # the step's record, not a second model call


def test_denied_it_ends_failed_saying_so_and_no_later_run_sends() -> None:
    world = World()
    world.process()
    assert world.decide(ApprovalDecision.DENIED) is DecideOutcome.APPLIED
    assert world.item().state is State.FAILED
    assert world.item().last_error == "approval_denied"
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.REFUSED
    assert world.decide(ApprovalDecision.DENIED) is DecideOutcome.UNCHANGED
    # An operator's requeue runs it again: the recorded refusal ends it as before.
    assert world.claims.reopen(WORK.delivery_id, now=world.clock.now())
    decision = world.process()
    assert (decision.result, decision.error_code) == (Result.FAILED, "approval_denied")
    assert world.workflow.sent == []


def test_approve_after_approve_then_deny_is_refused() -> None:
    world = World()
    world.process()
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.APPLIED
    assert world.decide(ApprovalDecision.DENIED) is DecideOutcome.REFUSED


def test_a_delivery_not_parked_has_nothing_to_decide() -> None:
    world = World()
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.NOT_WAITING
    assert world.item().state is State.PENDING


@pytest.mark.parametrize("wanted", [ApprovalDecision.APPROVED, ApprovalDecision.DENIED])
def test_a_decision_whose_answer_was_lost_is_applied_not_a_conflict(
    wanted: ApprovalDecision,
) -> None:
    world = World()
    world.process()
    world.approvals.lose_answers = 1
    assert world.decide(wanted) is DecideOutcome.APPLIED
    record = world.approvals.get(WORK.delivery_id, "alert")
    assert record is not None
    assert record.decided is not None
    assert record.decided.decision is wanted


def test_a_retried_decision_whose_first_answer_was_lost_is_not_applied_twice() -> None:
    """The operator runs the same decision again: the same token is recognised."""
    world = World()
    world.process()
    world.approvals.lose_answers = 1
    token = new_decision_token()
    assert world.decide(ApprovalDecision.APPROVED, token=token) is DecideOutcome.APPLIED
    assert world.decide(ApprovalDecision.APPROVED, token=token) is DecideOutcome.APPLIED
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.UNCHANGED
    assert world.process().result is Result.COMPLETED
    assert world.workflow.sent == [f"{WORK.delivery_id}:alert"]


def test_a_decision_that_failed_before_committing_says_so() -> None:
    world = World()
    world.process()
    world.approvals.fail_decisions = 1
    with pytest.raises(StorageUnavailable):
        world.decide(ApprovalDecision.APPROVED)
    assert world.item().state is State.AWAITING_APPROVAL
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.APPLIED


def test_the_record_binds_the_proposal_and_the_package_it_was_made_from() -> None:
    world = World()
    world.process()
    record = world.approvals.get(WORK.delivery_id, "alert")
    assert record is not None
    assert record.proposal == PROPOSAL
    assert record.package_digest == PACKAGE_DIGEST
    other = dataclasses.replace(record, package_digest="c" * 64)
    assert other.proposal_digest() != record.proposal_digest()
    reworded = dataclasses.replace(record, proposal={**PROPOSAL, "summary": "ships today!"})
    assert reworded.proposal_digest() != record.proposal_digest()


def test_a_decision_naming_another_proposal_changes_nothing() -> None:
    world = World()
    world.process()
    outcome = world.decide(ApprovalDecision.APPROVED, proposal="0" * 64)
    assert outcome is DecideOutcome.OTHER_PROPOSAL
    assert world.item().state is State.AWAITING_APPROVAL
    record = world.approvals.get(WORK.delivery_id, "alert")
    assert record is not None
    assert record.decided is None
    named = world.decide(ApprovalDecision.APPROVED, proposal=record.proposal_digest())
    assert named is DecideOutcome.APPLIED


def test_a_resumed_run_from_another_package_parks_again_and_sends_nothing() -> None:
    """Approved for what the person saw; the resumed run proposes from another package:
    a new proposal that waits under its own name, the old yes does not run it."""
    world = World()
    world.process()
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.APPLIED
    world.workflow.package_digest = "c" * 64
    assert world.process().result is Result.AWAITING_APPROVAL
    assert world.workflow.sent == []
    waiting = world.item().approval
    assert waiting is not None
    assert waiting.startswith("alert.")
    record = world.approvals.get(WORK.delivery_id, waiting)
    assert record is not None
    assert record.package_digest == "c" * 64
    with pytest.raises(AwaitingApproval) as parked:  # asked again: the same record
        require_approval(
            world.approvals,
            delivery_id=WORK.delivery_id,
            name="alert",
            proposal=PROPOSAL,
            package_digest="c" * 64,
            now=world.clock.now(),
            timeout_seconds=TIMEOUT,
            expires_at=EXPIRES,
        )
    assert (parked.value.name, parked.value.package_digest) == (waiting, "c" * 64)
    assert parked.value.proposal_digest == record.proposal_digest()
    assert record.decided is None
    assert world.decide(ApprovalDecision.APPROVED, name=waiting) is DecideOutcome.APPLIED
    world.process()
    assert len(world.workflow.sent) == 1


def test_the_first_request_whose_answer_was_lost_still_parks() -> None:
    world = World()
    world.approvals.lose_requests = 1
    assert world.process().result is Result.AWAITING_APPROVAL
    assert world.item().state is State.AWAITING_APPROVAL


def test_the_deadline_never_outlives_the_delivery() -> None:
    world = World()
    with pytest.raises(AwaitingApproval) as parked:
        require_approval(
            world.approvals,
            delivery_id=WORK.delivery_id,
            name="alert",
            proposal=PROPOSAL,
            package_digest=PACKAGE_DIGEST,
            now=world.clock.value,
            timeout_seconds=TIMEOUT,
            expires_at=world.clock.value + 600 + EXPIRY_MARGIN_SECONDS,
        )
    assert parked.value.deadline == world.clock.value + 600


def test_an_expired_approval_refuses_with_its_own_code() -> None:
    world = World()
    world.process()
    world.clock.advance(TIMEOUT)
    timeout = Decision(
        ApprovalDecision.EXPIRED, DECIDED_BY_TIMEOUT, world.clock.now(), new_decision_token()
    )
    assert decide(world.approvals, WORK.delivery_id, "alert", timeout).outcome is (
        DecideOutcome.APPLIED
    )
    with pytest.raises(ApprovalRefused) as refused:
        require_approval(
            world.approvals,
            delivery_id=WORK.delivery_id,
            name="alert",
            proposal=PROPOSAL,
            package_digest=PACKAGE_DIGEST,
            now=world.clock.value,
            timeout_seconds=TIMEOUT,
            expires_at=EXPIRES,
        )
    assert refused.value.code == "approval_expired"
    # A person's decision after the timeout's, of either kind, is refused as late.
    assert world.decide(ApprovalDecision.DENIED) is DecideOutcome.EXPIRED
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.EXPIRED


# --- the reconciler's pass ---------------------------------------------------------------

CONFIG = ReconcileConfig(pending_age_seconds=600, effect_age_seconds=1200, received_age_seconds=300)


def run_reconciler(world: World, *, looks: int = 1000) -> Any:
    return reconcile(
        store=world.claims,
        received=FakeReceivedLog(world.claims),
        effects=FakeEffects(),
        queue=FakeQueue(),
        clock=world.clock,
        metrics=world.metrics,
        config=CONFIG,
        deadline=deadline_after_looks(looks),
        approvals=world.approvals,
    )


def test_the_reconciler_denies_an_undecided_one_only_at_its_deadline() -> None:
    world = World()
    world.process()
    world.clock.advance(TIMEOUT - 1)
    report = run_reconciler(world)
    assert report.approvals_expired == 0
    assert report.approval_oldest_wait_seconds == TIMEOUT - 1
    oldest_wait = world.metrics.durations[metric_names.METRIC_APPROVAL_OLDEST_WAIT]
    assert oldest_wait == [TIMEOUT - 1]
    assert world.item().state is State.AWAITING_APPROVAL
    world.clock.advance(1)
    report = run_reconciler(world)
    assert report.approvals_expired == 1
    assert report.approval_oldest_wait_seconds == 0
    assert oldest_wait == [TIMEOUT - 1]  # nothing waits: no data point (not a breach)
    assert world.item().state is State.FAILED
    assert world.item().last_error == "approval_expired"
    record = world.approvals.get(WORK.delivery_id, "alert")
    assert record is not None
    assert record.decided is not None
    assert record.decided.decided_by == DECIDED_BY_TIMEOUT
    assert run_reconciler(world).approvals_expired == 0
    assert world.metrics.counts[metric_names.METRIC_APPROVALS_EXPIRED] == 1


def test_the_reconcilers_denial_whose_answer_was_lost_is_counted_once() -> None:
    world = World()
    world.process()
    world.clock.advance(TIMEOUT)
    world.approvals.lose_answers = 1
    assert run_reconciler(world).approvals_expired == 1
    assert run_reconciler(world).approvals_expired == 0
    assert world.item().last_error == "approval_expired"


def test_a_persons_decision_before_the_deadline_wins() -> None:
    world = World()
    world.process()
    world.clock.advance(TIMEOUT - 1)
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.APPLIED
    world.clock.advance(1)
    assert run_reconciler(world).approvals_expired == 0
    assert world.item().state is State.PENDING


def test_a_persons_decision_at_the_deadline_is_refused_before_the_reconciler_runs() -> None:
    world = World()
    world.process()
    world.clock.advance(TIMEOUT)
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.EXPIRED
    assert world.decide(ApprovalDecision.DENIED) is DecideOutcome.EXPIRED
    record = world.approvals.get(WORK.delivery_id, "alert")
    assert record is not None
    assert record.decided is None
    assert world.item().state is State.AWAITING_APPROVAL  # nothing moved: nothing acts
    assert run_reconciler(world).approvals_expired == 1
    assert world.decide(ApprovalDecision.APPROVED) is DecideOutcome.EXPIRED
    assert world.item().last_error == "approval_expired"
    assert world.workflow.sent == []


def test_the_pass_stops_at_the_deadline_and_the_next_run_goes_on() -> None:
    world = World()
    world.process()
    for n in range(1, 4):  # three more deliveries parked the same way
        other = dataclasses.replace(
            world.item(), delivery_id=f"{WORK.delivery_id[:-1]}{n}", state=State.PENDING
        )
        world.claims.add(other)
        work = dataclasses.replace(WORK, delivery_id=other.delivery_id)
        processor = Processor(
            claims=world.claims,
            effects=world.effects,
            workflow=world.workflow,
            clock=world.clock,
            metrics=world.metrics,
            config=ProcessConfig(max_attempts=3, lease_seconds=300),
            steps=StepStorage(records=world.steps, metrics=world.metrics),
            packages=PackageStorage(FakePackageRecords(claims=world.claims)),
        )
        assert asyncio.run(processor.process(work, Packages())).result is (Result.AWAITING_APPROVAL)
    world.clock.advance(TIMEOUT)
    first = run_reconciler(world, looks=3)
    assert first.budget_spent
    assert first.approvals_expired < 4
    second = run_reconciler(world)
    assert first.approvals_expired + second.approvals_expired == 4
    assert all(item.state is State.FAILED for item in world.claims.items.values())
