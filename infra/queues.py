"""The work queue between relay and worker, and its dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    retention_period: Duration,
    visibility_timeout: Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
) -> sqs.Queue:
    """A queue with server-side encryption and a policy that refuses non-TLS requests."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention_period,
        visibility_timeout=visibility_timeout,
        dead_letter_queue=dead_letter_queue,
    )


class WorkQueues(Construct):
    """Work queue with a redrive to its DLQ after ``max_receive_count`` receives.

    Attributes:
        queue: Where the relay sends work items and the worker consumes them.
        dead_letter_queue: Where a work item lands after its last attempt. SQS's own
            redrive (the console's "Start DLQ redrive") may move it back: the worker
            marks its dead letters and re-opens the delivery when one returns.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout: Duration,
        max_receive_count: int,
        dead_letter_retention: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = secure_queue(
            self,
            "DeadLetterQueue",
            # Far longer than the work queue keeps messages, so an operator has days to
            # look, yet no dead letter outlives its inbox item
            # (infra.schema.dead_letter_retention_seconds): a redrive finds the item.
            retention_period=dead_letter_retention,
        )
        self.queue = secure_queue(
            self,
            "Queue",
            visibility_timeout=visibility_timeout,
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=max_receive_count
            ),
        )
