"""The agent's alert published to an SNS topic (an ``AlertChannel``).

A standard topic has no idempotency key, so a publish must never be sent twice by
accident. The client must therefore make one HTTP attempt per call (botocore's
retries off, see :mod:`functions.workflows.wiring`): a resend after a 5xx or a
timeout could deliver the alert twice. What a publish can end in:

* an error response below 500 (throttled, access denied, no such topic): SNS refused
  the request, nothing was published -> :class:`~functions.core.errors.NotApplied`
  (``alert_rejected``); the worker retries with back-off;
* the endpoint was never reached -> ``NotApplied`` (``alert_unavailable``);
* a 5xx, a timeout after sending, a connection lost mid-request: the alert may or may
  not be out -> :class:`~functions.core.errors.TransientError` (``alert_unconfirmed``);
  the ledger keeps the intent, and the next attempt reports the effect in doubt
  instead of publishing again.

The idempotency key and the delivery id go with the message as attributes, so a
subscriber can tell one alert from another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from functions.core.errors import NotApplied, TransientError

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

    from functions.workflows.agent import Alert


class SnsAlerts:
    """Publishes alerts to one topic with a client that makes one attempt per call."""

    def __init__(self, *, client: SNSClient, topic_arn: str) -> None:
        self._client = client
        self._topic_arn = topic_arn

    def send(self, alert: Alert, *, idempotency_key: str) -> None:
        try:
            self._client.publish(
                TopicArn=self._topic_arn,
                Subject=alert.subject(),
                Message=alert.text(),
                MessageAttributes={
                    "idempotency_key": {"DataType": "String", "StringValue": idempotency_key},
                    "delivery_id": {"DataType": "String", "StringValue": alert.delivery_id},
                },
            )
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if 400 <= status < 500:
                raise NotApplied("alert_rejected") from exc
            raise TransientError("alert_unconfirmed") from exc
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            raise NotApplied("alert_unavailable") from exc  # never connected
        except BotoCoreError as exc:
            raise TransientError("alert_unconfirmed") from exc
