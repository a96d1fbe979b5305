"""The agent's alert published to an SNS topic (an ``AlertChannel``).

A standard topic has no idempotency key, so a publish must never be sent twice by
accident. The client must therefore make one HTTP attempt per call (botocore's
retries off, see :mod:`functions.workflows.wiring`): a resend after a 5xx or a
timeout could deliver the alert twice. Its effect's mode is therefore ``operator``:
an unknown outcome is left in doubt for a person. What a publish can end in (an AWS
error below 500 is a "Sender" fault: the request was not processed):

* published: sent;
* throttled (``Throttling``, ``KMSThrottling``, HTTP 429...) or credentials that
  expired in flight: not published, try later ->
  :class:`~functions.core.errors.NotApplied` (``alert_throttled``), retried with back-off;
* any other error below 500 (``AuthorizationError``, ``NotFound``, ``InvalidParameter``,
  ``KMSDisabled``...): refused for good -> :class:`~functions.core.errors.Rejected`
  (``alert_rejected``): the delivery fails now, nothing in doubt; once the topic or its
  grant is fixed, an operator's requeue publishes it;
* the endpoint was never reached -> ``NotApplied`` (``alert_unavailable``);
* a 5xx, a timeout after sending, a connection lost mid-request: the alert may or may
  not be out -> :class:`~functions.core.errors.TransientError` (``alert_unconfirmed``);
  the ledger keeps the intent, and the next attempt reports the effect in doubt
  instead of publishing again.

The idempotency key and the delivery id go with the message as attributes, so a
subscriber can tell one alert from another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from functions.core.effects import EffectMode
from functions.core.errors import NotApplied, Rejected, TransientError

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

    from functions.workflows.agent import Alert


# Error codes of a request SNS did not process and would take later.
_TRY_LATER: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "KMSThrottling",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)


class SnsAlerts:
    """Publishes alerts to one topic with a client that makes one attempt per call."""

    # A standard topic cannot drop a repeated key: an unknown outcome needs a person.
    mode: Final = EffectMode.OPERATOR

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
            code = exc.response.get("Error", {}).get("Code", "")
            if status == 429 or (400 <= status < 500 and code in _TRY_LATER):
                raise NotApplied("alert_throttled") from exc
            if 400 <= status < 500:
                raise Rejected("alert_rejected") from exc
            raise TransientError("alert_unconfirmed") from exc
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            raise NotApplied("alert_unavailable") from exc  # never connected
        except BotoCoreError as exc:
            raise TransientError("alert_unconfirmed") from exc
