"""The real handler wired to in-memory fakes, for properties about its answers."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from functions.core import names
from functions.core.accept import AcceptDelivery
from functions.core.errors import SigningSecretsUnavailable, StorageUnavailable
from functions.core.models import InboxItem, QuarantineRecord, WorkItem
from functions.core.signature import SigningSecret
from functions.receiver import handler
from local.testkit import builders
from local.testkit.clock import FakeClock


@dataclass
class FakeInbox:
    """:class:`functions.core.accept.InboxWriter` in memory; ``fail`` injects a fault.

    ``fail`` fails every write, ``fail_quarantine`` only the quarantine write.
    """

    items: dict[str, tuple[InboxItem, WorkItem | None]] = field(default_factory=dict)
    quarantined: list[QuarantineRecord] = field(default_factory=list)
    calls: int = 0
    fail: bool = False
    fail_quarantine: bool = False

    def record(self, inbox: InboxItem, work: WorkItem | None) -> InboxItem | None:
        self.calls += 1
        if self.fail:
            raise StorageUnavailable()
        existing = self.items.get(inbox.delivery_id)
        if existing is not None:
            return existing[0]
        self.items[inbox.delivery_id] = (inbox, work)
        return None

    def quarantine_records(self) -> list[QuarantineRecord]:
        return list(self.quarantined)

    def quarantine(self, record: QuarantineRecord) -> None:
        self.calls += 1
        if self.fail or self.fail_quarantine:
            raise StorageUnavailable()
        self.quarantined.append(record)


@dataclass
class FakeSecrets:
    secrets: tuple[SigningSecret, ...]
    calls: int = 0
    fail: bool = False

    def current(self) -> Sequence[SigningSecret]:
        self.calls += 1
        if self.fail:
            raise SigningSecretsUnavailable()
        return self.secrets


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
        log = logging.getLogger(names.SERVICE)  # the logger behind observability.logger
        log.addHandler(lines)
        try:
            raw = handler.lambda_handler(event, builders.LambdaContext())
        finally:
            log.removeHandler(lines)
        return Answer(
            raw["statusCode"], raw["headers"], raw["body"], json.loads(raw["body"]), lines.lines
        )


def install(*, now: int, secrets: Sequence[str] = (builders.SECRET,)) -> FakeReceiver:
    """Build the handler's deps on fakes and install them (undo with ``set_deps(None)``)."""
    inbox = FakeInbox()
    source = FakeSecrets(tuple(SigningSecret.parse(s) for s in secrets))
    accept = AcceptDelivery(
        inbox=inbox, secrets=source, clock=FakeClock(now), retention_seconds=30 * 86400
    )
    handler.set_deps(handler.Deps(accept=accept))
    return FakeReceiver(inbox, source)
