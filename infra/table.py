"""The single table: inbox, outbox, quarantine and effect records (docs/architecture.md).

The key schema, index and stream view come from ``local.aws_resources.table_definition``,
the very definition the emulator and the tests create, so the two cannot drift.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from functions.core import table_layout
from local.aws_resources import table_definition

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


class InboxTable(Construct):
    """On-demand, encrypted, point-in-time-recoverable, retained table with a NEW_IMAGE stream.

    Attributes:
        table: The table; the stack grants on it.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        definition = table_definition("unused")
        types = {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]}
        partition, sort = _keys(definition["KeySchema"], types)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=partition,
            sort_key=sort,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # Accepted deliveries are the one thing we must never lose: a stack teardown
            # (or replacement) leaves the table, and deleting it takes a deliberate step.
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
            time_to_live_attribute=table_layout.TTL_ATTRIBUTE,
            stream=dynamodb.StreamViewType[definition["StreamSpecification"]["StreamViewType"]],
        )
        for index in definition["GlobalSecondaryIndexes"]:
            index_partition, index_sort = _keys(index["KeySchema"], types)
            self.table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=index_partition,
                sort_key=index_sort,
                projection_type=dynamodb.ProjectionType[index["Projection"]["ProjectionType"]],
            )


def _keys(
    schema: list[dict[str, Any]], types: dict[str, str]
) -> tuple[dynamodb.Attribute, dynamodb.Attribute]:
    by_role = {entry["KeyType"]: entry["AttributeName"] for entry in schema}
    return (
        dynamodb.Attribute(name=by_role["HASH"], type=_TYPES[types[by_role["HASH"]]]),
        dynamodb.Attribute(name=by_role["RANGE"], type=_TYPES[types[by_role["RANGE"]]]),
    )
