"""The whole receiver: one stack composing one construct per capability."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack, Tags
from constructs import Construct

from functions.core import metric_names, setting_defaults
from functions.worker.settings import message_seconds
from infra.alerts import Alerts
from infra.archive import Archive
from infra.config import StackConfig
from infra.monitoring import Monitored, Monitoring
from infra.queues import WorkQueues
from infra.receiver import Receiver
from infra.reconciler import Reconciler
from infra.relay import Relay
from infra.schema import max_receive_count_for
from infra.secrets import Secrets
from infra.table import InboxTable
from infra.worker import Worker, WorkerTiming


class ReceiverStack(Stack):
    """API, receiver, table, relay, queues, worker, reconciler, secrets, archive, alarms,
    alerts.

    Attributes:
        config: The settings it was built from.
        timing: The worker's timeout and what follows from it.
        table, queues, secrets, archive, alerts, receiver, relay, worker, reconciler,
            monitoring: The capability constructs.
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
        self.config = config
        Tags.of(self).add("service", metric_names.SERVICE)
        Tags.of(self).add("stage", config.stage)

        self.timing = WorkerTiming.for_timeout(
            config.worker_timeout_seconds,
            message_seconds=message_seconds(
                mcp_timeout_seconds=setting_defaults.DEFAULT_MCP_TIMEOUT_SECONDS,
                workflow_seconds=config.worker_workflow_seconds,
            ),
        )
        self.table = InboxTable(self, "Inbox")
        self.queues = WorkQueues(
            self,
            "Work",
            visibility_timeout=self.timing.visibility_timeout,
            max_receive_count=max_receive_count_for(
                config.worker_max_attempts,
                retry_horizon_seconds=config.worker_retry_horizon_seconds,
            ),
        )
        self.secrets = Secrets(self, "Secrets", config=config)
        self.archive = Archive(self, "Archive", retention_days=config.inbox_retention_days)
        self.alerts = Alerts(self, "Alerts", email=config.alert_email)
        table = self.table.table
        self.receiver = Receiver(
            self,
            "Receiver",
            config=config,
            table=table,
            signing_secrets=self.secrets.signing_secrets,
        )
        self.relay = Relay(self, "Relay", config=config, table=table, work_queue=self.queues.queue)
        self.worker = Worker(
            self,
            "Worker",
            config=config,
            timing=self.timing,
            table=table,
            work_queue=self.queues.queue,
            dead_letter_queue=self.queues.dead_letter_queue,
            mcp_token=self.secrets.mcp_token,
            archive=self.archive.bucket,
            alerts=self.alerts,
        )
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            config=config,
            table=table,
            work_queue=self.queues.queue,
            lease_seconds=self.timing.lease_seconds,
            effect_age_seconds=self.timing.effect_age_seconds,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            watched=Monitored(
                receiver=self.receiver.function,
                api=self.receiver.api,
                relay=self.relay.function,
                worker=self.worker.function,
                reconciler=self.reconciler.function,
                work_queue=self.queues.queue,
                work_dead_letter_queue=self.queues.dead_letter_queue,
                relay_failure_queue=self.relay.failure_queue,
            ),
            alarm_email=config.alarm_email,
            stage=config.stage,
            work_queue_max_age=Duration.minutes(config.work_queue_age_alarm_minutes),
        )

        CfnOutput(
            self, "ReceiverUrl", value=self.receiver.url, description="Register with RelayLink"
        )
        CfnOutput(self, "SigningSecretsArn", value=self.secrets.signing_secrets.secret_arn)
        CfnOutput(self, "McpTokenSecretArn", value=self.secrets.mcp_token.secret_arn)
        CfnOutput(self, "TableName", value=table.table_name)
        CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn)
        CfnOutput(
            self,
            "AlertTopicArn",
            value=self.alerts.topic.topic_arn,
            description="Where the workflow's alerts go (ALERT_TOPIC_ARN)",
        )
        CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        CfnOutput(self, "WorkQueueUrl", value=self.queues.queue.queue_url)
        CfnOutput(self, "WorkDeadLetterQueueUrl", value=self.queues.dead_letter_queue.queue_url)
        CfnOutput(self, "RelayFailureQueueUrl", value=self.relay.failure_queue.queue_url)
