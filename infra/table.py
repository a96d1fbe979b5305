"""The single table: inbox, outbox, quarantine and effect records (docs/architecture.md).

The key schema, index, stream view and TTL attribute come from :data:`infra.schema.TABLE`,
the very definition the emulator and the tests create, so the two cannot drift.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.schema import TABLE, AttributeType, Key

_TYPES = {
    AttributeType.STRING: dynamodb.AttributeType.STRING,
    AttributeType.NUMBER: dynamodb.AttributeType.NUMBER,
}


class InboxTable(Construct):
    """On-demand, encrypted, point-in-time-recoverable, retained table with a NEW_IMAGE stream.

    Attributes:
        table: The table; the stack grants on it.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, warm_write_units: int | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        # Pre-warmed for a launch (docs/capacity.md); billed once, when it rises.
        warm = (
            None
            if warm_write_units is None
            else dynamodb.WarmThroughput(write_units_per_second=warm_write_units)
        )
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_attribute(TABLE.keys.partition),
            sort_key=_attribute(TABLE.keys.sort),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # Accepted deliveries are the one thing we must never lose: a stack teardown
            # (or replacement) leaves the table, and deleting it takes a deliberate step.
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
            time_to_live_attribute=TABLE.ttl_attribute,
            stream=dynamodb.StreamViewType[TABLE.stream_view],
            warm_throughput=warm,
        )
        for index in TABLE.indexes:
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.keys.partition),
                sort_key=_attribute(index.keys.sort),
                projection_type=dynamodb.ProjectionType[index.projection],
            )


def _attribute(key: Key) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type])
