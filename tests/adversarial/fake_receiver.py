"""The real handler wired to in-memory fakes, for properties about its answers."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from functions.core import metric_names
from functions.core.accept import AcceptDelivery
from functions.receiver import handler
from local.testkit import builders
from local.testkit.clock import FakeClock
from tests.fakes import FakeInbox, FakeSecrets


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str
    data: dict[str, Any]
    logged: list[dict[str, Any]]  # the receiver's "delivery handled" lines, their fields


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "delivery handled":
            self.lines.append({key: getattr(record, key, None) for key in LOGGED_FIELDS})


LOGGED_FIELDS = ("outcome", "reason", "status", "delivery_id", "aws_request_id", "api_request_id")


@dataclass
class FakeReceiver:
    inbox: FakeInbox
    secrets: FakeSecrets

    def invoke(self, event: Any) -> Answer:
        lines = _Lines()
        log = logging.getLogger(metric_names.SERVICE)  # the logger behind observability.logger
        log.addHandler(lines)
        try:
            raw = handler.lambda_handler(event, builders.LambdaContext())
        finally:
            log.removeHandler(lines)
        return Answer(
            raw["statusCode"], raw["headers"], raw["body"], json.loads(raw["body"]), lines.lines
        )


def install(*, now: int, secrets: Sequence[str] = (builders.SECRET,)) -> FakeReceiver:
    """Build the handler's deps on fakes and install them.

    Undo with ``handler.container_deps.reset()``.
    """
    inbox = FakeInbox()
    source = FakeSecrets(list(secrets))
    accept = AcceptDelivery(
        inbox=inbox, secrets=source, clock=FakeClock(now), retention_seconds=30 * 86400
    )
    handler.container_deps.set(handler.Deps(accept=accept))
    return FakeReceiver(inbox, source)
