"""The approval gate's records and decisions in DynamoDB (moto): one transaction, once."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from functions.core import table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals, approval_key
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.approval import (
    AwaitingApproval,
    DecideOutcome,
    decide,
    new_decision_token,
    require_approval,
)
from functions.core.claim import Claim, ClaimLost
from functions.core.models import InboxItem, State
from functions.core.ports.approvals import ApprovalDecision, ApprovalRecord, Decision
from local.testkit.botocore_hooks import answer_first, aws_response
from local.testkit.clock import FakeClock
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_dynamodb.client import DynamoDBClient

DELIVERY = "3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a"
DEADLINE_IN = 3600
EXPIRES_IN = 86_400


def claimed(client: DynamoDBClient, table: str, clock: FakeClock) -> Claim:
    """A delivery accepted and claimed by a worker."""
    item = InboxItem(
        delivery_id=DELIVERY,
        event="package.received",
        body_sha256="0" * 64,
        received_at=clock.value,
        state=State.PENDING,
        expires_at=clock.value + EXPIRES_IN,
        package_id="pkg_1",
        mcp_url="https://mcp.example/mcp",
        state_changed_at=clock.value,
    )
    client.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(item))
    claims = DynamoDbClaims(client=client, table_name=table)
    attempt = claims.claim(DELIVERY, owner="w1", now=clock.value, lease_seconds=300)
    assert attempt.claim is not None
    return attempt.claim


def parked(client: DynamoDBClient, table: str, clock: FakeClock) -> DynamoDbApprovals:
    """A delivery claimed, its approval asked for, and parked, as the worker does."""
    claim = claimed(client, table, clock)
    claims = DynamoDbClaims(client=client, table_name=table)
    approvals = DynamoDbApprovals(client=client, table_name=table)
    record = ApprovalRecord(
        DELIVERY, "alert", {"title": "t"}, clock.value, clock.value + DEADLINE_IN
    )
    assert approvals.request(record, expires_at=clock.value + EXPIRES_IN) is True
    assert approvals.request(record, expires_at=clock.value + EXPIRES_IN) is False
    claims.park(claim, now=clock.value, approval="alert", deadline=record.deadline)
    return approvals


def decision(wanted: ApprovalDecision, clock: FakeClock, token: str | None = None) -> Decision:
    return Decision(wanted, "operator", clock.value, token or new_decision_token(), "ok")


def inbox(client: DynamoDBClient, table: str) -> InboxItem:
    found = client.get_item(TableName=table, Key=dynamodb_items.inbox_key(DELIVERY))["Item"]
    return dynamodb_items.inbox_from_item(found)


def test_parked_it_is_listed_with_its_deadline_and_holds_no_lease(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    (waiting,) = approvals.waiting(page_size=10)
    assert waiting.state is State.AWAITING_APPROVAL
    assert (waiting.approval, waiting.approval_deadline) == ("alert", clock.value + DEADLINE_IN)
    assert waiting.lease_until is None
    assert waiting.attempts == 0  # the attempt is given back
    stored = dynamodb.get_item(TableName=table, Key=dynamodb_items.inbox_key(DELIVERY))["Item"]
    assert stored[table_layout.STATE_INDEX_PARTITION_KEY]["S"].startswith("awaiting_approval#")
    # A copy of its message meanwhile finds nothing to claim.
    claims = DynamoDbClaims(client=dynamodb, table_name=table)
    assert claims.claim(DELIVERY, owner="w2", now=clock.value, lease_seconds=300).claim is None


def test_approve_moves_it_to_pending_once_and_the_record_names_the_decision(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    clock.advance(30)
    first = decide(approvals, DELIVERY, "alert", decision(ApprovalDecision.APPROVED, clock))
    assert first.outcome is DecideOutcome.APPLIED
    item = inbox(dynamodb, table)
    assert item.state is State.PENDING
    assert item.approval is None
    assert item.reset_at == clock.value
    assert list(approvals.waiting(page_size=10)) == []
    record = approvals.get(DELIVERY, "alert")
    assert record is not None and record.decided is not None
    assert (record.decided.decision, record.decided.decided_by, record.decided.note) == (
        ApprovalDecision.APPROVED,
        "operator",
        "ok",
    )
    assert record.decided.decided_at == clock.value
    again = decide(approvals, DELIVERY, "alert", decision(ApprovalDecision.APPROVED, clock))
    assert again.outcome is DecideOutcome.UNCHANGED
    deny = decide(approvals, DELIVERY, "alert", decision(ApprovalDecision.DENIED, clock))
    assert deny.outcome is DecideOutcome.REFUSED
    assert inbox(dynamodb, table).state is State.PENDING


def test_deny_ends_it_failed_and_approve_after_it_is_refused(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    denied = decide(approvals, DELIVERY, "alert", decision(ApprovalDecision.DENIED, clock))
    assert denied.outcome is DecideOutcome.APPLIED
    item = inbox(dynamodb, table)
    assert (item.state, item.last_error) == (State.FAILED, "approval_denied")
    stored = dynamodb.get_item(TableName=table, Key=dynamodb_items.inbox_key(DELIVERY))["Item"]
    assert stored[table_layout.STATE_INDEX_PARTITION_KEY]["S"].startswith("failed#")
    late = decide(approvals, DELIVERY, "alert", decision(ApprovalDecision.APPROVED, clock))
    assert late.outcome is DecideOutcome.REFUSED


def test_the_timeout_denies_only_after_the_deadline(dynamodb: DynamoDBClient, table: str) -> None:
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    clock.advance(DEADLINE_IN - 1)
    early = Decision(ApprovalDecision.EXPIRED, "timeout", clock.value, new_decision_token())
    assert decide(approvals, DELIVERY, "alert", early).outcome is DecideOutcome.NOT_WAITING
    assert inbox(dynamodb, table).state is State.AWAITING_APPROVAL
    clock.advance(1)
    due = Decision(ApprovalDecision.EXPIRED, "timeout", clock.value, new_decision_token())
    assert decide(approvals, DELIVERY, "alert", due).outcome is DecideOutcome.APPLIED
    item = inbox(dynamodb, table)
    assert (item.state, item.last_error) == (State.FAILED, "approval_expired")


@pytest.mark.parametrize("wanted", [ApprovalDecision.APPROVED, ApprovalDecision.DENIED])
def test_a_decision_retried_by_the_sdk_after_a_lost_answer_is_applied_once(
    dynamodb: DynamoDBClient, table: str, wanted: ApprovalDecision
) -> None:
    """The transaction commits, its caller hears a 500, botocore sends it again and its
    conditions refuse the copy: the decision must read as applied, not as a conflict."""
    clock = FakeClock()
    parked(dynamodb, table, clock)
    client, sends = lossy_client("TransactWriteItems")
    approvals = DynamoDbApprovals(client=client, table_name=table)
    result = decide(approvals, DELIVERY, "alert", decision(wanted, clock))
    assert len(sends) == 2  # the SDK's retry was sent, and refused by the conditions
    assert result.outcome is DecideOutcome.APPLIED
    record = approvals.get(DELIVERY, "alert")
    assert record is not None and record.decided is not None
    assert record.decided.decision is wanted
    expected = State.PENDING if wanted is ApprovalDecision.APPROVED else State.FAILED
    assert inbox(dynamodb, table).state is expected


def lossy_client(operation: str) -> tuple[DynamoDBClient, list[int]]:
    """A client whose first ``operation`` commits but answers 500 (the SDK retries it)."""
    client = boto3.client(
        "dynamodb",
        region_name=REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    sends: list[int] = []

    def lose_the_first_answer(request: AWSPreparedRequest, **_: object) -> AWSResponse | None:
        sends.append(1)
        if len(sends) > 1:
            return None
        body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}'
        return aws_response(
            request, 500, body, content_type="application/x-amz-json-1.0", request_id="lost"
        )

    answer_first(client, f"before-send.dynamodb.{operation}", lose_the_first_answer)
    return client, sends


def test_the_first_request_whose_answer_was_lost_still_parks_the_delivery(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    client, sends = lossy_client("PutItem")
    approvals = DynamoDbApprovals(client=client, table_name=table)
    with pytest.raises(AwaitingApproval) as parked_now:
        require_approval(
            approvals,
            delivery_id=DELIVERY,
            name="alert",
            proposal={"title": "t"},
            package_digest="b" * 64,
            now=clock.value,
            timeout_seconds=DEADLINE_IN,
            expires_at=clock.value + 86_400,
        )
    assert len(sends) == 2  # the retried put met the record its first try wrote
    assert parked_now.value.deadline == clock.value + DEADLINE_IN
    record = approvals.get(DELIVERY, "alert")
    assert record is not None and record.decided is None


def test_a_park_whose_answer_was_lost_leaves_it_parked_and_its_message_acknowledged(
    dynamodb: DynamoDBClient, table: str
) -> None:
    """The worker's park commits, its answer is lost, and the SDK's retry meets its own
    condition: the worker hears ClaimLost (acknowledge, record nothing), and the
    delivery waits parked all the same, for the decision to resume it."""
    clock = FakeClock()
    claim = claimed(dynamodb, table, clock)
    client, sends = lossy_client("UpdateItem")
    with pytest.raises(ClaimLost):
        DynamoDbClaims(client=client, table_name=table).park(
            claim, now=clock.value, approval="alert", deadline=clock.value + DEADLINE_IN
        )
    assert len(sends) == 2
    parked_item = inbox(dynamodb, table)
    assert parked_item.state is State.AWAITING_APPROVAL
    assert parked_item.approval == "alert"
    assert parked_item.attempts == 0  # given back once, not twice


# --- what a decision is about, and when it may be made -------------------------------


def parked_again(client: DynamoDBClient, table: str, clock: FakeClock) -> None:
    """The inbox item waits for ``alert`` again, while its record holds a decision (a
    state no path of ours makes: it isolates the record's own condition)."""
    item = dataclasses.replace(
        inbox(client, table),
        state=State.AWAITING_APPROVAL,
        approval="alert",
        approval_deadline=clock.value + DEADLINE_IN,
        last_error=None,
    )
    client.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(item))


@pytest.mark.parametrize("first", [ApprovalDecision.DENIED, ApprovalDecision.APPROVED])
def test_a_decision_is_written_once_by_the_records_own_condition(
    dynamodb: DynamoDBClient, table: str, first: ApprovalDecision
) -> None:
    """The inbox item waits for the approval again, so only the record's
    ``attribute_not_exists(decision)`` stands between a second decision and the first."""
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    assert approvals.decide(DELIVERY, "alert", decision(first, clock, "first")) is True
    parked_again(dynamodb, table, clock)
    for wanted in ApprovalDecision.APPROVED, ApprovalDecision.DENIED:
        assert approvals.decide(DELIVERY, "alert", decision(wanted, clock)) is False
    record = approvals.get(DELIVERY, "alert")
    assert record is not None and record.decided is not None
    assert (record.decided.decision, record.decided.token) == (first, "first")
    assert inbox(dynamodb, table).state is State.AWAITING_APPROVAL  # nothing moved


@pytest.mark.parametrize("wanted", [ApprovalDecision.APPROVED, ApprovalDecision.DENIED])
def test_the_store_refuses_a_persons_decision_at_or_after_the_deadline(
    dynamodb: DynamoDBClient, table: str, wanted: ApprovalDecision
) -> None:
    """Whatever the reconciler has done yet: the record's condition compares the
    deadline with the decision's time, so nothing acts on a late yes."""
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    clock.advance(DEADLINE_IN)
    assert approvals.decide(DELIVERY, "alert", decision(wanted, clock)) is False
    result = decide(approvals, DELIVERY, "alert", decision(wanted, clock))
    assert result.outcome is DecideOutcome.EXPIRED
    assert inbox(dynamodb, table).state is State.AWAITING_APPROVAL
    record = approvals.get(DELIVERY, "alert")
    assert record is not None and record.decided is None
    # The timeout's own decision still goes through, after it too.
    timeout = Decision(ApprovalDecision.EXPIRED, "timeout", clock.value, new_decision_token())
    assert decide(approvals, DELIVERY, "alert", timeout).outcome is DecideOutcome.APPLIED
    late = decide(approvals, DELIVERY, "alert", decision(wanted, clock))
    assert late.outcome is DecideOutcome.EXPIRED


def test_the_store_refuses_a_decision_about_another_proposal(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    record = approvals.get(DELIVERY, "alert")
    assert record is not None
    other = dataclasses.replace(decision(ApprovalDecision.APPROVED, clock), proposal="0" * 64)
    assert approvals.decide(DELIVERY, "alert", other) is False
    assert inbox(dynamodb, table).state is State.AWAITING_APPROVAL
    named = dataclasses.replace(other, proposal=record.proposal_digest())
    assert approvals.decide(DELIVERY, "alert", named) is True
    decided = approvals.get(DELIVERY, "alert")
    assert decided is not None and decided.decided is not None
    assert decided.decided.proposal == record.proposal_digest()


def test_the_record_keeps_the_proposal_its_package_and_their_digest(
    dynamodb: DynamoDBClient, table: str
) -> None:
    clock = FakeClock()
    approvals = DynamoDbApprovals(client=dynamodb, table_name=table)
    asked = ApprovalRecord(
        DELIVERY,
        "alert",
        {"title": "t\u202e"},
        clock.value,
        clock.value + 60,
        package_digest="d" * 64,
    )
    assert approvals.request(asked, expires_at=clock.value + EXPIRES_IN) is True
    assert approvals.get(DELIVERY, "alert") == asked
    stored = dynamodb.get_item(TableName=table, Key=approval_key(DELIVERY, "alert"))["Item"]
    assert stored["proposal_digest"]["S"] == asked.proposal_digest()
    assert stored["proposal_package"]["S"] == "d" * 64


def test_a_decision_writes_exactly_the_attributes_the_workers_role_may_not(
    dynamodb: DynamoDBClient, table: str
) -> None:
    """infra denies the worker's role these names (tests/infra/test_least_privilege.py):
    a decision attribute the list missed would be one the worker could still write."""
    clock = FakeClock()
    approvals = parked(dynamodb, table, clock)
    key = approval_key(DELIVERY, "alert")
    asked = set(dynamodb.get_item(TableName=table, Key=key)["Item"])
    assert asked.isdisjoint(table_layout.APPROVAL_DECISION_ATTRIBUTES)
    assert set(table_layout.APPROVAL_PROPOSAL_ATTRIBUTES) <= asked | {"proposal_package"}
    record = approvals.get(DELIVERY, "alert")
    assert record is not None
    named = dataclasses.replace(
        decision(ApprovalDecision.APPROVED, clock), proposal=record.proposal_digest()
    )
    assert approvals.decide(DELIVERY, "alert", named) is True
    decided = set(dynamodb.get_item(TableName=table, Key=key)["Item"])
    assert decided - asked == {*table_layout.APPROVAL_DECISION_ATTRIBUTES, "note"}
