"""Each role's table permissions equal the DynamoDB calls its code makes.

Every method of the storage ports a function's use case takes runs against the real
adapter on moto, while botocore records each request. A request maps to the IAM
actions and resources that authorise it (each item of a transaction to its own action,
a Query by index to that index); per function, the union must equal what the
synthesized role holds. moto checks no IAM: without this, a new call in an adapter
would first fail with AccessDenied in production.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from functions.core import accept, claim, package_record, process, reconcile, table_layout
from functions.core.adapters import dynamodb_items
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog
from functions.core.models import QuarantineRecord
from functions.core.ports import claims as claims_port
from functions.core.ports import effects as effects_port
from functions.core.ports import inbox as inbox_port
from functions.core.ports import package_record as package_record_port
from functions.core.ports import recovery as recovery_port
from functions.core.ports.steps import StoredResult
from local.testkit import builders
from tests.infra.conftest import Synthesized, get_att, resource_key, role_grants
from tests.unit.test_claim import LEASE, NOW, pending

if TYPE_CHECKING:
    from botocore.model import OperationModel
    from mypy_boto3_dynamodb.client import DynamoDBClient

EFFECT = "notify"
TABLE = "table"
STATE_INDEX = f"index/{table_layout.STATE_INDEX}"

# The storage parameters of each function's use case, and the adapter its handler
# wires into them.
USE_CASE_PORTS: dict[str, tuple[tuple[Any, str, type], ...]] = {
    "receiver": ((accept.AcceptDelivery.__init__, "inbox", inbox_port.InboxWriter),),
    "worker": (
        (process.Processor, "claims", claims_port.ClaimStore),
        (process.Processor, "effects", effects_port.EffectStore),
        (package_record.PackageStorage, "records", package_record_port.PackageRecordStore),
    ),
    "reconciler": (
        (reconcile.reconcile, "store", recovery_port.RecoveryStore),
        (reconcile.reconcile, "received", recovery_port.ReceivedLog),
        (reconcile.reconcile, "effects", recovery_port.UncertainEffects),
    ),
}
# An item of a transaction is authorised as the single-item action it performs.
_TRANSACTION_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


@dataclass(frozen=True)
class Adapters:
    inbox: DynamoDbInbox
    claims: DynamoDbClaims
    effects: DynamoDbEffects
    received: DynamoDbReceivedLog
    packages: DynamoDbPackageRecords


def _adapters(client: DynamoDBClient, table: str) -> Adapters:
    return Adapters(
        inbox=DynamoDbInbox(client, table),
        claims=DynamoDbClaims(client=client, table_name=table),
        effects=DynamoDbEffects(client=client, table_name=table),
        received=DynamoDbReceivedLog(client=client, table_name=table),
        packages=DynamoDbPackageRecords(client=client, table_name=table),
    )


def _claimed(setup: Adapters, delivery_id: str) -> claim.Claim:
    attempt = setup.claims.claim(delivery_id, owner="setup", now=NOW, lease_seconds=LEASE)
    assert attempt.claim is not None
    return attempt.claim


def _intent(setup: Adapters, delivery_id: str) -> effects_port.EffectRecord:
    setup.effects.record_intent(delivery_id, EFFECT, key="k", now=NOW, expires_at=NOW + 86400)
    record = setup.effects.get(delivery_id, EFFECT)
    assert record is not None
    return record


def _reopen(tested: Adapters, setup: Adapters, delivery_id: str) -> object:
    setup.claims.fail(_claimed(setup, delivery_id), now=NOW, error_code="mcp_unavailable")
    return tested.claims.reopen(delivery_id, now=NOW)


def _package(claimed: claim.Claim) -> package_record_port.PackageRecord:
    content = StoredResult(size=2, inline="{}")
    return package_record_port.PackageRecord(claimed.delivery_id, "0" * 64, content, NOW, "o")


def _record_package(tested: Adapters, setup: Adapters, delivery_id: str) -> object:
    claimed = _claimed(setup, delivery_id)
    return tested.packages.record(claimed, _package(claimed), expires_at=NOW + 86400)


def _record_refetch(tested: Adapters, setup: Adapters, delivery_id: str) -> None:
    claimed = _claimed(setup, delivery_id)
    setup.packages.record(claimed, _package(claimed), expires_at=NOW + 86400)
    tested.packages.record_refetch(delivery_id, digest="1" * 64, now=NOW)


def _record_done(tested: Adapters, setup: Adapters, delivery_id: str) -> None:
    _intent(setup, delivery_id)
    tested.effects.record_done(delivery_id, EFFECT, now=NOW)


# One call per port method: (tested, setup, id of a pending inbox item). ``setup`` is an
# unrecorded adapter that puts the item where the call expects it.
Call = Callable[[Adapters, Adapters, str], object]
CALLS: dict[tuple[type, str], Call] = {
    (inbox_port.InboxWriter, "record"): lambda t, s, d: builders.record_new(
        t.inbox, pending(f"{d}-new")
    ),
    (inbox_port.InboxWriter, "quarantine"): lambda t, s, d: t.inbox.quarantine(
        QuarantineRecord(d, "package.received", "0" * 64, "1" * 64, NOW, NOW + 86400)
    ),
    (claims_port.ClaimStore, "claim"): lambda t, s, d: t.claims.claim(
        d, owner="tested", now=NOW, lease_seconds=LEASE
    ),
    (claims_port.ClaimStore, "complete"): lambda t, s, d: t.claims.complete(
        _claimed(s, d), now=NOW, effects_done=frozenset({EFFECT})
    ),
    (claims_port.ClaimStore, "release"): lambda t, s, d: t.claims.release(
        _claimed(s, d), now=NOW, error_code="mcp_unavailable"
    ),
    (claims_port.ClaimStore, "release_transient"): lambda t, s, d: t.claims.release_transient(
        _claimed(s, d), now=NOW, error_code="mcp_unavailable"
    ),
    (claims_port.ClaimStore, "defer"): lambda t, s, d: t.claims.defer(
        _claimed(s, d), now=NOW, error_code="budget_exhausted"
    ),
    (claims_port.ClaimStore, "fail"): lambda t, s, d: t.claims.fail(
        _claimed(s, d), now=NOW, error_code="package_not_found"
    ),
    (claims_port.ClaimStore, "reopen"): _reopen,
    (claims_port.ClaimStore, "give_back"): lambda t, s, d: t.claims.give_back(
        _claimed(s, d), now=NOW
    ),
    (claims_port.ClaimStore, "park"): lambda t, s, d: t.claims.park(
        _claimed(s, d), now=NOW, approval="alert", deadline=NOW + 3600
    ),
    # A lease longer than the item's 30 days left: its TTL passes first.
    (claims_port.ClaimStore, "close_expired"): lambda t, s, d: t.claims.close_expired(
        d, now=NOW, lease_seconds=31 * 86400
    ),
    (effects_port.EffectStore, "get"): lambda t, s, d: t.effects.get(d, EFFECT),
    (effects_port.EffectStore, "record_intent"): lambda t, s, d: t.effects.record_intent(
        d, EFFECT, key="k", now=NOW, expires_at=NOW + 86400
    ),
    (effects_port.EffectStore, "record_done"): _record_done,
    (effects_port.EffectStore, "resolve_not_applied"): lambda t, s, d: (
        _intent(s, d),
        t.effects.resolve_not_applied(d, EFFECT, now=NOW),
    ),
    (package_record_port.PackageRecordStore, "get"): lambda t, s, d: t.packages.get(d),
    (package_record_port.PackageRecordStore, "record"): _record_package,
    (package_record_port.PackageRecordStore, "record_refetch"): _record_refetch,
    (recovery_port.RecoveryStore, "get"): lambda t, s, d: t.claims.get(d),
    # The lists are read lazily: list() makes their queries.
    (recovery_port.RecoveryStore, "open_pages"): lambda t, s, d: list(
        t.claims.open_pages(start=None, page_size=10)
    ),
    (recovery_port.RecoveryStore, "open_cursor"): lambda t, s, d: t.claims.open_cursor(),
    (recovery_port.RecoveryStore, "save_open_cursor"): lambda t, s, d: t.claims.save_open_cursor(
        recovery_port.OpenCursor(1, (NOW, d))
    ),
    (recovery_port.RecoveryStore, "touch_pending"): lambda t, s, d: t.claims.touch_pending(
        pending(d), now=NOW
    ),
    (recovery_port.RecoveryStore, "release_expired"): lambda t, s, d: t.claims.release_expired(
        pending(d, lease_until=_claimed(s, d).lease_until), now=NOW + LEASE
    ),
    (recovery_port.ReceivedLog, "watermark"): lambda t, s, d: t.received.watermark(),
    (recovery_port.ReceivedLog, "oldest"): lambda t, s, d: t.received.oldest(),
    (recovery_port.ReceivedLog, "unlisted_open_pages"): lambda t, s, d: (
        builders.record_new(s.inbox, pending(f"{d}-new")),
        list(t.received.unlisted_open_pages(since=0, before=NOW + 1, page_size=10)),
    ),
    (recovery_port.ReceivedLog, "list_open"): lambda t, s, d: t.received.list_open(pending(d)),
    (recovery_port.ReceivedLog, "advance"): lambda t, s, d: t.received.advance(NOW),
    # Each shard's pass reads and moves a watermark of its own.
    (recovery_port.ReceivedLog, "slices"): lambda t, s, d: _one_shard_pass(t),
    (recovery_port.UncertainEffects, "uncertain_pages"): lambda t, s, d: (
        _intent(s, d),
        list(t.effects.uncertain_pages(start=None, intended_before=NOW + 1, page_size=10)),
    ),
    (recovery_port.UncertainEffects, "intent_cursor"): lambda t, s, d: t.effects.intent_cursor(),
    (recovery_port.UncertainEffects, "save_intent_cursor"): lambda t, s, d: (
        t.effects.save_intent_cursor(recovery_port.IntentCursor(1, (NOW, d, EFFECT)))
    ),
    (recovery_port.UncertainEffects, "flag"): lambda t, s, d: t.effects.flag(
        _intent(s, d), now=NOW
    ),
}


def _one_shard_pass(t: Adapters) -> None:
    part = t.received.slices()[0]
    part.watermark()
    part.oldest()
    part.advance(NOW)


def _members(port: type) -> set[str]:
    # A port's own methods and those of the ports it extends (ReceivedLog is a
    # ReceivedLogPart that also splits into parts).
    return {
        name
        for klass in port.__mro__
        if klass is not object and klass.__module__ == port.__module__
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("_")
    }


class Recorder:
    """Collects (operation, parameters) of every request the client is about to build."""

    def __init__(self, client: DynamoDBClient) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self._record)

    def _record(self, params: dict[str, Any], model: OperationModel, **_: object) -> None:
        self.requests.append((model.name, json.loads(json.dumps(params))))

    @contextmanager
    def fresh(self) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        self.requests = []
        yield self.requests


def iam_of(operation: str, params: dict[str, Any]) -> set[tuple[str, str]]:
    """The (action, resource) pairs that authorise one request."""
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return {
            (_TRANSACTION_ITEM_ACTIONS[kind], TABLE)
            for item in params["TransactItems"]
            for kind in item
        }
    index = params.get("IndexName")
    return {(f"dynamodb:{operation}", f"index/{index}" if index else TABLE)}


def _table_grants(synthesized: Synthesized, function: str) -> set[tuple[str, str]]:
    arn = get_att(synthesized.logical_id(synthesized.stack.table.table), "Arn")
    where = {
        resource_key(arn): TABLE,
        resource_key({"Fn::Join": ["", [arn, f"/{STATE_INDEX}"]]}): STATE_INDEX,
    }
    found: set[tuple[str, str]] = set()
    for action, resource in role_grants(synthesized, function):
        if action.startswith("dynamodb:") and resource in where:
            found.add((action, where[resource]))
    return found


def test_every_storage_port_method_has_a_call() -> None:
    ports = {port for entries in USE_CASE_PORTS.values() for _, _, port in entries}
    assert set(CALLS) == {(port, name) for port in ports for name in _members(port)}


@pytest.mark.parametrize("function", sorted(USE_CASE_PORTS))
def test_use_cases_take_these_ports(function: str) -> None:
    for owner, parameter, port in USE_CASE_PORTS[function]:
        # The modules use postponed annotations: the annotation is the port's name.
        assert owner.__annotations__[parameter] == port.__name__, (function, parameter)


@pytest.mark.parametrize("function", sorted(USE_CASE_PORTS))
def test_role_table_grants_equal_the_calls_of_its_ports(
    synthesized: Synthesized, dynamodb: DynamoDBClient, table: str, function: str
) -> None:
    import boto3  # noqa: PLC0415 (a second client on the same moto backend, unrecorded)

    setup_client = boto3.client("dynamodb", region_name=dynamodb.meta.region_name)
    setup = _adapters(setup_client, table)
    tested = _adapters(dynamodb, table)
    recorder = Recorder(dynamodb)
    ids = (f"6f1c2a9e-3b7d-4c1e-9a52-{n:012d}" for n in itertools.count())
    needed: set[tuple[str, str]] = set()
    for _, _, port in USE_CASE_PORTS[function]:
        for name in sorted(_members(port)):
            delivery_id = next(ids)
            item = dynamodb_items.inbox_to_item(pending(delivery_id))
            setup_client.put_item(TableName=table, Item=item)
            with recorder.fresh() as requests:
                CALLS[(port, name)](tested, setup, delivery_id)
            assert requests, (port.__name__, name)
            for operation, params in requests:
                needed |= iam_of(operation, params)
    assert _table_grants(synthesized, function) == needed
