"""Where the operator commands act: a deployed stack's or a local stack's resources.

A :class:`Target` holds boto3 clients and the stack's resource names; the operations
(:mod:`ops.inbox`, :mod:`ops.quarantine`, :mod:`ops.requeue`, :mod:`ops.effects`,
:mod:`ops.budget`) take one.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from functions.core import table_layout, tracing
from functions.core.adapters import (
    dynamodb_items,
    dynamodb_log_state,
    dynamodb_received_log,
    dynamodb_state_index,
    span_export,
)
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryOutputTypeDef, ScanOutputTypeDef
    from mypy_boto3_sqs.client import SQSClient

    from cli.state import LocalState

# Stack outputs the operator needs (infra/stack.py).
OUTPUT_TABLE: Final = "TableName"
OUTPUT_WORK_QUEUE: Final = "WorkQueueUrl"
OUTPUT_DEAD_LETTER_QUEUE: Final = "WorkDeadLetterQueueUrl"
OUTPUT_WORKFLOW: Final = "Workflow"  # absent from a stack deployed before it existed
# Later than any state change: the index query's "changed before" bound for "all".
_END_OF_TIME: Final = 2**53


class OperatorError(Exception):
    """The target cannot be reached or is not a receiver stack (a one-line message)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where the operator commands act: clients and the stack's resource names."""

    dynamodb: DynamoDBClient
    sqs: SQSClient
    table_name: str
    work_queue_url: str
    dead_letter_queue_url: str
    # SQS long-poll wait of redrive's receives: short polls may miss messages on SQS,
    # while the local emulator serves one request at a time and must not be held.
    receive_wait_seconds: int = 1
    # The worker's workflow (its ``workflow`` setting), or None when the target does not
    # say (a stack or a state file from before it was recorded).
    workflow: str | None = None
    # The local stack's span file (``inbox show --trace``); None: a deployed stack,
    # whose traces are in X-Ray.
    spans_file: str | None = None
    # Fresh receipts already read listed or ended: a console refreshing every few
    # seconds then reads only the new and the still open ones (fresh_open).
    settled: dynamodb_received_log.SettledReceipts = field(
        default_factory=dynamodb_received_log.SettledReceipts, compare=False, repr=False
    )

    @classmethod
    def from_stack(cls, stack_name: str, *, region: str | None = None) -> Target:
        """Names from a deployed stack's CloudFormation outputs; default credential chain."""
        import boto3  # noqa: PLC0415 (keeps the CLI's --help quick)

        session = boto3.session.Session(region_name=region)
        try:
            stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)
        except ClientError as exc:
            message = exc.response.get("Error", {}).get("Message", "unknown error")
            raise OperatorError(f"cannot describe stack {stack_name}: {message}") from None
        except (NoRegionError, NoCredentialsError, PartialCredentialsError):
            raise  # the caller's set-up: the CLI's entry point names what to set
        except BotoCoreError as exc:
            raise OperatorError(f"cannot describe stack {stack_name}: {exc}") from None
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks["Stacks"][0].get("Outputs", [])}
        missing = [
            k
            for k in (OUTPUT_TABLE, OUTPUT_WORK_QUEUE, OUTPUT_DEAD_LETTER_QUEUE)
            if k not in outputs
        ]
        if missing:
            raise OperatorError(
                f"stack {stack_name} lacks the outputs {', '.join(missing)}"
                " (not a relaylink-receiver stack, or deployed before they existed)"
            )
        return cls(
            dynamodb=session.client("dynamodb"),
            sqs=session.client("sqs"),
            table_name=outputs[OUTPUT_TABLE],
            work_queue_url=outputs[OUTPUT_WORK_QUEUE],
            dead_letter_queue_url=outputs[OUTPUT_DEAD_LETTER_QUEUE],
            workflow=outputs.get(OUTPUT_WORKFLOW),
        )

    @classmethod
    def from_local(cls, state: LocalState) -> Target:
        """The local stack's emulator, from its state file. An operator's actions on
        it are spans of the deliveries' traces, in the stack's span file."""
        if state.spans_file:
            # This stack's file, whatever was installed before (one process may act on
            # several stacks in turn: a test session).
            tracing.install(span_export.SpanFile(state.spans_file))
        return cls(
            dynamodb=state.aws_client("dynamodb"),
            sqs=state.aws_client("sqs"),
            table_name=state.resources.table_name,
            work_queue_url=state.resources.work_queue_url,
            dead_letter_queue_url=state.resources.dead_letter_queue_url,
            receive_wait_seconds=0,
            workflow=state.workflow or None,
            spans_file=state.spans_file or None,
        )

    def claims(self) -> DynamoDbClaims:
        return DynamoDbClaims(client=self.dynamodb, table_name=self.table_name)

    def effects(self) -> DynamoDbEffects:
        return DynamoDbEffects(client=self.dynamodb, table_name=self.table_name)

    def delivery_records(self, delivery_id: str, prefix: str) -> Iterator[dynamodb_items.Item]:
        """The delivery's records whose sort key starts with ``prefix`` (consistent reads)."""
        arguments: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :id AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {
                "#pk": table_layout.TABLE_PARTITION_KEY,
                "#sk": table_layout.TABLE_SORT_KEY,
            },
            "ExpressionAttributeValues": {":id": {"S": delivery_id}, ":prefix": {"S": prefix}},
            "ConsistentRead": True,
        }
        return paginate(self.dynamodb.query, arguments)

    def state_index(
        self,
        label: str,
        *,
        changed_since: int | None = None,
        changed_before: int | None = None,
        page_size: int | None = None,
    ) -> Iterator[dynamodb_items.Item]:
        """The records the state index lists under ``label`` (by default every one,
        however recent), read a page at a time, each consistently by its key (the
        index holds keys only). ``open`` also holds the fresh open items the index does
        not list yet (:meth:`fresh_open`), by when they were received."""
        listed = dynamodb_state_index.query_index(
            self.dynamodb,
            self.table_name,
            label=label,
            changed_since=changed_since,
            changed_before=_END_OF_TIME if changed_before is None else changed_before,
            page_size=page_size,
        )
        if label != table_layout.STATE_LABEL_OPEN:
            return listed
        return itertools.chain(listed, self.fresh_open(changed_since, changed_before))

    def fresh_open(
        self, changed_since: int | None = None, changed_before: int | None = None
    ) -> Iterator[dynamodb_items.Item]:
        """Open inbox items the state index does not list yet: the receiver lists no
        new item, the reconciler lists those still open past their age. They are in the
        received log after the reconciler's watermark (looked at a little before it, as
        the reconciler does), each read consistently."""
        since, shards = self._fresh_window(changed_since)
        return dynamodb_received_log.unlisted_open(
            self.dynamodb,
            self.table_name,
            since=since,
            before=changed_before,
            shards=shards,
            settled=self.settled,
        )

    def _fresh_window(self, changed_since: int | None) -> tuple[int | None, int]:
        """Where the fresh part of the log starts, and how many shards it spans (as many
        as the reconciler reads: every deploy's receivers wrote at most that many)."""
        state = dynamodb_log_state.read_state(self.dynamodb, self.table_name)
        mark = state.watermark
        fresh = None if mark is None else mark - table_layout.RECEIVED_LOG_OVERLAP_SECONDS
        if fresh is not None:
            self.settled.forget_before(fresh)
        since = max((t for t in (fresh, changed_since) if t is not None), default=None)
        return since, state.shards_to_read

    def count_listed(
        self, label: str, *, changed_since: int | None = None, changed_before: int | None = None
    ) -> int:
        """How many records the state index lists under ``label`` (no item read); for
        ``open``, with the fresh open items (:meth:`fresh_open`, each read)."""
        listed = dynamodb_state_index.count(
            self.dynamodb,
            self.table_name,
            label=label,
            changed_since=changed_since,
            changed_before=_END_OF_TIME if changed_before is None else changed_before,
        )
        if label != table_layout.STATE_LABEL_OPEN:
            return listed
        return listed + sum(1 for _ in self.fresh_open(changed_since, changed_before))

    def newest_listed(
        self,
        labels: Sequence[str],
        *,
        changed_since: int | None = None,
        changed_before: int | None = None,
        batch: int = 25,
    ) -> Iterator[tuple[int, dynamodb_items.Item]]:
        """``(listed_at, record)`` under any of ``labels``, most recently listed first,
        read lazily ``batch`` records at a time, each consistently by its key. With
        ``open``, the fresh open items (:meth:`fresh_open`) are merged in by when they
        were received."""
        listed = dynamodb_state_index.newest(
            self.dynamodb,
            self.table_name,
            labels=labels,
            changed_since=changed_since,
            changed_before=_END_OF_TIME if changed_before is None else changed_before,
            batch=batch,
        )
        if table_layout.STATE_LABEL_OPEN not in labels:
            return listed
        since, shards = self._fresh_window(changed_since)
        fresh = dynamodb_received_log.newest_unlisted_open(
            self.dynamodb,
            self.table_name,
            since=since,
            before=changed_before,
            shards=shards,
            batch=batch,
            settled=self.settled,
        )
        return heapq.merge(listed, fresh, key=lambda entry: entry[0], reverse=True)


def paginate(
    call: Callable[..., ScanOutputTypeDef | QueryOutputTypeDef], arguments: dict[str, Any]
) -> Iterator[dynamodb_items.Item]:
    """Every item of a DynamoDB scan or query, page after page."""
    while True:
        try:
            response = call(**arguments)
        except (ClientError, BotoCoreError) as exc:
            raise OperatorError(f"DynamoDB: {describe_aws_error(exc)}") from None
        yield from response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        arguments["ExclusiveStartKey"] = last


def describe_aws_error(exc: Exception) -> str:
    """One line for an SDK error: its code and message, no request details."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return str(exc)
