"""Approvals in a simulated world: the real store at port sites, a person's decisions, the truth.

With ``approval=alert`` (a seed's configuration) the agent parks each delivery once its
alert is proposed, and a person decides, through the real decide path
(:func:`functions.core.approval.decide`, as ``approvals approve``/``deny`` does, then
the work item sent again for an approval): approve what was listed, deny it, decide
after the deadline (refused: ``approval_expired``), or name another proposal than the
one listed (refused: nothing moves); or nobody decides, and the reconciler's approval
pass denies it by the timeout.

The truth the invariants read comes from the store's committed writes of the approval
records (:class:`ApprovalTruth`): each record as it stands, and each decision that was
changed once set.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from functions.core import table_layout
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals, approval_from_item
from functions.core.approval import DECIDED_BY_TIMEOUT
from functions.core.models import InboxItem
from functions.core.ports.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    Decision,
)
from functions.core.ports.recovery import OpenCursor, OpenPage
from local.memory_dynamodb import Write
from local.simulate.world import TABLE_NAME, World

# The inbox transition each decision's transaction carries out (the history names it).
_MOVES: Final = {
    ApprovalDecision.APPROVED: "approve",
    ApprovalDecision.DENIED: "deny",
    ApprovalDecision.EXPIRED: "approval_timeout",
}
DECIDED_BY_PERSON: Final = "operator"


class Approvals:
    """:class:`functions.core.ports.approvals.ApprovalDecisions`: the real
    :class:`~functions.core.adapters.dynamodb_approvals.DynamoDbApprovals`, each call
    through the world's fault boundary."""

    def __init__(self, world: World) -> None:
        self._w = world
        self._real = DynamoDbApprovals(client=world.client, table_name=TABLE_NAME)

    def get(self, delivery_id: str, name: str) -> ApprovalRecord | None:
        return self._w.read("ddb.approval_get", lambda: self._real.get(delivery_id, name))

    def request(self, record: ApprovalRecord, *, expires_at: int) -> bool:
        return self._w.call(
            "ddb.approval_request", lambda: self._real.request(record, expires_at=expires_at)
        )

    def decide(self, delivery_id: str, name: str, decision: Decision) -> bool:
        return self._w.call(
            "ddb.approval_decide",
            lambda: self._real.decide(delivery_id, name, decision),
            transition=_MOVES[decision.decision],
        )

    def waiting(self, *, page_size: int) -> Iterable[InboxItem]:
        return self._w.read(
            "ddb.approval_waiting", lambda: list(self._real.waiting(page_size=page_size))
        )

    def waiting_pages(self, *, start: OpenCursor | None, page_size: int) -> Iterator[OpenPage]:
        return self._w.pages(
            "ddb.approval_waiting_page",
            iter(self._real.waiting_pages(start=start, page_size=page_size)),
        )

    def waiting_cursor(self) -> OpenCursor | None:
        return self._w.read("ddb.approval_cursor", self._real.waiting_cursor)

    def save_waiting_cursor(self, cursor: OpenCursor | None) -> None:
        self._w.call("ddb.approval_save_cursor", lambda: self._real.save_waiting_cursor(cursor))

    def waiting_since(self) -> int | None:
        return self._w.read("ddb.approval_since", self._real.waiting_since)


class Choice(IntEnum):
    """What the person does about one asked-for approval (a seed's draw)."""

    APPROVE = 1  # the proposal as listed, in time
    DENY = 2  # in time
    LATE = 3  # approves the listed proposal after its deadline: refused
    OTHER = 4  # approves, naming another proposal's digest: refused


@dataclass(slots=True)
class ApprovalTruth:
    """The approval records as the store committed them (a listener of the table)."""

    alert_waits: bool = False  # the seed's agent runs with approval=alert
    records: dict[tuple[str, str], ApprovalRecord] = field(default_factory=dict)
    asked: list[ApprovalRecord] = field(default_factory=list)  # new records, not yet seen
    changed: list[str] = field(default_factory=list)  # decisions changed once set
    # What the scheduled decisions met: choice -> outcome -> count (for the report).
    outcomes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def committed(self, write: Write) -> None:
        image = write.new if write.new is not None else write.old
        assert image is not None
        sort = image[table_layout.TABLE_SORT_KEY]["S"]
        if not sort.startswith(table_layout.SK_APPROVAL_PREFIX) or write.new is None:
            return  # TTL's deletion of a record changes no decision
        record = approval_from_item(write.new)
        key = (record.delivery_id, record.name)
        before = None if write.old is None else approval_from_item(write.old)
        self.records[key] = record
        if before is None:
            self.asked.append(record)
            return
        if before.decided is not None and before.decided != record.decided:
            now = "none" if record.decided is None else record.decided.decision.value
            self.changed.append(
                f"{record.delivery_id} {record.name}: {before.decided.decision.value}"
                f" by {before.decided.decided_by} became {now}"
            )


def alert_contents(proposal: Mapping[str, Any]) -> tuple[str, str]:
    """What the alert channels send for an approved alert proposal: the webhook's JSON
    body and the topic's text (as :class:`functions.workflows.agent.Alert` words them)."""
    payload = {k: v for k, v in proposal.items() if k != "channels"}
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True)
    text = (
        f"{payload.get('title')}\nPackage {payload.get('package_id')}, delivery"
        f" {payload.get('delivery_id')}\nArchived as {payload.get('archive_key')}\n\n"
        f"{payload.get('summary')}"
    )
    return body, text


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def tool_calls_approved(truth: ApprovalTruth, sent: Iterable[tuple[str, str, str]]) -> list[str]:
    """Every acting tool call a far side received (``(side, key, canonical input)``) is
    one a person approved before its deadline: the same key and the same input."""
    allowed = {
        (
            str(r.proposal.get("key")),
            json.dumps(r.proposal.get("input"), separators=(",", ":"), sort_keys=True),
        )
        for r in truth.records.values()
        if "tool" in r.proposal and approved_in_time(r)
    }
    return [
        f"what_ran_is_approved: {key.partition(':')[0]}: {side} acted on a call no person"
        " approved in time"
        for side, key, content in sent
        if (key, content) not in allowed
    ]


def approved_in_time(record: ApprovalRecord) -> bool:
    decided = record.decided
    return (
        decided is not None
        and decided.decision is ApprovalDecision.APPROVED
        and decided.decided_by != DECIDED_BY_TIMEOUT
        and decided.decided_at < record.deadline
    )


def what_ran_is_approved(truth: ApprovalTruth, sent: Iterable[tuple[str, str, str]]) -> list[str]:
    """Every alert a far side received (``(channel, idempotency key, content)``) matches,
    by its content's digest, a proposal of its delivery that a person approved before
    its deadline."""
    allowed: dict[str, set[str]] = {}
    for (delivery_id, _name), record in truth.records.items():
        if approved_in_time(record):
            allowed.setdefault(delivery_id, set()).update(
                digest(c) for c in alert_contents(record.proposal)
            )
    found = []
    for channel, key, content in sent:
        delivery_id = key.partition(":")[0]
        if digest(content) not in allowed.get(delivery_id, set()):
            decided = sorted(
                f"{r.name}={'undecided' if r.decided is None else r.decided.decision.value}"
                f"{'' if r.decided is None else f' by {r.decided.decided_by}'}"
                f"{'' if r.decided is None or r.decided.decided_at < r.deadline else ' late'}"
                for (d, _n), r in truth.records.items()
                if d == delivery_id
            )
            found.append(
                f"what_ran_is_approved: {delivery_id}: {channel} sent an alert no person"
                f" approved in time ({', '.join(decided) or 'nothing asked'})"
            )
    return found
