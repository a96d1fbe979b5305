"""The whole receiver as one construct, for this project's stack or a team's own app.

``RelayLinkReceiver(stack, "Webhooks", config=StackConfig(...))`` adds the API, the
functions, the table, the queues, the secrets, the archive, the alerts, the alarms
and the dashboard to any stack, with every cdk-nag acknowledgement recorded next to
the resource it concerns. The stack outputs stay the stack's business.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration, Tags
from aws_cdk import aws_sns as sns
from constructs import Construct

from functions.core import metric_names, settings_table
from functions.worker.settings import message_seconds
from infra.alerts import Alerts
from infra.archive import Archive
from infra.config import StackConfig
from infra.monitoring import Monitored, Monitoring, ReceivedLogWatch
from infra.queues import WorkQueues
from infra.receiver import Receiver
from infra.reconciler import Reconciler
from infra.relay import Relay
from infra.schema import max_receive_count_for
from infra.secrets import Secrets
from infra.table import InboxTable
from infra.worker import Worker, WorkerTiming

# The shipped workflows that call no model: no token budget, so no budget alarm.
WORKFLOWS_WITHOUT_A_MODEL: Final = frozenset({"archive", "notify"})
APPROVAL_SETTING: Final = "approval"  # the workflow setting naming what waits for a person

# A construct with this id adds nothing to its children's logical ids: the project's
# own stack uses it, so its resources keep the logical ids they had before the
# construct existed (a deploy replaces no table, queue or secret).
TRANSPARENT_ID = "Default"


class RelayLinkReceiver(Construct):
    """API, receiver, table, relay, queues, worker, reconciler, secrets, archive,
    alerts, alarms and dashboard.

    Attributes:
        config: The settings it was built from, checked and normalised.
        timing: The worker's timeout and what follows from it.
        table, queues, secrets, archive, alerts, receiver, relay, worker, reconciler,
            monitoring: The capability constructs.
        url: Where RelayLink posts (register it there).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        """Args:
            scope: Any construct inside a stack.
            construct_id: Its id.
            config: The receiver's settings, each with the bounds and the message its
                CDK context key has (docs/deploy.md lists them).
            alarm_topic: Your own topic for the alarms, or None to create one.

        Raises:
            ConfigError: a setting is malformed or out of range (named by its key).
            WorkflowCodeError: the workflow's code cannot be shipped as configured.
        """
        super().__init__(scope, construct_id)
        config = config.checked()
        self.config = config
        Tags.of(self).add("service", metric_names.SERVICE)
        Tags.of(self).add("stage", config.stage)

        self.timing = WorkerTiming.for_timeout(
            config.worker_timeout_seconds,
            message_seconds=message_seconds(
                mcp_timeout_seconds=settings_table.MCP_TIMEOUT_SECONDS.default,
                workflow_seconds=config.worker_workflow_seconds,
            ),
            batching_window_seconds=config.worker_batching_window_seconds,
        )
        self.table = InboxTable(self, "Inbox", warm_write_units=config.table_warm_write_units)
        self.queues = WorkQueues(
            self,
            "Work",
            visibility_timeout=self.timing.visibility_timeout,
            max_receive_count=max_receive_count_for(
                config.worker_max_attempts,
                retry_horizon_seconds=config.worker_retry_horizon_seconds,
            ),
            dead_letter_retention=Duration.seconds(config.dead_letter_retention_seconds),
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
            # Alarms only where their metric can be published (and billed): the budget
            # with a workflow that calls a model, the wait with an approval gate (or a
            # screening guardrail: a blocked briefing waits for a person too; or tools:
            # an acting one waits by default).
            approval_max_wait=(
                Duration.minutes(config.approval_wait_alarm_minutes)
                if config.workflow_settings.get(APPROVAL_SETTING)
                or config.screens_briefings
                or config.offers_agent_tools
                else None
            ),
            model_budget=config.workflow not in WORKFLOWS_WITHOUT_A_MODEL,
            received_log=ReceivedLogWatch(
                received_age=self.reconciler.received_age, reconcile_every=self.reconciler.every
            ),
            topic=alarm_topic,
            topic_key=config.alarm_topic_key,
            dashboard=config.dashboard,
        )

    @property
    def url(self) -> str:
        return self.receiver.url
