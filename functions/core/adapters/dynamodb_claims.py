"""The inbox item's processing state in DynamoDB: claims, outcomes and recovery.

Every state change is a row of :mod:`functions.core.adapters.dynamodb_inbox_transitions`;
this module maps the rows' results to the claim port's vocabulary and lists the
open items of the state index for the reconciler.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.core import table_layout
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters import (
    dynamodb_items,
    dynamodb_pass_cursor,
    dynamodb_state_index,
)
from functions.core.adapters.dynamodb_errors import storage_error
from functions.core.adapters.dynamodb_package_record import package_attributes, package_from_item
from functions.core.claim import ITEM_EXPIRED, Claim, ClaimAttempt, ClaimLost, ClaimStatus
from functions.core.models import InboxItem, State
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.recovery import OpenCursor, OpenPage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# last_error of a delivery whose worker died holding it.
_LEASE_EXPIRED: Final = "lease_expired"


class DynamoDbClaims:
    """Claims and outcomes (the :class:`~functions.core.ports.claims.ClaimStore` port) and the
    reconciler's recovery queries, on the stack's table."""

    def __init__(
        self,
        *,
        client: DynamoDBClient,
        table_name: str,
        log_shards: int = table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
    ) -> None:
        """``log_shards``: the received log's deployed shard count; the completed
        listing's keys follow it (``table_layout.listing_keys``)."""
        self._client = client
        self._table = table_name
        self._log_shards = log_shards

    # --- ClaimStore -------------------------------------------------------------

    def claim(self, delivery_id: str, *, owner: str, now: int, lease_seconds: int) -> ClaimAttempt:
        lease_until = now + lease_seconds
        applied = self._apply(
            transitions.CLAIM, delivery_id, now=now, owner=owner, lease=lease_until
        )
        new = applied.item
        if not applied.moved or new is None:  # (a change always returns its new image)
            return _why_not_claimed(applied.item, now=now)
        inbox = dynamodb_items.inbox_from_item(new)
        return ClaimAttempt(
            ClaimStatus.CLAIMED,
            claim=Claim(
                delivery_id,
                owner=owner,
                lease_until=lease_until,
                attempts=inbox.attempts,
                expires_at=inbox.expires_at,
                transient_failures=inbox.transient_failures,
                retry_window_start=inbox.retry_window_start,
                work=inbox.work_item(),
                package=package_from_item(new),
                package_read=True,
            ),
        )

    def complete(
        self,
        claim: Claim,
        *,
        now: int,
        effects_done: frozenset[str] = frozenset(),
        package: PackageRecord | None = None,
    ) -> None:
        # The record rides on the completion's own conditional write (holder, processing):
        # no write unit of its own.
        record = None if package is None else package_attributes(package)
        if effects_done:  # (DynamoDB stores no empty set)
            self._finish(
                transitions.COMPLETE_WITH_EFFECTS,
                claim,
                now=now,
                also_set=record,
                effects=effects_done,
            )
        else:
            self._finish(transitions.COMPLETE, claim, now=now, also_set=record)

    def release(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(transitions.RELEASE, claim, now=now, error=error_code)

    def release_transient(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(transitions.RELEASE_TRANSIENT, claim, now=now, error=error_code)

    def give_back(self, claim: Claim, *, now: int) -> None:
        self._finish(transitions.GIVE_BACK, claim, now=now)

    def fail(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(transitions.FAIL, claim, now=now, error=error_code)

    def defer(self, claim: Claim, *, now: int, error_code: str) -> None:
        self._finish(transitions.DEFER, claim, now=now, error=error_code)

    def park(self, claim: Claim, *, now: int, approval: str, deadline: int) -> None:
        self._finish(transitions.PARK, claim, now=now, approval=approval, deadline=deadline)

    def close_expired(self, delivery_id: str, *, now: int, lease_seconds: int) -> bool:
        return self._apply(
            transitions.EXPIRE, delivery_id, now=now, lease=now + lease_seconds, error=ITEM_EXPIRED
        ).moved

    def reopen(self, delivery_id: str, *, now: int, failure: str | None = None) -> bool:
        if failure is None:
            return self._apply(transitions.RESET_FAILED, delivery_id, now=now).moved
        return self._apply(
            transitions.RESET_DEAD_LETTER, delivery_id, now=now, failure=failure
        ).moved

    def _finish(
        self,
        transition: transitions.Transition,
        claim: Claim,
        *,
        now: int,
        also_set: dynamodb_items.Item | None = None,
        **values: transitions.Value,
    ) -> None:
        applied = self._apply(
            transition, claim.delivery_id, now=now, owner=claim.owner, also_set=also_set, **values
        )
        if not applied.moved:
            raise ClaimLost()

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

    def stale_pending(self, *, changed_before: int, page_size: int) -> Iterator[InboxItem]:
        """Pending items whose state has not changed since before ``changed_before``.

        Listed among the open items by ``listed_at``, which is never later than the
        state change (an item enters the open label when it becomes pending).
        """
        for item in self._open(changed_before=changed_before, page_size=page_size):
            if item.state is State.PENDING and item.state_changed_at < changed_before:
                yield item

    def expired_leases(self, *, now: int, page_size: int) -> Iterator[InboxItem]:
        """Processing items whose lease ran out (their worker died or gave up)."""
        for item in self._open(changed_before=now + 1, page_size=page_size, expired_at=now):
            if item.state is State.PROCESSING:
                yield item

    def open_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        """The open items from ``start``, a query page of one index shard at a time, each
        read eventually consistently (the reconciler's every write on them is
        conditional); items no longer listed open are left out."""
        pages = dynamodb_state_index.label_pages(
            self._client,
            self._table,
            label=table_layout.STATE_LABEL_OPEN,
            start=dynamodb_pass_cursor.inbox_position(start),
            changed_before=_END_OF_TIME,
            page_size=page_size,
            consistent=False,
        )
        for items, resume in pages:
            yield OpenPage(
                items=[dynamodb_items.inbox_from_item(item) for item in items],
                resume=dynamodb_pass_cursor.inbox_cursor(resume),
            )

    def open_cursor(self) -> OpenCursor | None:
        """Where the last run left the pass over the open items (a consistent read)."""
        return dynamodb_pass_cursor.inbox_cursor(
            dynamodb_pass_cursor.load(
                self._client, self._table, sort_key=table_layout.OPEN_CURSOR_SORT_KEY
            )
        )

    def save_open_cursor(self, cursor: OpenCursor | None) -> None:
        """Keep where the pass resumes."""
        dynamodb_pass_cursor.save(
            self._client,
            self._table,
            sort_key=table_layout.OPEN_CURSOR_SORT_KEY,
            position=dynamodb_pass_cursor.inbox_position(cursor),
        )

    def touch_pending(self, item: InboxItem, *, now: int) -> bool:
        """Restart the pending item's clock; False if it changed since it was listed."""
        return self._apply(
            transitions.TOUCH_PENDING, item.delivery_id, now=now, seen=item.state_changed_at
        ).moved

    def release_expired(self, item: InboxItem, *, now: int) -> bool:
        """Return an abandoned claim to pending; False if it changed since it was listed."""
        if item.lease_until is None:
            return False
        return self._apply(
            transitions.RELEASE_EXPIRED,
            item.delivery_id,
            now=now,
            seen=item.lease_until,
            error=_LEASE_EXPIRED,
        ).moved

    def _apply(
        self,
        transition: transitions.Transition,
        delivery_id: str,
        *,
        now: int,
        also_set: dynamodb_items.Item | None = None,
        **values: transitions.Value,
    ) -> transitions.Applied:
        return transitions.apply(
            self._client,
            self._table,
            transition,
            delivery_id,
            self._log_shards,
            also_set,
            now=now,
            **values,
        )

    def _open(
        self, *, changed_before: int, page_size: int, expired_at: int | None = None
    ) -> Iterator[InboxItem]:
        """Every open (pending or processing) item, read lazily page by page."""
        for shard in dynamodb_items.all_state_shards(table_layout.STATE_LABEL_OPEN):
            for item in dynamodb_state_index.query_shard(
                self._client,
                self._table,
                shard=shard,
                changed_before=changed_before,
                expired_at=expired_at,
                page_size=page_size,
            ):
                yield dynamodb_items.inbox_from_item(item)


# Later than any listing time: the open pass reads every entry of the label.
_END_OF_TIME: Final = 10**10


def _why_not_claimed(old: dynamodb_items.Item | None, *, now: int) -> ClaimAttempt:

    if old is None:
        return ClaimAttempt(ClaimStatus.MISSING)
    item = dynamodb_items.inbox_from_item(old)
    if item.state is State.COMPLETED:
        return ClaimAttempt(ClaimStatus.COMPLETED)
    if item.state is State.PROCESSING and (item.lease_until or 0) > now:
        return ClaimAttempt(ClaimStatus.LEASED, lease_until=item.lease_until)
    if item.state in (State.PENDING, State.PROCESSING):
        # Free to claim: only its TTL refused it.
        return ClaimAttempt(ClaimStatus.EXPIRED)
    # failed, ignored: processing is over.
    return ClaimAttempt(ClaimStatus.CLOSED)
