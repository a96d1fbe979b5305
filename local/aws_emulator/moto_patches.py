"""moto's faster paths (transactions, queries, expressions, item sizes, plain answers,
queue counts), each patched once per process and on only while an emulator runs."""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import functools
import importlib
import json
import weakref
from collections.abc import Callable, Iterator
from typing import Any

# moto's backends are process-wide: the faster paths are on only while an emulator
# runs, so that in-process moto tests (mock_aws) keep moto's own implementation.
fast_path_users: list[object] = []


def install_patches() -> None:
    """Every faster path of the package doc (each patches once per process)."""
    install_fast_transactions()
    install_fast_queries()
    install_request_caches()
    install_fast_update_validation()
    install_fast_tree_walks()
    install_condition_templates()
    install_one_size_check_per_item()
    install_plain_dynamodb_answers()
    install_plain_stream_records()
    install_sqs_without_recounts()


@contextlib.contextmanager
def faster_paths() -> Iterator[None]:
    """The emulator's faster paths for in-process moto (``mock_aws``) in the block: a
    benchmark that seeds a large table measures our code, not moto's full scans."""
    install_patches()
    user = object()
    fast_path_users.append(user)
    try:
        yield
    finally:
        fast_path_users.remove(user)


@functools.cache  # patch once per process
def install_fast_transactions() -> None:
    """Replace moto's ``transact_write_items`` with a copy-free path (see module doc)."""
    from moto.dynamodb.comparisons import get_filter_expression  # noqa: PLC0415
    from moto.dynamodb.exceptions import (  # noqa: PLC0415
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415

    copying = DynamoDBBackend.transact_write_items

    def check_then_apply(self: Any, transact_items: list[dict[str, Any]]) -> None:
        operations = [next(iter(item.items())) for item in transact_items if len(item) == 1]
        simple = (
            bool(fast_path_users)
            and len(operations) == len(transact_items) <= 100
            and all(kind in ("Put", "Delete", "ConditionCheck") for kind, _ in operations)
        )
        if not simple:
            copying(self, transact_items)
            return
        keys: set[tuple[str, str]] = set()
        reasons: list[tuple[str | None, str | None, Any]] = []
        for kind, op in operations:
            table = self.get_table(op["TableName"])
            if kind == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            marker = (op["TableName"], json.dumps(key, sort_keys=True))
            if marker in keys:
                raise MultipleTransactionsException()
            keys.add(marker)
            current = self.get_item(op["TableName"], key)
            condition = op.get("ConditionExpression")
            holds = condition is None or get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            ).expr(current)
            if holds:
                reasons.append((None, None, None))
                continue
            old = None
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                old = current.to_json()["Attributes"]
            reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        for kind, op in operations:
            if kind == "Put":
                self.put_item(op["TableName"], op["Item"])
            elif kind == "Delete":
                self.delete_item(op["TableName"], op["Key"])

    DynamoDBBackend.transact_write_items = check_then_apply  # type: ignore[method-assign]


# During a Query: (the table, the partition it names or None, an index's key conditions).
_query_scope: contextvars.ContextVar[tuple[Any, Any, list[tuple[str, Any]]] | None] = (
    contextvars.ContextVar("query_scope", default=None)
)


def _has(item: Any, key: tuple[str, Any]) -> bool:
    """Whether the item's attribute ``key[0]`` is ``key[1]`` (a moto ``DynamoType``)."""
    value = item.attrs.get(key[0])
    return value is not None and bool(value == key[1])


_ItemKey = tuple[Any, Any]  # an item's (hash, range) key in moto's table (range None: none)


class _IndexEntries:
    """A table's items by the value of each global index's partition key attribute.

    Built at the first index query, then kept: every write to the table (moto's
    ``put_item``/``delete_item`` of the table, the backend's in-place ``update_item``)
    marks its key, and the next index query files each marked item again as it is
    then. So a query reads the one index partition it names, not the whole table.
    """

    def __init__(self, table: Any) -> None:
        self.attributes = sorted(
            {
                key["AttributeName"]
                for index in table.global_indexes
                for key in index.schema
                if key["KeyType"] == "HASH"
            }
        )
        self.keys: dict[tuple[str, Any], dict[_ItemKey, None]] = {}
        self.filed: dict[_ItemKey, list[tuple[str, Any]]] = {}
        self.marked: set[_ItemKey] = set()
        for item in _every_item(table):
            self._file((item.hash_key, item.range_key), item)

    def _file(self, key: _ItemKey, item: Any) -> None:
        values = [(name, item.attrs[name]) for name in self.attributes if name in item.attrs]
        for value in values:
            self.keys.setdefault(value, {})[key] = None
        if values:
            self.filed[key] = values

    def items(self, table: Any, attribute: str, value: Any) -> list[Any]:
        for key in self.marked:
            for old in self.filed.pop(key, []):
                self.keys.get(old, {}).pop(key, None)
            item = _table_item(table, key)
            if item is not None:
                self._file(key, item)
        self.marked.clear()
        found = (_table_item(table, key) for key in self.keys.get((attribute, value), {}))
        return [item for item in found if item is not None]


_index_entries: weakref.WeakKeyDictionary[Any, _IndexEntries] = weakref.WeakKeyDictionary()


def _every_item(table: Any) -> Iterator[Any]:
    for partition in table.items.values():
        if table.range_key_attr is None:
            yield partition
        else:
            yield from partition.values()


def _table_item(table: Any, key: _ItemKey) -> Any:
    partition = table.items.get(key[0])
    if partition is None or table.range_key_attr is None:
        return partition
    return partition.get(key[1])


def _mark(table: Any, key: _ItemKey) -> None:
    entries = _index_entries.get(table)
    if entries is not None:
        entries.marked.add(key)


@functools.cache  # patch once per process
def install_index_marks() -> None:
    """Mark each written key in its table's :class:`_IndexEntries` (when it has them)."""
    from moto.dynamodb.exceptions import MockValidationException  # noqa: PLC0415
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    moto_put = Table.put_item
    moto_delete = Table.delete_item
    moto_update = DynamoDBBackend.update_item

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = moto_put(self, *args, **kwargs)
        _mark(self, (item.hash_key, item.range_key))
        return item

    def delete_item(self: Any, hash_key: Any, range_key: Any = None) -> Any:
        _mark(self, (hash_key, range_key))
        return moto_delete(self, hash_key, range_key)

    def update_item(self: Any, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Any:
        table = self.tables.get(table_name)
        item_key = None
        if table is not None and table in _index_entries:
            with contextlib.suppress(MockValidationException):  # moto refuses it below
                item_key = self.get_keys_value(table, key)
        try:
            return moto_update(self, table_name, key, *args, **kwargs)
        finally:  # moto updates in place: even a refused update is filed again
            if item_key is not None:
                _mark(table, item_key)

    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


@functools.cache  # patch once per process
def install_fast_queries() -> None:
    """Make moto's ``Query`` read without sorting the table (see module doc).

    moto's ``Table.query`` gathers candidates from ``all_items()``, which sorts the
    whole table, then checks and sorts the candidates itself. During a query (and only
    while an emulator runs) ``all_items()`` of that table returns, unsorted, the
    partition it names, or on a global index the items filed under the query's index
    partition key value (:class:`_IndexEntries`; moto checks them again); the scan and
    everything else keep the sorted list.
    """
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    install_index_marks()
    sorted_items = Table.all_items
    moto_query = Table.query

    def all_items(self: Any) -> list[Any]:
        scope = _query_scope.get()
        if scope is None or scope[0] is not self:
            return sorted_items(self)
        _, partition_key, index_keys = scope
        if partition_key is None and index_keys and self.global_indexes:
            entries = _index_entries.get(self)
            if entries is None:
                entries = _index_entries[self] = _IndexEntries(self)
            attribute, value = index_keys[0]
            if attribute in entries.attributes:
                return entries.items(self, attribute, value)
        partitions = self.items.values()
        if partition_key is not None:
            partitions = [self.items[partition_key]] if partition_key in self.items else []
        if self.range_key_attr is None:
            items = list(partitions)
        else:
            items = [item for partition in partitions for item in partition.values()]
        return [item for item in items if all(_has(item, key) for key in index_keys)]

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        if not fast_path_users:
            return moto_query(self, hash_key, *args, **kwargs)
        # Positional as moto's backend calls it: index_name is the 8th argument.
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        index_keys = list(kwargs.get("hash_key_conditions") or []) if index_name else []
        scope = (self, None if index_name else hash_key, index_keys)
        token = _query_scope.set(scope)
        try:
            return moto_query(self, hash_key, *args, **kwargs)
        finally:
            _query_scope.reset(token)

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]


@functools.cache  # patch once per process
def install_request_caches() -> None:
    """Remember what moto recomputes on every request (see module doc).

    For the emulator's process only (``main``, or an in-process emulator's start):
    the answers are pure functions of their arguments, so the cache changes no
    answer; an update expression's parse tree is only read by moto's callers (its
    validator works on a deep copy).
    """
    # Typed Any: moto's stubs do not export these names.
    backends: Any = importlib.import_module("moto.backends")
    responses: Any = importlib.import_module("moto.core.responses")
    parser: Any = importlib.import_module("moto.dynamodb.parsing.expressions")

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    responses.method_names_from_class = functools.cache(responses.method_names_from_class)
    parse = functools.lru_cache(maxsize=256)(parser.UpdateExpressionParser.make)
    parser.UpdateExpressionParser.make = staticmethod(parse)


# Update expressions whose expression-only checks passed: (the parse tree's pickle, the
# attribute names, the table's key attributes).
_checked_updates: set[tuple[bytes, tuple[tuple[str, str], ...], tuple[str, ...]]] = set()
MAX_REMEMBERED_EXPRESSIONS = 256
ITEM_SIZE_LIMIT = 405000  # moto's (DynamoDB's 400 KB, as moto measures it)


@functools.cache  # patch once per process
def install_fast_update_validation() -> None:
    """Validate an ``UpdateItem``'s expression without moto's repeated work (see module doc).

    moto's validator deep-copies the cached parse tree, then walks it with ten
    processors. Here the copy is unpickled from the tree's pickle (made once per tree;
    the cached tree is never changed, see :func:`install_request_caches`); the three
    processors that read only the expression, its attribute names and the table's key
    attributes (action counts, overlapping paths, key attributes) run once for each
    combination that passes them (they change nothing, they raise or not); the other
    seven run as before, on every request.
    """
    import pickle  # noqa: PLC0415

    # Typed Any: moto's stubs do not export these names.
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    nodes: Any = importlib.import_module("moto.dynamodb.parsing.ast_nodes")
    expression_only = (
        validators.ActionCountValidator,
        validators.OverlappingPathsValidator,
        validators.UpdateHashRangeKeyValidator,
    )
    moto_copy = validators.deepcopy
    moto_init = validators.Validator.__init__
    moto_validate = validators.Validator.validate
    pickled: dict[int, tuple[Any, bytes]] = {}  # id(tree) -> (tree, its pickle)

    def pickle_of(tree: Any) -> bytes:
        entry = pickled.get(id(tree))
        if entry is None or entry[0] is not tree:
            if len(pickled) >= MAX_REMEMBERED_EXPRESSIONS:
                pickled.clear()
            entry = pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
        return entry[1]

    def copy(value: Any, memo: Any = None) -> Any:
        # The validator's copy of a whole parse tree; anything else as moto copies it.
        if fast_path_users and type(value) is nodes.UpdateExpression:
            return pickle.loads(pickle_of(value))  # noqa: S301 (our own pickle of moto's tree)
        return moto_copy(value, memo)

    def init(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        moto_init(self, expression, *args, **kwargs)
        self.relaylink_tree = expression

    def validate(self: Any) -> Any:
        tree = getattr(self, "relaylink_tree", None)
        if not fast_path_users or type(tree) is not nodes.UpdateExpression:
            return moto_validate(self)
        key = (
            pickle_of(tree),
            tuple(sorted((self.expression_attribute_names or {}).items())),
            tuple(self.table.table_key_attrs),
        )
        checked = key in _checked_updates
        node = self.node_to_validate
        for processor in self.processors:
            if not (checked and isinstance(processor, expression_only)):
                node = processor.traverse(node)
        if not checked:
            if len(_checked_updates) >= MAX_REMEMBERED_EXPRESSIONS:
                _checked_updates.clear()
            _checked_updates.add(key)
        return node

    validators.deepcopy = copy
    validators.Validator.__init__ = init
    validators.Validator.validate = validate


@functools.cache  # patch once per process
def install_fast_tree_walks() -> None:
    """moto's ``traverse_node_recursively``, with its two type tests (each through
    ``ABCMeta``) answered once per node class and processor class: every processor's
    node classes are the keys of a literal map (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    nodes: Any = importlib.import_module("moto.dynamodb.parsing.ast_nodes")
    traverser = nodes.DepthFirstTraverser
    moto_traverse = traverser.traverse_node_recursively
    is_node: dict[type, bool] = {}
    wanted: dict[tuple[type, type], bool] = {}

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        if not fast_path_users:
            return moto_traverse(self, node, child_id)
        kind = type(node)
        if kind not in is_node:
            is_node[kind] = isinstance(node, nodes.Node)
        if not is_node[kind]:
            return node
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        pair = (type(self), kind)
        if pair not in wanted:
            wanted[pair] = isinstance(node, self.nodes_to_be_processed())
        if wanted[pair]:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    traverser.traverse_node_recursively = traverse_node_recursively


@functools.cache  # patch once per process
def install_condition_templates() -> None:
    """Parse a condition expression once per expression and attribute names (see
    module doc).

    moto parses a condition (or filter) expression on every request, twice for a
    conditional write, and writes each ``:value``'s value into its syntax tree as it
    reads the text. The tree of the first successful parse is kept (its nodes are
    tuples, never changed); a later request with the same expression and names gets a
    copy with its own values, then moto's own last step makes the condition. A request
    whose values the copy cannot take (a missing value) is parsed by moto from scratch,
    so it fails exactly as it would have.
    """
    # Typed Any: moto's stubs do not export these names.
    comparisons: Any = importlib.import_module("moto.dynamodb.comparisons")
    parser_class = comparisons.ConditionExpressionParser
    value_kind = parser_class.Kind.EXPRESSION_ATTRIBUTE_VALUE
    moto_parse = parser_class.parse
    trees: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}

    def with_values(parser: Any, node: Any) -> Any:
        if node.kind == value_kind:
            return node._replace(value=parser._lookup_expression_attribute_value(node.text))
        if not node.children:
            return node
        return node._replace(children=[with_values(parser, child) for child in node.children])

    def parse(self: Any) -> Any:
        if not fast_path_users or not self.condition_expression:
            return moto_parse(self)
        key = (
            self.condition_expression,
            tuple(sorted((self.expression_attribute_names or {}).items())),
        )
        tree = trees.get(key)
        if tree is None:
            make_op = self._make_op_condition
            roots: list[Any] = []

            def first_is_root(node: Any) -> Any:
                if not roots:
                    roots.append(node)
                return make_op(node)

            self._make_op_condition = first_is_root  # moto's last step, given the tree
            try:
                op = moto_parse(self)
            finally:
                del self._make_op_condition
            if len(trees) >= MAX_REMEMBERED_EXPRESSIONS:
                trees.clear()
            trees[key] = roots[0]
            return op
        try:
            node = with_values(self, tree)
        except Exception:  # noqa: BLE001 (moto's parse raises what it would have)
            return moto_parse(self)
        self.expr_attr_names_found.extend(self._find_literals(node))
        self.expr_attr_values_found.extend(self._find_expr_attr_values(node))
        return self._make_op_condition(node)

    parser_class.parse = parse


@functools.cache  # patch once per process
def install_one_size_check_per_item() -> None:
    """Build an item checking its size once, not once per attribute (see module doc).

    moto's item dict checks, as each attribute goes in, that the attributes already in
    plus the new one stay under DynamoDB's limit, each time measuring every one of them:
    quadratic in the attributes. Sizes are never negative, so while an item is built
    the last check is the largest: it alone decides. An item whose attributes moto
    refuses (too large, or a value it cannot read) is built by moto's own code, so it
    fails exactly as it would have.
    """
    # Typed Any: moto's stubs do not export these names.
    types: Any = importlib.import_module("moto.dynamodb.models.dynamo_type")
    utilities: Any = importlib.import_module("moto.dynamodb.models.utilities")
    item_class, limited, dynamo_type = types.Item, types.LimitedSizeDict, types.DynamoType
    moto_init = item_class.__init__

    def size_of(value: Any) -> int:  # as LimitedSizeDict measures keys and values
        return int(value.size() if type(value) is dynamo_type else utilities.bytesize(str(value)))

    def init(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        if not fast_path_users:
            moto_init(self, hash_key, range_key, attrs)
            return
        built = limited.__new__(limited)
        dict.__init__(built)
        try:
            for key, value in attrs.items():
                dict.__setitem__(built, key, dynamo_type(value))
            fits = sum(size_of(k) + size_of(v) for k, v in built.items()) <= ITEM_SIZE_LIMIT
        except Exception:  # noqa: BLE001 (moto's own build raises what it would have)
            fits = False
        if not fits:
            moto_init(self, hash_key, range_key, attrs)
            return
        self.hash_key = hash_key
        self.range_key = range_key
        self.attrs = built

    item_class.__init__ = init


# The item operations whose answers may skip the serializer's walk.
PLAIN_ANSWERS = frozenset(
    {
        "BatchGetItem",
        "BatchWriteItem",
        "DeleteItem",
        "GetItem",
        "PutItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "TransactWriteItems",
        "UpdateItem",
    }
)
_BINARY_TYPES = frozenset({"B", "BS"})


class _NotPlain(Exception):
    """A value the serializer must convert (bytes, a date, an object, a binary attribute)."""


def _plain(value: Any, timestamp: Callable[[Any], Any] | None = None) -> Any:
    """``value`` as JSON data, maps without None members (as the serializer drops them);
    with ``timestamp``, a ``datetime`` becomes what it returns.

    Raises:
        _NotPlain: it holds anything else.
    """
    if isinstance(value, dict):
        if _BINARY_TYPES.intersection(value):
            raise _NotPlain
        return {str(k): _plain(v, timestamp) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v, timestamp) for v in value]
    if isinstance(value, str | bool | int | float):
        return value
    if timestamp is not None and isinstance(value, datetime.datetime):
        return timestamp(value)
    raise _NotPlain


def _framed(context: Any, result: Any, plain: Any) -> tuple[Any, Any, Any]:
    """The answer moto's serializer would give ``result``, from its JSON data ``plain``:
    the serializer's own framing (status, content type, body) without its walk."""
    # Typed Any: moto's stubs do not export these names.
    serialize: Any = importlib.import_module("moto.core.serialize")
    settings: Any = importlib.import_module("moto.settings")
    operation = context.operation_model
    serializer = context.serializer_class(
        operation_model=operation,
        pretty_print=settings.PRETTIFY_RESPONSES,
        value_picker=serialize.XFormedAttributePicker(),
    )
    answer = serializer._serialized_result_to_response(
        serializer._create_default_response(), result, operation.output_shape, plain
    )
    return answer["status_code"], answer["headers"], answer["body"]


@functools.cache  # patch once per process
def install_plain_dynamodb_answers() -> None:
    """Write plain DynamoDB item answers without the serializer's walk (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    responses: Any = importlib.import_module("moto.dynamodb.responses")
    moto_answer = responses.DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        operation = context.operation_model
        if not fast_path_users or str(operation.name) not in PLAIN_ANSWERS:
            return moto_answer(self, context)
        try:
            plain = _plain(self.result)
        except _NotPlain:
            return moto_answer(self, context)
        return _framed(context, self.result, plain)

    responses.DynamoResult.execute_result = execute_result


@functools.cache  # patch once per process
def install_plain_stream_records() -> None:
    """Write ``GetRecords`` answers without the serializer's walk (see module doc).

    A stream record is plain JSON data but for its ``ApproximateCreationDateTime``, which
    becomes epoch seconds as the serializer writes it (the JSON protocols' default
    format; the shape sets no other).
    """
    # Typed Any: moto's stubs do not export these names.
    core: Any = importlib.import_module("moto.core.responses")
    streams: Any = importlib.import_module("moto.dynamodbstreams.responses")
    serialize: Any = importlib.import_module("moto.core.serialize")
    unix_seconds = serialize.TimestampSerializer._timestamp_unixtimestamp
    moto_get_records = streams.DynamoDBStreamsHandler.get_records

    class PlainRecords(core.ActionResult):  # type: ignore[misc]
        def execute_result(self, context: Any) -> Any:
            if not fast_path_users:
                return super().execute_result(context)
            try:
                plain = _plain(self.result, unix_seconds)
            except _NotPlain:
                return super().execute_result(context)
            return _framed(context, self.result, plain)

    def get_records(self: Any) -> Any:
        return PlainRecords(moto_get_records(self).result)

    streams.DynamoDBStreamsHandler.get_records = get_records


_counts_wanted: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "counts_wanted", default=False
)


@functools.cache  # patch once per process
def install_sqs_without_recounts() -> None:
    """Compute a queue's approximate counts only when asked for (see module doc)."""
    # Typed Any: moto's stubs do not export these names.
    models: Any = importlib.import_module("moto.sqs.models")
    queue_class, backend_class = models.Queue, models.SQSBackend
    without_counts = [
        name for name in queue_class.BASE_ATTRIBUTES if not name.startswith("Approximate")
    ]
    moto_attributes = queue_class.attributes.fget
    moto_get_attributes = backend_class.get_queue_attributes

    def attributes(self: Any) -> dict[str, Any]:
        if _counts_wanted.get() or not fast_path_users:
            return dict(moto_attributes(self))
        self.BASE_ATTRIBUTES = without_counts  # this queue, this request (under the lock)
        try:
            return dict(moto_attributes(self))
        finally:
            del self.BASE_ATTRIBUTES

    def get_queue_attributes(self: Any, queue_name: str, names: list[str]) -> Any:
        wanted = any(name == "All" or name.startswith("Approximate") for name in names or ())
        token = _counts_wanted.set(wanted)
        try:
            return moto_get_attributes(self, queue_name, names)
        finally:
            _counts_wanted.reset(token)

    queue_class.attributes = property(attributes)
    backend_class.get_queue_attributes = get_queue_attributes
