"""The inbox item's processing state in DynamoDB: claims, outcomes and recovery.

Every write is one conditional ``UpdateItem``; each condition is a list of named
parts with the reason it exists. Every state change also moves the item's
``state_shard``/``state_changed_at`` so that the ``by_state`` index lists it
under its new state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_items, dynamodb_state_index
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.claim import Claim, ClaimAttempt, ClaimLost, ClaimStatus
from functions.core.models import InboxItem, State

Condition = tuple[tuple[str, str], ...]

_CLAIMABLE: Condition = (
    ("attribute_exists(pk)", "only a delivery the receiver accepted is processed"),
    (
        "#state = :pending OR (#state = :processing AND lease_until <= :now)",
        "free, or abandoned by a worker whose lease ran out; never two live holders",
    ),
)
_HOLDING: Condition = (
    ("#state = :processing", "a finished or released attempt cannot change state again"),
    ("lease_owner = :owner", "a worker whose lease expired must not overwrite its successor"),
)
_STILL_PENDING: Condition = (
    ("#state = :pending", "a worker claimed it meanwhile: nothing to recover"),
    ("state_changed_at = :seen", "another reconciler run re-enqueued it already"),
)
_STILL_EXPIRED: Condition = (
    ("#state = :processing", "it finished or was released meanwhile"),
    ("lease_until = :seen", "a new claim (a new lease) happened meanwhile"),
    ("lease_until <= :now", "the lease must really have run out"),
)


def _expression(condition: Condition) -> str:
    return " AND ".join(f"({part})" for part, _reason in condition)


def _is_condition_failure(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


class DynamoDbClaims:
    """Claims and outcomes (the :class:`~functions.core.claim.ClaimStore` port) and the
    reconciler's recovery queries, on the stack's table."""

    def __init__(self, *, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    # --- ClaimStore -------------------------------------------------------------

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        lease_until = now + lease_seconds
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=dynamodb_items.inbox_key(delivery_id),
                UpdateExpression=(
                    "SET #state = :processing, lease_until = :lease, lease_owner = :owner,"
                    " attempts = if_not_exists(attempts, :zero) + :one,"
                    " state_shard = :shard, state_changed_at = :now"
                ),
                ConditionExpression=_expression(_CLAIMABLE),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":processing": {"S": State.PROCESSING.value},
                    ":pending": {"S": State.PENDING.value},
                    ":lease": {"N": str(lease_until)},
                    ":owner": {"S": owner},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":shard": {"S": dynamodb_items.state_shard(State.PROCESSING, delivery_id)},
                    ":now": {"N": str(now)},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return _why_not_claimed(exc.response.get("Item"))
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        new = response["Attributes"]
        expires = new.get(table_layout.TTL_ATTRIBUTE)
        return ClaimAttempt(
            ClaimStatus.CLAIMED,
            claim=Claim(
                delivery_id,
                owner=owner,
                lease_until=lease_until,
                attempts=int(new["attempts"]["N"]),
                expires_at=int(expires["N"]) if expires else 0,
            ),
        )

    def complete(self, claim: Claim, *, now: int) -> None:
        self._finish(
            claim,
            now=now,
            state=State.COMPLETED,
            extra_set=", completed_at = :now",
            values={},
        )

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim,
            now=now,
            state=State.PENDING,
            extra_set=", last_error = :error",
            values={":error": {"S": error_code}},
        )

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(
            claim,
            now=now,
            state=State.FAILED,
            extra_set=", last_error = :error",
            values={":error": {"S": error_code}},
        )

    def _finish(
        self,
        claim: Claim,
        *,
        now: int,
        state: State,
        extra_set: str,
        values: dict[str, dynamodb_items.AttributeValue],
    ) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=dynamodb_items.inbox_key(claim.delivery_id),
                UpdateExpression=(
                    "SET #state = :state, state_shard = :shard, state_changed_at = :now"
                    + extra_set
                    + " REMOVE lease_until, lease_owner"
                ),
                ConditionExpression=_expression(_HOLDING),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":state": {"S": state.value},
                    ":processing": {"S": State.PROCESSING.value},
                    ":owner": {"S": claim.owner},
                    ":shard": {"S": dynamodb_items.state_shard(state, claim.delivery_id)},
                    ":now": {"N": str(now)},
                    **values,
                },
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                raise ClaimLost() from exc
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc

    # --- Recovery (the reconciler) ------------------------------------------------

    def get(self, delivery_id: str) -> InboxItem | None:
        """The inbox item, read consistently, or None."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=dynamodb_items.inbox_key(delivery_id),
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise storage_error(exc) from exc
        item = response.get("Item")
        return None if item is None else dynamodb_items.inbox_from_item(item)

    def stale_pending(self, *, changed_before: int, limit: int) -> list[InboxItem]:
        """Pending items whose state has not changed since before ``changed_before``."""
        return list(self._listed(State.PENDING, changed_before=changed_before, limit=limit))

    def expired_leases(self, *, now: int, limit: int) -> list[InboxItem]:
        """Processing items whose lease ran out (their worker died or gave up)."""
        return list(
            self._listed(State.PROCESSING, changed_before=now + 1, limit=limit, expired_at=now)
        )

    def touch_pending(self, item: InboxItem, *, now: int) -> bool:
        """Restart the pending item's clock; False if it changed since it was listed."""
        return self._recover(
            item.delivery_id,
            update="SET state_changed_at = :now",
            condition=_STILL_PENDING,
            values={
                ":pending": {"S": State.PENDING.value},
                ":seen": {"N": str(item.state_changed_at)},
                ":now": {"N": str(now)},
            },
        )

    def release_expired(self, item: InboxItem, *, now: int) -> bool:
        """Return an abandoned claim to pending; False if it changed since it was listed."""
        if item.lease_until is None:
            return False
        return self._recover(
            item.delivery_id,
            update=(
                "SET #state = :pending, state_shard = :shard, state_changed_at = :now,"
                " last_error = :error REMOVE lease_until, lease_owner"
            ),
            condition=_STILL_EXPIRED,
            values={
                ":pending": {"S": State.PENDING.value},
                ":processing": {"S": State.PROCESSING.value},
                ":shard": {"S": dynamodb_items.state_shard(State.PENDING, item.delivery_id)},
                ":seen": {"N": str(item.lease_until)},
                ":now": {"N": str(now)},
                ":error": {"S": "lease_expired"},
            },
        )

    def _recover(
        self,
        delivery_id: str,
        *,
        update: str,
        condition: Condition,
        values: dict[str, dynamodb_items.AttributeValue],
    ) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=dynamodb_items.inbox_key(delivery_id),
                UpdateExpression=update,
                ConditionExpression=_expression(condition),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise storage_error(exc) from exc
        except BotoCoreError as exc:
            raise storage_error(exc) from exc
        return True

    def _listed(
        self, state: State, *, changed_before: int, limit: int, expired_at: int | None = None
    ) -> Iterator[InboxItem]:
        found = 0
        for shard in dynamodb_items.all_state_shards(state.value):
            for item in dynamodb_state_index.query_shard(
                self._client,
                self._table,
                shard=shard,
                changed_before=changed_before,
                expired_at=expired_at,
            ):
                yield dynamodb_items.inbox_from_item(item)
                found += 1
                if found >= limit:
                    return


def _why_not_claimed(old: dynamodb_items.Item | None) -> ClaimAttempt:
    if old is None:
        return ClaimAttempt(ClaimStatus.MISSING)
    state = State(old["state"]["S"])
    if state is State.COMPLETED:
        return ClaimAttempt(ClaimStatus.COMPLETED)
    if state is State.PROCESSING:
        lease = old.get("lease_until")
        return ClaimAttempt(ClaimStatus.LEASED, lease_until=int(lease["N"]) if lease else None)
    # failed, ignored: processing is over. (pending cannot fail the condition.)
    return ClaimAttempt(ClaimStatus.CLOSED)
