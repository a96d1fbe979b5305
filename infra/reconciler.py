"""The reconciler: a scheduled sweep that re-enqueues lost work and flags doubtful effects."""

from __future__ import annotations

from aws_cdk import Annotations, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.core import settings_table
from infra.capacity import RECONCILER_TIMEOUT_SECONDS
from infra.config import StackConfig
from infra.environments import reconciler_environment
from infra.lambda_function import python_function
from infra.table_access import (
    ItemAction,
    grant_item_actions,
    grant_received_log_query,
    grant_state_index_query,
)

RECONCILER_TIMEOUT = Duration.seconds(RECONCILER_TIMEOUT_SECONDS)


def received_log_note(shards: int) -> str:
    """What the synth says about the received log's shard setting."""
    return (
        f"received_log_shards={shards}: the receiver writes {shards} shards of the received "
        "log. In effect the setting only ever rises: each reconciler run records the "
        "largest count it was deployed with and reads every shard up to the largest count "
        "recorded, so a lower value strands no receipt (it saves nothing either). Lower "
        "it only after one reconciler run of a raised deploy (docs/capacity.md)."
    )


class Reconciler(Construct):
    """Reconciler Lambda invoked by an EventBridge schedule.

    Attributes:
        function: The reconciler Lambda.
        schedule: The EventBridge rule.
        every: The schedule's period.
        received_age: How old a receipt gets before a run looks at it: the shorter of
            the pending age and the lease (the reconciler's own rule). A run that
            finishes leaves the received log this far behind.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        table: dynamodb.ITable,
        work_queue: sqs.IQueue,
        lease_seconds: int,
        effect_age_seconds: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.every = Duration.minutes(config.reconcile_every_minutes)
        pending_age_seconds = settings_table.RECONCILE_PENDING_AGE_SECONDS.default
        self.received_age = Duration.seconds(
            settings_table.received_age_seconds(
                pending_age_seconds=pending_age_seconds, lease=lease_seconds
            )
        )
        self.function: lambda_.Function = python_function(
            self,
            "Function",
            function="reconciler",
            config=config,
            description="Re-enqueues lost work items and flags effects in doubt",
            timeout=RECONCILER_TIMEOUT,
            environment=reconciler_environment(
                table_name=table.table_name,
                work_queue_url=work_queue.queue_url,
                lease_seconds=lease_seconds,
                pending_age_seconds=pending_age_seconds,
                effect_age_seconds=effect_age_seconds,
                received_log_shards=config.received_log_shards,
                inbox_retention_days=config.inbox_retention_days,
                parallelism=config.reconcile_parallelism,
            ),
        )
        # It lists by the state index (keys only: it reads the listed items by key with
        # BatchGetItem), reads an inbox item consistently, and updates the items it
        # re-enqueues or flags; it reads the received log (a Query of the table) and
        # updates its watermark there.
        grant_state_index_query(self.function, table)
        grant_received_log_query(self.function, table)
        grant_item_actions(
            self.function,
            table,
            ItemAction.GET_ITEM,
            ItemAction.UPDATE_ITEM,
            ItemAction.BATCH_GET_ITEM,
        )
        work_queue.grant_send_messages(self.function)
        Annotations.of(self).add_info(received_log_note(config.received_log_shards))
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Runs the reconciler",
            schedule=events.Schedule.rate(self.every),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    # The next run repeats the sweep; a stale invocation only adds load.
                    max_event_age=self.every,
                    retry_attempts=2,
                )
            ],
        )
