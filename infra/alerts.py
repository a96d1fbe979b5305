"""The topic a workflow alerts on (``ALERT_TOPIC_ARN``), apart from the alarm topic.

Created for every workflow, not only ``agent``: a deployer's own workflow can alert
without a change to the stack, the worker's environment has the same keys whatever
the workflow, and a topic nobody publishes to costs nothing. Alerts are the
workflow's findings for people; alarms (:mod:`infra.monitoring`) are the stack's own
health for its operators, so the two have separate subscribers.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from functions.core import metric_names

# The AWS managed key for SNS: its key policy lets the account's principals that may
# publish use it through SNS, so publishing needs no KMS grant (CloudWatch alarms
# cannot use it, which is why the alarm topic has a key of its own).
_SNS_MANAGED_KEY = "alias/aws/sns"


class Alerts(Construct):
    """SNS topic for workflow alerts: KMS-encrypted, TLS-only; optionally e-mailed.

    Attributes:
        topic: The worker may publish to it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, email: str | None) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{metric_names.SERVICE} workflow alerts",
            master_key=kms.Alias.from_alias_name(self, "Key", _SNS_MANAGED_KEY),
            enforce_ssl=True,
        )
        if email is not None:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Allow ``sns:Publish`` on the topic, and nothing else.

        ``Topic.grant_publish`` would add KMS use on every key of the account whose
        alias is ``alias/aws/sns``; the managed key's own policy already allows it
        through SNS, so that wildcard would grant nothing needed.
        """
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["sns:Publish"], resource_arns=[self.topic.topic_arn]
        )
