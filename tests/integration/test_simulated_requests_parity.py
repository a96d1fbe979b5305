"""Every request a simulated seed sent to the in-memory DynamoDB, sent again to moto in
the same order: the two answer alike.

The seeds' requests are the real adapters' (claims, transitions, the ledger, steps, the
budget, the reconciler's paged reads of the received log and the state index), under
the seed's faults (an SDK resend, a refused condition, a cancelled transaction), so this
compares the store with moto on exactly what the simulator relies on. TTL's deletions
(moto has none) are replayed as deletes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from infra.schema import table_definition
from local.memory_dynamodb import MemoryDynamoDB, Write
from local.simulate import world as simulated_world
from local.simulate.run import Simulation

Sent = tuple[str, dict[str, Any], Any]  # (operation, request, normalized answer)


class _Recording(MemoryDynamoDB):
    """The store, noting each request and its answer (or refusal), and TTL's deletes."""

    sent: list[Sent]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.sent = []
        self.listen(self._deleted_by_ttl)

    def _deleted_by_ttl(self, write: Write) -> None:
        if write.operation == "TTL":
            self.sent.append(("delete_item", {"TableName": write.table, "Key": write.key}, {}))


for _operation in (
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "query",
    "transact_write_items",
    "batch_get_item",
):

    def _send(self: _Recording, _operation: str = _operation, **request: Any) -> Any:
        try:
            answer = getattr(MemoryDynamoDB, _operation)(self, **request)
        except ClientError as exc:
            self.sent.append((_operation, _copy(request), _refusal(exc)))
            raise
        self.sent.append((_operation, _copy(request), _normal(answer)))
        return answer

    setattr(_Recording, _operation, _send)


def _copy(request: dict[str, Any]) -> dict[str, Any]:
    """The request as sent (a reader may change its arguments for the next page)."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in request.items()}


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: sorted(v) if k in ("SS", "NS") else _normal(v)
            for k, v in value.items()
            if k not in ("ResponseMetadata", "ConsumedCapacity", "ItemCollectionMetrics")
        }
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _refusal(exc: ClientError) -> dict[str, Any]:
    response: dict[str, Any] = dict(exc.response)
    refusal: dict[str, Any] = {"code": response["Error"]["Code"]}
    if "Item" in response:
        refusal["item"] = _normal(response["Item"])
    if "CancellationReasons" in response:
        refusal["reasons"] = [
            {k: _normal(v) for k, v in reason.items() if k in ("Code", "Item")}
            for reason in response["CancellationReasons"]
        ]
    return refusal


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Recording]]:
    stores: list[_Recording] = []

    def recording(**options: Any) -> _Recording:
        store = _Recording(**options)
        stores.append(store)
        return store

    monkeypatch.setattr(simulated_world, "MemoryDynamoDB", recording)
    yield stores


def _comparable(operation: str, answer: Any) -> Any:
    """What must agree: a Query's page, not where it says to go on (moto looks past the
    Limit, DynamoDB and the store do not: docs in local/memory_dynamodb)."""
    if operation == "query" and isinstance(answer, dict) and "code" not in answer:
        return {k: v for k, v in answer.items() if k != "LastEvaluatedKey"}
    return answer


@pytest.mark.parametrize(("workflow", "seed"), [("notify", 1), ("agent", 11), ("archive", 66)])
def test_moto_answers_every_request_of_a_seed_as_the_store_did(
    recorded: list[_Recording], workflow: str, seed: int
) -> None:
    Simulation(workflow, seed).run()
    (store,) = recorded
    assert len(store.sent) > 20
    with mock_aws():
        moto = boto3.client("dynamodb", region_name="eu-west-1")
        moto.create_table(**table_definition(simulated_world.TABLE_NAME))
        for number, (operation, request, answer) in enumerate(store.sent):
            try:
                got = _normal(getattr(moto, operation)(**request))
            except ClientError as exc:
                got = _refusal(exc)
            assert _comparable(operation, got) == _comparable(operation, answer), (
                number,
                operation,
                request,
            )
