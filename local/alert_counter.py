"""Counts the agent workflow's alerts as a subscriber of its SNS topic sees them.

The local stack subscribes an SQS queue to the alert topic; a thread drains it and
counts each alert under its idempotency key (``<delivery_id>:alert``), the message
attribute the SNS adapter sets, as the notification target counts its effects.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from typing import Any

_POLL_SECONDS = 1  # SQS long poll: an alert is counted within about this long


class AlertCounter:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="alert-counter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=_POLL_SECONDS + 5)

    def counts(self) -> dict[str, int]:
        """Alerts per idempotency key so far."""
        with self._lock:
            return dict(self._counts)

    def _drain(self) -> None:
        while not self._stopping.is_set():
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._queue_url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=_POLL_SECONDS,
                ).get("Messages", [])
            except Exception:  # noqa: BLE001 (the emulator stopping under us: try again)
                self._stopping.wait(0.2)
                continue
            for message in messages:
                key = _idempotency_key(message.get("Body", ""))
                with self._lock:
                    self._counts[key] += 1
                with contextlib.suppress(Exception):
                    self._sqs.delete_message(
                        QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )


def _idempotency_key(body: str) -> str:
    """The key of an SNS notification's envelope; ``?`` when it has none (still counted)."""
    try:
        attributes = json.loads(body).get("MessageAttributes", {})
        return str(attributes["idempotency_key"]["Value"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return "?"
