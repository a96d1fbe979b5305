"""Table permissions as narrow as the code: named item actions, Query on one index.

``Table.grant_*_data`` covers ``<table>/index/*`` too, and actions no function calls
(DeleteItem, BatchWriteItem, Scan, DescribeTable). A deleted inbox item is a lost
receipt: it would let a later retry of the same delivery be accepted and run again.
So each role gets only the item actions its code calls, on the table itself, and
Query only on the index it reads. The state index holds keys only, so a role that lists
it reads the items by key with BatchGetItem (a read). There is no member for delete,
batch write, scan or PartiQL actions: no function needs one.
"""

from __future__ import annotations

from enum import StrEnum

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam

from functions.core import table_layout


class ItemAction(StrEnum):
    """The item-level actions the functions call. A transaction needs the action of
    each of its items (a ``Put`` item is authorised as PutItem)."""

    GET_ITEM = "dynamodb:GetItem"
    PUT_ITEM = "dynamodb:PutItem"
    UPDATE_ITEM = "dynamodb:UpdateItem"
    BATCH_GET_ITEM = "dynamodb:BatchGetItem"  # the items a keys-only index listing names
    # A transaction's check of an item it does not write: a read, it changes nothing (no
    # function checks one now; the package is recorded on the claimed item itself).
    CONDITION_CHECK_ITEM = "dynamodb:ConditionCheckItem"


def grant_item_actions(
    grantee: iam.IGrantable, table: dynamodb.ITable, *actions: ItemAction
) -> iam.Grant:
    """Allow ``actions`` on the table's items; no index, no other action."""
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=[action.value for action in actions],
        resource_arns=[table.table_arn],
    )


def grant_received_log_query(grantee: iam.IGrantable, table: dynamodb.ITable) -> iam.Grant:
    """Allow Query on the table itself: the received log is read by its keys (the
    outbox records' partitions), no index."""
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=["dynamodb:Query"], resource_arns=[table.table_arn]
    )


def grant_state_index_query(grantee: iam.IGrantable, table: dynamodb.ITable) -> iam.Grant:
    """Allow Query on the state index alone (a Query by index is authorised on its ARN)."""
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["dynamodb:Query"],
        resource_arns=[f"{table.table_arn}/index/{table_layout.STATE_INDEX}"],
    )


def deny_approval_decisions(grantee: iam.IGrantable, table: dynamodb.ITable) -> None:
    """Deny writing what makes an approval's decision, and rewriting what it is about.

    The worker runs a model and tools on third-party content: whatever runs in it must
    not approve its own parked call. IAM's fine-grained access control names the
    top-level attributes a request writes (``dynamodb:Attributes``): a put or update
    that writes any decision attribute is denied, and so is an update of a proposal
    (the worker puts a record once and never updates it). A Deny wins over every
    Allow, the deployer's managed policies included.
    """
    for actions, attributes in (
        (
            [ItemAction.PUT_ITEM.value, ItemAction.UPDATE_ITEM.value],
            table_layout.APPROVAL_DECISION_ATTRIBUTES,
        ),
        ([ItemAction.UPDATE_ITEM.value], table_layout.APPROVAL_PROPOSAL_ATTRIBUTES),
    ):
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=actions,
                resources=[table.table_arn],
                conditions={"ForAnyValue:StringEquals": {"dynamodb:Attributes": list(attributes)}},
            )
        )
