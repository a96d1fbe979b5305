"""In-memory fakes of the ports: the receiver's inbox and secrets, the processing
claims, effects, queue and metrics, package records, and the workflows' step records,
objects, token budget and model spend.

Every port the table backs is its real DynamoDB adapter over
:class:`local.memory_dynamodb.MemoryDynamoDB` (the stack's own table definition), so a
rule of the store (each condition, update and index move) exists once: in the
adapter's requests. What the fakes add is for tests only: inspection helpers that read
the table back through the adapters' own item parsers, seeding helpers, and faults
injected where the boto3 client would raise (a refused write, a lost answer). The
queue, metrics, objects and secrets are plain in-memory fakes. The clock is
:class:`local.testkit.clock.FakeClock`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from botocore.exceptions import ClientError, ReadTimeoutError

from functions.core import table_layout
from functions.core.adapters import dynamodb_budget, dynamodb_items, dynamodb_spend
from functions.core.adapters import dynamodb_inbox_transitions as transitions
from functions.core.adapters.dynamodb_approvals import DynamoDbApprovals, approval_from_item
from functions.core.adapters.dynamodb_budget import DynamoDbBudget
from functions.core.adapters.dynamodb_claims import DynamoDbClaims
from functions.core.adapters.dynamodb_effects import DynamoDbEffects, effect_from_item
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.dynamodb_package_record import DynamoDbPackageRecords
from functions.core.adapters.dynamodb_received_log import DynamoDbReceivedLog, read_watermark
from functions.core.adapters.dynamodb_spend import DynamoDbSpend
from functions.core.adapters.dynamodb_steps import KIND_STEP, DynamoDbSteps, step_from_item
from functions.core.adapters.storage_retry import StorageRetry
from functions.core.claim import Claim
from functions.core.errors import SigningSecretsUnavailable, StorageUnavailable
from functions.core.models import InboxItem, QuarantineRecord, State, UnsentWork, WorkItem
from functions.core.ports.approvals import ApprovalRecord, Decision
from functions.core.ports.budget import BudgetDay
from functions.core.ports.effects import EffectRecord
from functions.core.ports.package_record import PackageRecord
from functions.core.ports.recovery import IntentCursor, OpenCursor
from functions.core.ports.steps import StepRecord
from functions.core.signature import SigningSecret
from infra.schema import table_definition
from local.memory_dynamodb import MemoryDynamoDB

TABLE_NAME: Final = "relaylink-unit"

# --- The table under the DynamoDB-backed fakes ------------------------------------------

_WRITES: Final = frozenset({"put_item", "update_item", "delete_item", "transact_write_items"})
_LOST: Final = object()  # a fault: the write commits, its answer never comes


def throttled(operation: str = "PutItem") -> ClientError:
    """What DynamoDB answers a write it refused for capacity (after the SDK's retries)."""
    error = {"Code": "ThrottlingException", "Message": "Rate of requests exceeds the limit"}
    return ClientError({"Error": error}, operation)  # type: ignore[typeddict-item]


class FaultyClient:
    """:class:`MemoryDynamoDB` as the adapters call it (the boto3 client's methods), with
    faults armed for the next writes: a refusal (an error raised instead of writing) or
    a lost answer (the write commits, then the read of its answer times out). A write
    refused by its own condition is an answer that came: a lost answer waits for the
    next write that commits. ``down`` refuses every write while set. Calls are taken
    one at a time (a reconciler run reads shards from several threads; the store is
    not thread-safe)."""

    def __init__(self, store: MemoryDynamoDB) -> None:
        self.store = store
        self.down = False
        self._faults: list[object] = []
        self._lock = threading.RLock()

    def fail_next(self, *errors: Exception) -> None:
        """The next writes raise ``errors`` (one each; none given: one throttled)."""
        self._faults += errors or [throttled()]

    def lose_next(self, count: int = 1) -> None:
        """The next ``count`` writes that commit lose their answer."""
        self._faults += [_LOST] * count

    def armed(self) -> int:
        """How many faults wait for a write."""
        return len(self._faults)

    def disarm(self) -> None:
        self._faults.clear()

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.store, name)
        if not callable(call):
            return call
        if name not in _WRITES:
            return self._one_at_a_time(call)

        @self._one_at_a_time
        def write(**request: Any) -> Any:
            if self.down:
                raise throttled()
            if not self._faults:
                return call(**request)
            if self._faults[0] is not _LOST:
                fault = self._faults.pop(0)
                assert isinstance(fault, Exception)
                raise fault
            call(**request)  # (a refusal raises here: the fault stays armed)
            self._faults.pop(0)
            raise ReadTimeoutError(endpoint_url="memory://dynamodb")

        return write

    def _one_at_a_time(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return call(*args, **kwargs)

        return locked


@dataclass
class FakeTable:
    """One table of the stack's definition in memory, and the client its adapters call."""

    store: MemoryDynamoDB = field(default_factory=MemoryDynamoDB)
    name: str = TABLE_NAME
    client: FaultyClient = field(init=False)

    def __post_init__(self) -> None:
        self.store.create_table(**table_definition(self.name))
        self.client = FaultyClient(self.store)

    @property
    def boto(self) -> Any:
        """The client as the adapters take it (the boto3 DynamoDB client's calls)."""
        return self.client

    @property
    def raw(self) -> Any:
        """The store itself, called as the boto3 client is, without faults (to seed)."""
        return self.store

    def items(self, kind: str) -> list[Any]:
        """The stored items of one kind (the ``kind`` attribute), in key order."""
        return [
            item
            for item in self.store.items(self.name)
            if item.get(table_layout.KIND_ATTRIBUTE) == {"S": kind}
        ]

    def keyed(
        self, kind: str, parse: Callable[[dynamodb_items.Item], Any]
    ) -> dict[tuple[str, str], Any]:
        """The records of one kind by (delivery id, name): the sort key after its ``#``."""
        return {
            (
                item[table_layout.TABLE_PARTITION_KEY]["S"],
                item[table_layout.TABLE_SORT_KEY]["S"].split("#", 1)[1],
            ): parse(item)
            for item in self.items(kind)
        }


# --- The receiver's ports -------------------------------------------------------------


class FakeInbox(DynamoDbInbox):
    """:class:`functions.core.ports.inbox.InboxWriter`: the DynamoDB adapter in memory,
    with countable calls. ``fail`` fails every write, ``fail_quarantine`` only the
    quarantine write (both as a throttled table, with no retry budget left)."""

    def __init__(self, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(self.table.boto, self.table.name, retry=StorageRetry(budget_seconds=0.0))
        self.calls = 0
        self.fail = False
        self.fail_quarantine = False

    def record(self, *args: Any, **kwargs: Any) -> InboxItem | None:
        self.calls += 1
        self.table.client.down = self.fail
        try:
            return super().record(*args, **kwargs)
        finally:
            self.table.client.down = False

    def quarantine(self, record: QuarantineRecord) -> None:
        self.calls += 1
        self.table.client.down = self.fail or self.fail_quarantine
        try:
            super().quarantine(record)
        finally:
            self.table.client.down = False

    @property
    def inbox(self) -> dict[str, InboxItem]:
        items = self.table.items(table_layout.KIND_INBOX)
        return {i["delivery_id"]["S"]: dynamodb_items.inbox_from_item(i) for i in items}

    @property
    def outbox(self) -> dict[str, WorkItem]:
        items = self.table.items(table_layout.KIND_OUTBOX)
        return {i["delivery_id"]["S"]: dynamodb_items.work_item_from_outbox(i) for i in items}

    @property
    def quarantined(self) -> dict[tuple[str, str], QuarantineRecord]:
        records = map(
            dynamodb_items.quarantine_from_item, self.table.items(table_layout.KIND_QUARANTINE)
        )
        return {(r.delivery_id, r.received_sha256): r for r in records}

    def stored(self, delivery_id: str) -> tuple[InboxItem, WorkItem | None] | None:
        """The inbox item and its work item, as one transaction wrote them."""
        inbox = self.inbox.get(delivery_id)
        return None if inbox is None else (inbox, self.outbox.get(delivery_id))

    def empty(self) -> bool:
        return not self.table.store.items(self.table.name)

    def clear(self) -> None:
        for item in self.table.store.items(self.table.name):
            key = {
                k: item[k] for k in (table_layout.TABLE_PARTITION_KEY, table_layout.TABLE_SORT_KEY)
            }
            self.table.raw.delete_item(TableName=self.table.name, Key=key)


@dataclass
class FakeSecrets:
    """:class:`functions.core.ports.secrets.SigningSecretSource` in memory; ``secrets``
    may change."""

    secrets: Sequence[str]
    calls: int = 0
    fail: bool = False

    def current(self) -> Sequence[SigningSecret]:
        self.calls += 1
        if self.fail:
            raise SigningSecretsUnavailable()
        return [SigningSecret.parse(s) for s in self.secrets]


# --- The processing ports -------------------------------------------------------------


class FakeClaims(DynamoDbClaims):
    """The inbox's processing state: the DynamoDB adapter in memory (also the reconciler's
    recovery store), with helpers to seed and read the inbox items."""

    def __init__(self, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(client=self.table.boto, table_name=self.table.name)

    def add(self, item: InboxItem, *, listed: bool = True) -> None:
        """Put ``item`` as the receiver would have (with its receipt in the received log,
        unless it was ignored), listed in the state index as the reconciler lists an open
        item (``listed=False``: as the receiver writes it, not listed yet)."""
        store, table = self.table.raw, self.table.name
        store.put_item(TableName=table, Item=dynamodb_items.inbox_to_item(item))
        if item.package_id is not None and item.mcp_url is not None:
            receipt = dynamodb_items.outbox_to_item(
                WorkItem(item.delivery_id, item.event, item.package_id, item.mcp_url),
                created_at=item.received_at,
                expires_at=item.expires_at,
                shards=table_layout.DEFAULT_RECEIVED_LOG_SHARDS,
            )
            store.put_item(TableName=table, Item=receipt)
        if listed and item.state in dynamodb_items.OPEN_STATES:
            moved = transitions.apply(
                store, table, transitions.LIST_OPEN, item.delivery_id, now=0,
                listed=item.received_at,
            )  # fmt: skip
            assert moved.moved

    def expire(self, delivery_id: str) -> None:
        """Delete the inbox item, as its time to live does."""
        key = dynamodb_items.inbox_key(delivery_id)
        self.table.raw.delete_item(TableName=self.table.name, Key=key)

    def _inbox(self) -> list[dynamodb_items.Item]:
        return self.table.items(table_layout.KIND_INBOX)

    @property
    def items(self) -> dict[str, InboxItem]:
        """The inbox items by delivery id (a copy: seed with :meth:`add`)."""
        return {i["delivery_id"]["S"]: dynamodb_items.inbox_from_item(i) for i in self._inbox()}

    @property
    def owners(self) -> dict[str, str]:
        """The lease owner of each item in processing."""
        return {
            i["delivery_id"]["S"]: i["lease_owner"]["S"]
            for i in self._inbox()
            if "lease_owner" in i and i["state"]["S"] == State.PROCESSING.value
        }

    @property
    def unlisted(self) -> set[str]:
        """The open items the state index does not list (yet)."""
        return {
            i["delivery_id"]["S"]
            for i in self._inbox()
            if State(i["state"]["S"]) in dynamodb_items.OPEN_STATES
            and not dynamodb_items.is_listed(i)
        }

    @property
    def cursor(self) -> OpenCursor | None:
        """Where the reconciler's open pass resumes, as the table keeps it."""
        return self.open_cursor()


class FakeReceivedLog(DynamoDbReceivedLog):
    """The received log over :class:`FakeClaims`'s table: the DynamoDB adapter.

    ``windows`` records each window read. ``fail_advance``: the next advances raise (a
    crash after the listing, before the watermark moved). ``fail_window``: reading the
    window of that (1-based) number raises (storage weather in the middle of a run).
    Read shard by shard: ``windows_by_shard`` records each shard's windows; ``fail_shard``:
    reading that shard raises; ``rendezvous``: each shard's first read waits there."""

    def __init__(self, claims: FakeClaims, *, shards: int = 8) -> None:
        self.table = claims.table
        super().__init__(client=self.table.boto, table_name=self.table.name, shards=shards)
        self.windows: list[tuple[int, int]] = []
        self.fail_advance = 0
        self.fail_window: int | None = None
        self.fail_shard: int | None = None
        self.rendezvous: threading.Barrier | None = None
        self.windows_by_shard: dict[int, list[tuple[int, int]]] = {}
        self._seen = threading.Lock()

    @property
    def mark(self) -> int | None:
        """The stored watermark."""
        return read_watermark(self.table.raw, self.table.name)

    def unlisted_open_pages(
        self, *, since: int, before: int, page_size: int, shard: int | None = None
    ) -> Iterator[list[InboxItem]]:
        with self._seen:
            self.windows.append((since, before))
            first = shard is not None and shard not in self.windows_by_shard
            if shard is not None:
                self.windows_by_shard.setdefault(shard, []).append((since, before))
            failing = len(self.windows) == self.fail_window
        if first and self.rendezvous is not None:
            self.rendezvous.wait()  # (its timeout breaks it: read one after another)
        if failing or (shard is not None and shard == self.fail_shard):
            raise StorageUnavailable("throttled")
        return super().unlisted_open_pages(
            since=since, before=before, page_size=page_size, shard=shard
        )

    def shard_mark(self, shard: int) -> int | None:
        """The stored watermark of one shard (None: it has none)."""
        item = self.table.raw.get_item(
            TableName=self.table.name, Key=dynamodb_items.received_watermark_key(shard)
        ).get("Item")
        return None if item is None else int(item["received_before"]["N"])

    def advance(self, watermark: int) -> None:
        if self.fail_advance:
            self.fail_advance -= 1
            raise StorageUnavailable()
        super().advance(watermark)


@dataclass
class FakeCursorWrites:
    """How the table answers a cursor save: ``lose_answers`` next saves are applied and
    then raise ``StorageUnavailable`` (the answer lost); ``saved`` counts those applied."""

    client: FaultyClient
    lose_answers: int = 0
    saved: int = 0

    def save(self, apply: Callable[[], None]) -> None:
        losing = bool(self.lose_answers)
        if losing:
            self.lose_answers -= 1
            self.client.lose_next()
        try:
            apply()
        except StorageUnavailable:
            if losing and not self.client.armed():
                self.saved += 1  # applied; only its answer was lost
            raise
        finally:
            self.client.disarm()
        self.saved += 1


class FakeEffects(DynamoDbEffects):
    """The effect store: the DynamoDB adapter in memory."""

    def __init__(self, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(client=self.table.boto, table_name=self.table.name)
        self.cursor_writes = FakeCursorWrites(self.table.client)

    @property
    def records(self) -> dict[tuple[str, str], EffectRecord]:
        return self.table.keyed(table_layout.KIND_EFFECT, effect_from_item)

    @property
    def cursor(self) -> IntentCursor | None:
        """Where the reconciler's pass over the intents resumes, as the table keeps it."""
        return self.intent_cursor()

    def save_intent_cursor(self, cursor: IntentCursor | None) -> None:
        self.cursor_writes.save(lambda: DynamoDbEffects.save_intent_cursor(self, cursor))


@dataclass
class FakeQueue:
    """``refuse`` holds delivery ids whose batch entries the queue refuses."""

    sent: list[tuple[WorkItem, int]] = field(default_factory=list)
    visibility: list[tuple[str, int]] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)  # (body, reason)
    dead_failures: list[str | None] = field(default_factory=list)  # each letter's failure
    refuse: set[str] = field(default_factory=set)
    batches: list[int] = field(default_factory=list)  # the size of each batch sent

    def send(self, work: WorkItem, *, delay_seconds: int = 0) -> None:
        self.sent.append((work, delay_seconds))

    def send_batch(self, works: Sequence[WorkItem]) -> list[UnsentWork]:
        self.batches.append(len(works))
        self.sent += [(w, 0) for w in works if w.delivery_id not in self.refuse]
        return [
            UnsentWork(w, reason="InternalError") for w in works if w.delivery_id in self.refuse
        ]

    def change_visibility(self, receipt_handle: str, *, seconds: int) -> None:
        self.visibility.append((receipt_handle, seconds))

    def dead_letter(self, body: str, *, reason: str, failure: str | None = None) -> None:
        self.dead.append((body, reason))
        self.dead_failures.append(failure)


@dataclass
class FakeMetrics:
    counts: Counter[str] = field(default_factory=Counter)
    durations: dict[str, list[float]] = field(default_factory=dict)

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value

    def seconds(self, name: str, value: float) -> None:
        self.durations.setdefault(name, []).append(value)


class FakeSteps(DynamoDbSteps):
    """The step records: the DynamoDB adapter in memory."""

    def __init__(self, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(client=self.table.boto, table_name=self.table.name)

    @property
    def records(self) -> dict[tuple[str, str], StepRecord]:
        return self.table.keyed(KIND_STEP, step_from_item)


class FakePackageRecords:
    """Package records: the DynamoDB adapter over the claims' table, whose record checks
    the claim's holder on the inbox item in one transaction, as deployed. ``claims`` may
    be set later (tests swap it); ``lose_answers``: that many next records commit, then
    their answer is lost."""

    def __init__(self, claims: FakeClaims | None = None) -> None:
        self.claims = claims
        self.lose_answers = 0
        self._own = FakeTable()

    def _table(self) -> FakeTable:
        return self.claims.table if self.claims is not None else self._own

    def _adapter(self) -> DynamoDbPackageRecords:
        table = self._table()
        return DynamoDbPackageRecords(client=table.boto, table_name=table.name)

    def get(self, delivery_id: str) -> PackageRecord | None:
        return self._adapter().get(delivery_id)

    def record(
        self, claim: Claim, record: PackageRecord, *, expires_at: int
    ) -> PackageRecord | None:
        if self.lose_answers:
            self.lose_answers -= 1
            self._table().client.lose_next()
        return self._adapter().record(claim, record, expires_at=expires_at)

    def record_refetch(self, delivery_id: str, *, digest: str, now: int) -> None:
        self._adapter().record_refetch(delivery_id, digest=digest, now=now)


@dataclass
class FakeObjects:
    objects: dict[str, bytes] = field(default_factory=dict)

    def put(self, key: str, body: bytes) -> None:
        self.objects[key] = body

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)


class FakeBudget(DynamoDbBudget):
    """The token budget: the DynamoDB adapter in memory. ``default_limit`` may change
    (the deploy's setting)."""

    def __init__(self, default_limit: int, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(
            client=self.table.boto, table_name=self.table.name, default_limit=default_limit
        )

    @property
    def default_limit(self) -> int:
        return self._default_limit

    @default_limit.setter
    def default_limit(self, tokens: int) -> None:
        self._default_limit = tokens

    @property
    def days(self) -> dict[str, BudgetDay]:
        """The days opened so far."""
        days = {}
        for item in self.table.items(dynamodb_budget.KIND_BUDGET):
            key = item[table_layout.TABLE_PARTITION_KEY]["S"]
            if key != dynamodb_budget.LIMIT_PK:
                day = key.removeprefix(dynamodb_budget.DAY_PK_PREFIX)
                days[day] = dynamodb_budget.day_from_item(day, item)
        return days


# --- The approval gate -----------------------------------------------------------------


class FakeApprovals(DynamoDbApprovals):
    """The approval records: the DynamoDB adapter in memory, deciding over
    :class:`FakeClaims`'s table in its transaction.

    ``lose_answers``: that many next decisions commit and then raise
    ``StorageUnavailable`` (the answer lost); ``fail_decisions``: that many raise it
    without committing. ``lose_requests`` does the same to the record's first put.
    """

    def __init__(self, claims: FakeClaims) -> None:
        self.claims = claims
        self.table = claims.table
        super().__init__(client=self.table.boto, table_name=self.table.name)
        self.lose_answers = 0
        self.fail_decisions = 0
        self.lose_requests = 0
        self.cursor_writes = FakeCursorWrites(self.table.client)

    def request(self, record: ApprovalRecord, *, expires_at: int) -> bool:
        if self.lose_requests:
            self.table.client.lose_next()
        try:
            return super().request(record, expires_at=expires_at)
        except StorageUnavailable:
            self.lose_requests -= 1
            raise
        finally:
            self.table.client.disarm()

    def decide(self, delivery_id: str, name: str, decision: Decision) -> bool:
        if self.fail_decisions:
            self.fail_decisions -= 1
            self.table.client.fail_next()
        elif self.lose_answers:
            self.table.client.lose_next()
        try:
            return super().decide(delivery_id, name, decision)
        except StorageUnavailable:
            if self.lose_answers and not self.table.client.armed():
                self.lose_answers -= 1
            raise
        finally:
            self.table.client.disarm()

    @property
    def records(self) -> dict[tuple[str, str], ApprovalRecord]:
        return self.table.keyed(table_layout.KIND_APPROVAL, approval_from_item)

    @property
    def cursor(self) -> OpenCursor | None:
        """Where the reconciler's pass over the parked items resumes."""
        return self.waiting_cursor()

    def save_waiting_cursor(self, cursor: OpenCursor | None) -> None:
        self.cursor_writes.save(lambda: DynamoDbApprovals.save_waiting_cursor(self, cursor))


class FakeSpend(DynamoDbSpend):
    """The spend records: the DynamoDB adapter in memory.

    ``lost_answers = n``: the next ``n`` writes commit and then raise
    ``StorageUnavailable`` (their answer was lost); ``table.client.fail_next`` refuses
    the next writes.
    """

    def __init__(self, table: FakeTable | None = None) -> None:
        self.table = table or FakeTable()
        super().__init__(client=self.table.boto, table_name=self.table.name)

    @property
    def lost_answers(self) -> int:
        return self.table.client.armed()

    @lost_answers.setter
    def lost_answers(self, count: int) -> None:
        self.table.client.disarm()
        self.table.client.lose_next(count)

    @property
    def calls(self) -> dict[str, set[str]]:
        """The model call ids sent for each delivery."""
        return {
            item["delivery_id"]["S"]: set(item["calls"]["SS"])
            for item in self.table.items(dynamodb_spend.KIND_SPEND)
            if "calls" in item
        }
