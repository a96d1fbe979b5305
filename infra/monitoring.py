"""Alarms on what matters, one SNS topic that pages, and a dashboard.

Every alarm goes to one TLS-only topic (under a KMS key of its own with
``alarm_topic_key``); an optional e-mail address subscribes to it,
and each alarm's description points to its runbook entry in docs/operations.md.
Custom metrics are the ones Powertools Metrics emits: namespace ``METRICS_NAMESPACE``,
dimension ``service = SERVICE``. Missing data means "nothing happened" for every
count alarm, so it never breaches; only the received log's lag, which every reconciler
run reports, reads missing data as behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.core import metric_names
from functions.core.models import Outcome
from infra import nag

FIVE_MINUTES = Duration.minutes(5)
ONE_MINUTE = Duration.minutes(1)
# The relay should keep up within seconds; five minutes behind means it is stuck.
ITERATOR_AGE_THRESHOLD_MS = 5 * 60 * 1000
RUNBOOK = "docs/operations.md"


def runbook(alarm: str) -> str:
    """Where the alarm's runbook entry is (a heading named after the alarm)."""
    return f"Runbook: {RUNBOOK}, section {alarm}."


def custom_metric(
    metric_name: str, *, period: Duration = FIVE_MINUTES, statistic: str = cloudwatch.Stats.SUM
) -> cloudwatch.Metric:
    """A metric emitted by the functions through Powertools Metrics (EMF)."""
    return cloudwatch.Metric(
        namespace=metric_names.METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={"service": metric_names.SERVICE},
        statistic=statistic,
        period=period,
    )


# Runs that leave the received log this many schedule periods further behind than a
# finished run does page; so do runs that stop reporting it.
RECEIVED_LOG_RUNS_BEHIND = 3


@dataclass(frozen=True, slots=True)
class ReceivedLogWatch:
    """How far behind the reconciler's received log may fall before someone is paged.

    Every finished run leaves it ``received_age`` behind; the alarm allows
    :data:`RECEIVED_LOG_RUNS_BEHIND` schedule periods more, taking the largest lag
    reported in a period that long. Missing reports (a reconciler that fails, spends its
    time before it reaches the log, or is no longer invoked) count as behind once
    CloudWatch's evaluation range holds none.
    """

    received_age: Duration
    reconcile_every: Duration

    @property
    def period(self) -> Duration:
        return Duration.minutes(RECEIVED_LOG_RUNS_BEHIND * self.reconcile_every.to_minutes())

    @property
    def max_lag_seconds(self) -> float:
        return self.received_age.to_seconds() + self.period.to_seconds()


@dataclass(frozen=True, slots=True)
class Monitored:
    """What the monitoring construct watches."""

    receiver: lambda_.Function
    api: apigwv2.HttpApi
    relay: lambda_.IFunction
    worker: lambda_.Function
    reconciler: lambda_.IFunction
    work_queue: sqs.IQueue
    work_dead_letter_queue: sqs.IQueue
    relay_failure_queue: sqs.IQueue


class Monitoring(Construct):
    """SNS alarm topic (TLS-only; KMS-encrypted on request), the alarms and the dashboard.

    Attributes:
        topic: Every alarm's action (and OK action): the deployer's own, whose policy
            and key must let CloudWatch publish, or one created here with its own key.
        alarms: By short name.
        dashboard: The operator's overview, or None (``-c dashboard=true`` adds it).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        watched: Monitored,
        alarm_email: str | None,
        stage: str,
        work_queue_max_age: Duration,
        received_log: ReceivedLogWatch,
        approval_max_wait: Duration | None = None,
        model_budget: bool = False,
        topic: sns.ITopic | None = None,
        topic_key: bool = False,
        dashboard: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = topic if topic is not None else self._own_topic(encrypted=topic_key)
        if alarm_email is not None:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._alarm(
            "Quarantined",
            custom_metric(metric_names.METRIC_QUARANTINED, period=ONE_MINUTE),
            "A delivery id arrived again with different bytes: contract violation or a "
            "forgery with a leaked signing secret. Inspect the quarantine records.",
        )
        self._alarm(
            "WorkDeadLetters",
            watched.work_dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
            ),
            "A work item exhausted its attempts and sits in the work dead-letter queue.",
        )
        self._alarm(
            "RelayFailures",
            watched.relay_failure_queue.metric_approximate_number_of_messages_visible(
                period=ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
            ),
            "The relay gave up on stream records; the reconciler re-enqueues their items.",
        )
        self._alarm(
            "ReceiverErrors",
            watched.receiver.metric_errors(period=FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
            "The receiver Lambda failed (crash or timeout); RelayLink will retry.",
        )
        self._alarm(
            "Api5xx",
            watched.api.metric_server_error(period=FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
            "The API answered 5xx (storage unavailable or receiver failure).",
        )
        self._alarm(
            "WorkerErrors",
            watched.worker.metric_errors(period=FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
            "The worker Lambda failed as a whole (crash or timeout), not a single message.",
        )
        self._alarm(
            "WorkerThrottles",
            watched.worker.metric_throttles(period=FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
            "The worker was throttled: account concurrency is exhausted.",
        )
        self._alarm(
            "RelayIteratorAge",
            watched.relay.metric(
                "IteratorAge", period=FIVE_MINUTES, statistic=cloudwatch.Stats.MAXIMUM
            ),
            "The relay is more than five minutes behind the table's stream.",
            threshold=ITERATOR_AGE_THRESHOLD_MS,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._alarm(
            "WorkFailed",
            # The worker emits WorkFailed with the service dimension only (no reason
            # dimension): one metric counts every permanent failure, whatever its code.
            custom_metric(metric_names.METRIC_WORK_FAILED),
            "A work item failed permanently (package_not_found, notify_rejected, "
            "mcp_host_not_allowed, ..., or uncertain_effect) and will not be retried; "
            "its inbox item is failed with last_error.",
        )
        self._alarm(
            "WorkQueueAge",
            watched.work_queue.metric_approximate_age_of_oldest_message(
                period=FIVE_MINUTES, statistic=cloudwatch.Stats.MAXIMUM
            ),
            f"The work queue's oldest message is older than "
            f"{int(work_queue_max_age.to_minutes())} minutes: the worker is not keeping up, "
            "or not consuming at all.",
            threshold=work_queue_max_age.to_seconds(),
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._alarm(
            "McpAuthFailures",
            custom_metric(metric_names.METRIC_MCP_AUTH_FAILURES),
            "The MCP server refused the worker's token: set the MCP token secret.",
        )
        self._alarm(
            "UncertainEffects",
            custom_metric(metric_names.METRIC_UNCERTAIN_EFFECTS),
            "An external effect's outcome is uncertain and awaits reconciliation.",
        )
        self._alarm(
            "PackagesChanged",
            custom_metric(metric_names.METRIC_PACKAGE_CHANGED),
            "A delivery's recorded package content was gone and the MCP server answered"
            " its refetch with another package: failed package_changed, nothing ran on it."
            " inbox show names both digests.",
        )
        if model_budget:
            self._alarm(
                "BudgetExhausted",
                custom_metric(metric_names.METRIC_BUDGET_EXHAUSTED),
                "Model calls wait for the daily token budget (spent, or paused at 0): their "
                "deliveries are deferred until the next UTC day or a higher limit.",
            )
        self._alarm(
            "ReconcilerErrors",
            watched.reconciler.metric_errors(period=FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
            "The reconciler failed: lost work is not being re-enqueued.",
        )
        self._alarm(
            "ReceivedLogLag",
            custom_metric(
                metric_names.METRIC_RECONCILER_RECEIVED_LOG_LAG,
                period=received_log.period,
                statistic=cloudwatch.Stats.MAXIMUM,
            ),
            f"The reconciler's received log is more than "
            f"{int(received_log.max_lag_seconds // 60)} minutes behind, or runs stopped "
            "reporting it: receipts whose relay message was lost are not being found.",
            threshold=received_log.max_lag_seconds,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
        )

        if approval_max_wait is not None:
            self._alarm(
                "ApprovalWait",
                custom_metric(
                    metric_names.METRIC_APPROVAL_OLDEST_WAIT,
                    period=received_log.period,
                    statistic=cloudwatch.Stats.MAXIMUM,
                ),
                f"A delivery has waited more than {int(approval_max_wait.to_minutes())} minutes"
                " for a person's approval: decide it (approvals list) before its timeout"
                " denies it.",
                threshold=approval_max_wait.to_seconds(),
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            )

        # A dashboard is billed $3 a month, most of a small team's bill with the metrics
        # (docs/cost.md): on request (``-c dashboard=true``), its counts from the logs.
        self.dashboard = self._dashboard(watched, stage) if dashboard else None

    def _dashboard(self, watched: Monitored, stage: str) -> cloudwatch.Dashboard:
        """The operator's overview: AWS's own metrics, and the functions' counts summed
        from their log lines by Logs Insights (only alarmed counts are metrics)."""
        dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{metric_names.SERVICE}-{stage}"
        )
        outcomes = ", ".join(
            f"sum({metric_names.receiver_outcome_metric(o)}) as {o.value}" for o in Outcome
        )
        work = ", ".join(
            f"sum({name}) as {name}"
            for name in (
                metric_names.METRIC_WORK_COMPLETED,
                metric_names.METRIC_WORK_ALREADY_DONE,
                metric_names.METRIC_WORK_DEFERRED,
                metric_names.METRIC_WORK_RETRIED,
                metric_names.METRIC_WORK_FAILED,
                metric_names.METRIC_WORK_DEAD_LETTERED,
                metric_names.METRIC_MCP_AUTH_FAILURES,
                metric_names.METRIC_UNCERTAIN_EFFECTS,
            )
        )
        dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Receiver outcomes (from its log lines)",
                log_group_names=[watched.receiver.log_group.log_group_name],
                query_lines=[f"stats {outcomes} by bin(5m)"],
                view=cloudwatch.LogQueryVisualizationType.LINE,
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Receiver latency (ms)",
                left=[
                    watched.receiver.metric_duration(statistic="p50", label="lambda p50"),
                    watched.receiver.metric_duration(statistic="p99", label="lambda p99"),
                    watched.api.metric_latency(statistic="p99", label="api p99"),
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queue age (s) and dead letters",
                left=[
                    watched.work_queue.metric_approximate_age_of_oldest_message(
                        label="work queue oldest"
                    )
                ],
                right=[
                    watched.work_dead_letter_queue.metric_approximate_number_of_messages_visible(
                        label="work DLQ"
                    ),
                    watched.relay_failure_queue.metric_approximate_number_of_messages_visible(
                        label="relay failures"
                    ),
                ],
                width=12,
            ),
            cloudwatch.LogQueryWidget(
                title="Worker outcomes (from its log lines)",
                log_group_names=[watched.worker.log_group.log_group_name],
                query_lines=[f"stats {work} by bin(5m)"],
                view=cloudwatch.LogQueryVisualizationType.LINE,
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(self.alarms.values()), width=24
            )
        )
        return dashboard

    def _own_topic(self, *, encrypted: bool) -> sns.Topic:
        """An SNS topic for the alarms, TLS-only; with ``encrypted``, under a key of its
        own that CloudWatch may use (SNS's AWS managed key refuses CloudWatch)."""
        key: kms.Key | None = None
        if encrypted:
            key = kms.Key(
                self,
                "TopicKey",
                description=f"{metric_names.SERVICE}: encrypts the alarm topic",
                enable_key_rotation=True,
                # Holds no data at rest (SNS messages are transient): safe to schedule
                # deletion.
                removal_policy=RemovalPolicy.DESTROY,
            )
            # CloudWatch publishes alarm notifications to the encrypted topic.
            key.grant(
                iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                "kms:Decrypt",
                "kms:GenerateDataKey*",
            )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"{metric_names.SERVICE} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        if key is None:
            nag.acknowledge(
                topic,
                "AwsSolutions-SNS2",
                "The alarm topic carries alarm state changes (names, thresholds, runbook "
                "links), never delivery data, and SNS keeps a message only while it is "
                "delivered; a key of its own would be the default install's largest fixed "
                "cost ($3 a month once rotated). alarm_topic_key=true adds one.",
            )
        return topic

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float = 1,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            f"{name}Alarm",
            # The notification says where to start: each alarm has its runbook entry.
            alarm_description=f"{description} {runbook(name)}",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            treat_missing_data=missing,
        )
        action = actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms[name] = alarm
