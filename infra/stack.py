"""This project's own stack: one :class:`RelayLinkReceiver`, and the outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from functions.core import metric_names
from infra.config import StackConfig
from infra.relaylink_receiver import TRANSPARENT_ID, RelayLinkReceiver


class ReceiverStack(Stack):
    """The receiver construct and the outputs the operator tools read (ops/target.py).

    Attributes:
        config: The settings it was built from.
        receiver_construct: Everything the stack deploys.
        timing, table, queues, secrets, archive, alerts, receiver, relay, worker,
            reconciler, monitoring: The construct's parts, by the names tests and
            tools use.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StackConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"{metric_names.SERVICE} ({config.stage}): exactly-once RelayLink receiver",
            **kwargs,
        )
        Tags.of(self).add("service", metric_names.SERVICE)
        Tags.of(self).add("stage", config.stage)
        built = RelayLinkReceiver(self, TRANSPARENT_ID, config=config)
        self.receiver_construct = built
        self.config = built.config
        self.timing = built.timing
        self.table = built.table
        self.queues = built.queues
        self.secrets = built.secrets
        self.archive = built.archive
        self.alerts = built.alerts
        self.receiver = built.receiver
        self.relay = built.relay
        self.worker = built.worker
        self.reconciler = built.reconciler
        self.monitoring = built.monitoring

        CfnOutput(self, "ReceiverUrl", value=built.url, description="Register with RelayLink")
        CfnOutput(self, "SigningSecretsArn", value=built.secrets.signing_secrets.secret_arn)
        CfnOutput(self, "McpTokenSecretArn", value=built.secrets.mcp_token.secret_arn)
        CfnOutput(self, "TableName", value=built.table.table.table_name)
        # Tells the operator commands which workflow runs (``budget show``).
        CfnOutput(
            self, "Workflow", value=built.config.workflow, description="The worker's workflow"
        )
        CfnOutput(self, "AlarmTopicArn", value=built.monitoring.topic.topic_arn)
        CfnOutput(
            self,
            "AlertTopicArn",
            value=built.alerts.topic.topic_arn,
            description="Where the workflow's alerts go (ALERT_TOPIC_ARN)",
        )
        if built.monitoring.dashboard is not None:
            CfnOutput(self, "DashboardName", value=built.monitoring.dashboard.dashboard_name)
        CfnOutput(self, "WorkQueueUrl", value=built.queues.queue.queue_url)
        CfnOutput(self, "WorkDeadLetterQueueUrl", value=built.queues.dead_letter_queue.queue_url)
        CfnOutput(self, "RelayFailureQueueUrl", value=built.relay.failure_queue.queue_url)
