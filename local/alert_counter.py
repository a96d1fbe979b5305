"""Counts the agent workflow's alerts as a subscriber of its SNS topic sees them.

The local stack subscribes an SQS queue to the alert topic; a thread drains it and
counts each alert under its idempotency key (``<delivery_id>:alert``), the message
attribute the SNS adapter sets, as the notification target counts its effects, and
keeps the last message text under each key.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from typing import Any

# Long polls this long (the emulator serves other requests meanwhile): a stop is
# noticed within one.
_WAIT_SECONDS = 1
_RETRY_SECONDS = 0.2  # after a failed poll


class AlertCounter:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._counts: Counter[str] = Counter()
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="alert-counter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def counts(self) -> dict[str, int]:
        """Alerts per idempotency key so far."""
        with self._lock:
            return dict(self._counts)

    def text(self, key: str) -> str | None:
        """The message of the last alert counted under ``key`` (None: none yet)."""
        with self._lock:
            return self._texts.get(key)

    def _drain(self) -> None:
        while not self._stopping.is_set():
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._queue_url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=_WAIT_SECONDS,
                ).get("Messages", [])
            except Exception:  # noqa: BLE001 (the emulator stopping under us: try again)
                self._stopping.wait(_RETRY_SECONDS)
                continue
            for message in messages:
                key, text = _key_and_text(message.get("Body", ""))
                with self._lock:
                    self._counts[key] += 1
                    self._texts[key] = text
                with contextlib.suppress(Exception):
                    self._sqs.delete_message(
                        QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )


def _key_and_text(body: str) -> tuple[str, str]:
    """The idempotency key and message of an SNS notification's envelope; ``?`` for a
    key it lacks (still counted)."""
    try:
        envelope = json.loads(body)
        text = str(envelope.get("Message", ""))
    except (ValueError, TypeError, AttributeError):
        return "?", ""
    try:
        return str(envelope["MessageAttributes"]["idempotency_key"]["Value"]), text
    except (KeyError, TypeError):
        return "?", text
