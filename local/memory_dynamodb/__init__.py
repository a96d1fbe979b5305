"""An in-memory DynamoDB that answers the adapters' own requests.

The simulator's world and the unit tests' fakes stand on it, so the rules of the
store (each condition, update, index and transaction) are the adapters' own requests,
evaluated once, here. ``functions/`` never imports it: the adapters take it where they
take a boto3 client.

Public API (everything else is internal):

* :class:`MemoryDynamoDB` -- called exactly as the boto3 low-level DynamoDB client is,
  with keyword arguments: ``create_table`` (a ``CreateTable`` request, e.g.
  ``infra.schema.table_definition(name)``), ``update_time_to_live``, ``get_item``,
  ``put_item``, ``update_item``, ``delete_item``, ``query`` (the table or a global
  secondary index; ``KeyConditionExpression``, ``FilterExpression``,
  ``ProjectionExpression``, ``ScanIndexForward``, ``Limit``, ``ExclusiveStartKey``,
  ``Select=COUNT``), ``transact_write_items`` and ``batch_get_item``. Answers have the
  client's shapes; refusals are botocore ``ClientError``s with DynamoDB's codes:
  ``ConditionalCheckFailedException`` (with ``Item`` when the request asked for
  ``ReturnValuesOnConditionCheckFailure=ALL_OLD``), ``TransactionCanceledException``
  (``CancellationReasons``, one per action: ``None``, ``ConditionalCheckFailed`` with
  its ``Item``, ``ValidationError``), ``ValidationException`` (syntax, reserved words,
  unused or undefined placeholders, a key of the wrong type, an update of a key, an
  item over 400 KB), ``ResourceNotFoundException``.
* ``MemoryDynamoDB(ttl_lag=...)``, :meth:`MemoryDynamoDB.sweep` and
  :meth:`MemoryDynamoDB.next_expiry` -- TTL on the caller's clock: each time an item's
  TTL attribute is written, ``ttl_lag()`` draws how late its deletion will be;
  ``sweep(now)`` deletes what is due by ``now``, the earliest due first.
* :meth:`MemoryDynamoDB.listen` -- a callback for each committed change (:class:`Write`:
  table, key, old and new item, operation; ``TTL`` for TTL's deletions), in commit order.
* :meth:`MemoryDynamoDB.items` -- copies of a table's items, in key order.

What it does not model: throttling and lost answers (the caller injects those), the
1 MB page limit of a Query, a transaction's idempotency token, eventually consistent
reads (every read is consistent; an index is updated with its table), nested document
paths in updates and projections (raise ``NotImplementedError``), Scan. Where moto and
DynamoDB differ it follows DynamoDB: a Query page that reached its ``Limit`` carries a
``LastEvaluatedKey`` even when nothing follows.
"""

from local.memory_dynamodb.store import MemoryDynamoDB, Write

__all__ = ["MemoryDynamoDB", "Write"]
