"""DynamoDB's expression language: parsed once per text, evaluated per request.

Condition, filter and key-condition expressions share one grammar (comparisons,
``BETWEEN``, ``IN``, ``AND``/``OR``/``NOT``, the functions ``attribute_exists``,
``attribute_not_exists``, ``attribute_type``, ``begins_with``, ``contains``,
``size``); update expressions have ``SET`` (with ``+``, ``-``, ``if_not_exists``,
``list_append``), ``REMOVE``, ``ADD`` and ``DELETE``. A parsed expression keeps its
placeholders (``#name``, ``:value``), so the adapters' fixed texts are parsed once and
each request only binds its own values: moto's parser costs about 0.6 ms a request,
more than a whole simulated call (docs/simulation.md).

Errors are :class:`ExpressionError` with DynamoDB's message; the store answers them
as a ``ValidationException``.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from typing import Any, Final

from local.memory_dynamodb import values as v
from local.memory_dynamodb.values import Item, Value


class ExpressionError(ValueError):
    """An expression DynamoDB refuses (a ``ValidationException``)."""


_TOKEN: Final = re.compile(
    r"\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<number>\d+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|<=|>=|[=<>(),.\[\]+-]))"
)
# DynamoDB's reserved words (docs: "Reserved words in DynamoDB"), one a line.
_RESERVED: Final = frozenset(
    pathlib.Path(__file__).with_name("reserved_words.txt").read_text(encoding="utf-8").split()
)
_COMPARATORS: Final = frozenset({"=", "<>", "<", "<=", ">", ">="})
_FUNCTIONS: Final = frozenset(
    {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"}
)

# A document path: top-level name then ``.name`` or ``[index]`` steps; a name is an
# ``#alias`` or a plain identifier.
DocumentPath = tuple[str | int, ...]
Node = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Parsed:
    """One expression's tree and the placeholders it uses."""

    tree: Any
    names: frozenset[str]
    values: frozenset[str]


@dataclass(slots=True)
class Bindings:
    """A request's ``ExpressionAttributeNames`` and ``...Values``, and which it used."""

    names: Mapping[str, str]
    values: Mapping[str, Value]
    used_names: set[str] = field(default_factory=set)
    used_values: set[str] = field(default_factory=set)

    def use(self, parsed: Parsed) -> None:
        for name in parsed.names:
            if name not in self.names:
                raise ExpressionError(
                    "An expression attribute name used in the document path is not defined;"
                    f" attribute name: {name}"
                )
        for value in parsed.values:
            if value not in self.values:
                raise ExpressionError(
                    "An expression attribute value used in expression is not defined;"
                    f" attribute value: {value}"
                )
        self.used_names |= parsed.names
        self.used_values |= parsed.values

    def check_all_used(self) -> None:
        """DynamoDB refuses a request that defines a placeholder it does not use."""
        if len(self.used_names) == len(self.names) and len(self.used_values) == len(self.values):
            return  # (every one used is defined: :meth:`use` checks it)
        unused_names = set(self.names) - self.used_names
        if unused_names:
            raise ExpressionError(
                "Value provided in ExpressionAttributeNames unused in expressions:"
                f" keys: {{{', '.join(sorted(unused_names))}}}"
            )
        unused_values = set(self.values) - self.used_values
        if unused_values:
            raise ExpressionError(
                "Value provided in ExpressionAttributeValues unused in expressions:"
                f" keys: {{{', '.join(sorted(unused_values))}}}"
            )

    def name(self, part: str | int) -> str | int:
        if isinstance(part, str) and part.startswith("#"):
            return self.names[part]
        return part


# --- parsing ---------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text):
            if text[position:].isspace():
                break
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise ExpressionError(
                    f'Invalid expression: Syntax error; token: "{text[position:]}"'
                )
            group = match.lastgroup
            assert group is not None
            self.tokens.append((group, match.group(group)))
            position = match.end()
        self.at = 0
        self.names: set[str] = set()
        self.values: set[str] = set()

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.at + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end":
            raise self.error()
        self.at += 1
        return token

    def keyword(self, word: str) -> bool:
        kind_, text = self.peek()
        if kind_ == "word" and text.upper() == word:
            self.at += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if self.peek()[1] != text or self.peek()[0] not in ("op", "word"):
            raise self.error()
        self.at += 1

    def error(self) -> ExpressionError:
        token = self.peek()[1] or "<EOF>"
        return ExpressionError(f'Invalid expression: Syntax error; token: "{token}"')

    def done(self, tree: Any) -> Parsed:
        if self.at != len(self.tokens):
            raise self.error()
        return Parsed(tree, frozenset(self.names), frozenset(self.values))

    # condition := or
    def condition(self) -> Node:
        left = self.conjunction()
        while self.keyword("OR"):
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> Node:
        left = self.negation()
        while self.keyword("AND"):
            left = ("and", left, self.negation())
        return left

    def negation(self) -> Node:
        if self.keyword("NOT"):
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> Node:
        kind_, text = self.peek()
        if kind_ == "op" and text == "(":
            self.take()
            inner = self.condition()
            self.expect(")")
            return inner
        if kind_ == "word" and text in _FUNCTIONS and self.peek(1)[1] == "(":
            return self.function()
        left = self.operand()
        if self.keyword("BETWEEN"):
            low = self.operand()
            if not self.keyword("AND"):
                raise self.error()
            return ("between", left, low, self.operand())
        if self.keyword("IN"):
            self.expect("(")
            options = [self.operand()]
            while self.peek()[1] == ",":
                self.take()
                options.append(self.operand())
            self.expect(")")
            return ("in", left, tuple(options))
        kind_, text = self.peek()
        if kind_ == "op" and text in _COMPARATORS:
            self.take()
            return ("cmp", text, left, self.operand())
        raise self.error()

    def function(self) -> Node:
        name = self.take()[1]
        self.expect("(")
        arguments = [self.operand()]
        while self.peek()[1] == ",":
            self.take()
            arguments.append(self.operand())
        self.expect(")")
        wanted = 1 if name in ("attribute_exists", "attribute_not_exists") else 2
        if len(arguments) != wanted or arguments[0][0] != "path":
            raise ExpressionError(f"Invalid function name or arguments; function: {name}")
        return ("fn", name, tuple(arguments))

    def operand(self) -> Node:
        kind_, text = self.peek()
        if kind_ == "value":
            self.take()
            self.values.add(text)
            return ("value", text)
        if kind_ == "word" and text == "size" and self.peek(1)[1] == "(":
            self.take()
            self.expect("(")
            path = self.path()
            self.expect(")")
            return ("size", path)
        return self.path()

    def path(self) -> Node:
        parts: list[str | int] = [self.attribute_name()]
        while self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                parts.append(self.attribute_name())
            else:
                kind_, text = self.take()
                if kind_ != "number":
                    raise self.error()
                parts.append(int(text))
                self.expect("]")
        return ("path", tuple(parts))

    def attribute_name(self) -> str:
        kind_, text = self.take()
        if kind_ == "name":
            self.names.add(text)
            return text
        if kind_ != "word":
            self.at -= 1
            raise self.error()
        if text.upper() in _RESERVED:
            raise ExpressionError(
                "Invalid expression: Attribute name is a reserved keyword;"
                f" reserved keyword: {text}"
            )
        return text

    # update := (SET actions | REMOVE paths | ADD pairs | DELETE pairs)+
    def update(self) -> Node:
        clauses: dict[str, list[Any]] = {}
        while self.peek()[0] != "end":
            kind_, text = self.take()
            clause = text.upper()
            if kind_ != "word" or clause not in ("SET", "REMOVE", "ADD", "DELETE"):
                self.at -= 1
                raise self.error()
            if clause in clauses:
                raise ExpressionError(
                    'Invalid UpdateExpression: The "' + clause + '" section can only be used once'
                    " in an update expression;"
                )
            actions = clauses[clause] = [self.update_action(clause)]
            while self.peek()[1] == ",":
                self.take()
                actions.append(self.update_action(clause))
        if not clauses:
            raise self.error()
        return ("update", clauses)

    def update_action(self, clause: str) -> Any:
        path = self.path()
        if clause == "REMOVE":
            return path
        if clause == "SET":
            self.expect("=")
            return (path, self.set_value())
        operand = self.operand()
        if operand[0] != "value":
            raise self.error()
        return (path, operand)

    def set_value(self) -> Node:
        left = self.set_operand()
        kind_, text = self.peek()
        if kind_ == "op" and text in ("+", "-"):
            self.take()
            return ("plus" if text == "+" else "minus", left, self.set_operand())
        return left

    def set_operand(self) -> Node:
        kind_, text = self.peek()
        if kind_ == "word" and text in ("if_not_exists", "list_append") and self.peek(1)[1] == "(":
            self.take()
            self.expect("(")
            first = self.set_operand()
            self.expect(",")
            second = self.set_operand()
            self.expect(")")
            if text == "if_not_exists" and first[0] != "path":
                raise ExpressionError(
                    "Invalid UpdateExpression: Operator or function requires a document path;"
                    " operator or function: if_not_exists"
                )
            return (text, first, second)
        operand = self.operand()
        if operand[0] == "size":
            raise ExpressionError(
                "Invalid UpdateExpression: The function is not allowed in an update expression;"
                " function: size"
            )
        return operand


@cache
def parse_condition(text: str) -> Parsed:
    """A condition, filter or key-condition expression."""
    parser = _Parser(text)
    if not parser.tokens:
        raise ExpressionError("Invalid ConditionExpression: The expression can not be empty;")
    return parser.done(parser.condition())


@cache
def parse_update(text: str) -> Parsed:
    parser = _Parser(text)
    return parser.done(parser.update())


@cache
def parse_projection(text: str) -> Parsed:
    """A ``ProjectionExpression``: document paths separated by commas."""
    parser = _Parser(text)
    paths = [parser.path()]
    while parser.peek()[1] == ",":
        parser.take()
        paths.append(parser.path())
    return parser.done(tuple(paths))


# --- evaluation ------------------------------------------------------------------


def resolve(item: Item | None, path: DocumentPath, bindings: Bindings) -> Value | None:
    """The value at ``path`` in ``item``, or None when there is none."""
    if item is None:
        return None
    current: Value | None = None
    for position, part in enumerate(path):
        step = bindings.name(part)
        if position == 0:
            current = item.get(step) if isinstance(step, str) else None
        elif current is None:
            return None
        elif isinstance(step, int):
            items = current.get("L")
            current = items[step] if items is not None and step < len(items) else None
        else:
            members = current.get("M")
            current = members.get(step) if members is not None else None
        if current is None:
            return None
    return current


def _operand(node: Node, item: Item | None, bindings: Bindings) -> Value | None:
    tag = node[0]
    if tag == "value":
        return bindings.values[node[1]]
    if tag == "path":
        return resolve(item, node[1], bindings)
    if tag == "size":
        return _size(resolve(item, node[1][1], bindings))
    raise AssertionError(tag)


def _size(found: Value | None) -> Value | None:
    """``size()`` of an attribute as a number (None: no attribute, or no size)."""
    if found is None:
        return None
    try:
        return {"N": str(v.size_of(found))}
    except TypeError:
        return None


def _compare(  # noqa: PLR0911 (one answer per operator)
    op: str, left: Value | None, right: Value | None
) -> bool:
    if op == "=":
        return left is not None and right is not None and v.equal(left, right)
    if op == "<>":
        # As moto (and DynamoDB) answer it: a missing attribute is "not equal".
        return not (left is not None and right is not None and v.equal(left, right))
    if left is None or right is None:
        return False
    tl, kl = _ordered(left)
    tr, kr = _ordered(right)
    if tl != tr or kl is None or kr is None:
        return False
    if op == "<":
        return bool(kl < kr)
    if op == "<=":
        return bool(kl <= kr)
    if op == ">":
        return bool(kl > kr)
    return bool(kl >= kr)


def _ordered(value: Value) -> tuple[str, Any]:
    ((t, raw),) = value.items()
    if t == "N":
        return t, Decimal(raw)
    if t == "S":
        return t, raw.encode()
    return t, (raw if t == "B" else None)


def _function(  # noqa: PLR0911 (one answer per function)
    name: str, arguments: tuple[Node, ...], item: Item | None, b: Bindings
) -> bool:
    found = resolve(item, arguments[0][1], b)
    if name == "attribute_exists":
        return found is not None
    if name == "attribute_not_exists":
        return found is None
    other = _operand(arguments[1], item, b)
    if found is None or other is None:
        return False
    if name == "attribute_type":
        return v.kind(found) == other.get("S")
    if name == "begins_with":
        t = v.kind(found)
        return t in ("S", "B") and v.kind(other) == t and found[t].startswith(other[t])
    # contains
    t = v.kind(found)
    if t == "S":
        return v.kind(other) == "S" and other["S"] in found["S"]
    if t in v.SET_TYPES:
        if v.kind(other) != v.member_type(t):
            return False
        return any(v.equal({v.member_type(t): m}, other) for m in found[t])
    if t == "L":
        return any(v.equal(member, other) for member in found["L"])
    return False


def evaluate(  # noqa: PLR0911 (one answer per kind of node)
    node: Node, item: Item | None, bindings: Bindings
) -> bool:
    """Whether a condition holds for ``item`` (None: no item)."""
    tag = node[0]
    if tag == "and":
        return evaluate(node[1], item, bindings) and evaluate(node[2], item, bindings)
    if tag == "or":
        return evaluate(node[1], item, bindings) or evaluate(node[2], item, bindings)
    if tag == "not":
        return not evaluate(node[1], item, bindings)
    if tag == "cmp":
        return _compare(
            node[1], _operand(node[2], item, bindings), _operand(node[3], item, bindings)
        )
    if tag == "between":
        subject = _operand(node[1], item, bindings)
        low = _operand(node[2], item, bindings)
        high = _operand(node[3], item, bindings)
        if low is not None and high is not None and _compare(">", low, high):
            raise ExpressionError(
                "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be"
                " greater than or equal to lower bound"
            )
        return _compare(">=", subject, low) and _compare("<=", subject, high)
    if tag == "in":
        subject = _operand(node[1], item, bindings)
        return any(_compare("=", subject, _operand(o, item, bindings)) for o in node[2])
    if tag == "fn":
        return _function(node[1], node[2], item, bindings)
    raise AssertionError(tag)


def condition(text: str | None, item: Item | None, bindings: Bindings) -> bool:
    """Whether a request's ``ConditionExpression`` (None: none) holds for ``item``."""
    if text is None:
        return True
    parsed = parse_condition(text)
    bindings.use(parsed)
    return _compiled(text, tuple(bindings.names.items()))(item, bindings.values)


# --- compiled conditions -----------------------------------------------------------
# :func:`evaluate` walks the tree and looks each name up per request; the adapters send
# a few texts with the same names thousands of times, so each (text, names) becomes
# closures once, with the names bound and only the values read per request. Same
# answers, same refusals: each closure does what :func:`evaluate` does for its node.

Test = Callable[[Item | None, Mapping[str, Value]], bool]
Operand = Callable[[Item | None, Mapping[str, Value]], Value | None]


@cache
def _compiled(text: str, names: tuple[tuple[str, str], ...]) -> Test:
    return _compile(parse_condition(text).tree, dict(names))


def _compile(node: Node, names: Mapping[str, str]) -> Test:  # noqa: PLR0911 (one per node)
    tag = node[0]
    if tag in ("and", "or"):
        left, right = _compile(node[1], names), _compile(node[2], names)
        if tag == "and":
            return lambda item, values: left(item, values) and right(item, values)
        return lambda item, values: left(item, values) or right(item, values)
    if tag == "not":
        inner = _compile(node[1], names)
        return lambda item, values: not inner(item, values)
    if tag == "cmp":
        op, a, b = node[1], _compile_operand(node[2], names), _compile_operand(node[3], names)
        return lambda item, values: _compare(op, a(item, values), b(item, values))
    if tag == "between":
        return _compile_between(node, names)
    if tag == "in":
        subject = _compile_operand(node[1], names)
        options = tuple(_compile_operand(o, names) for o in node[2])

        def within(item: Item | None, values: Mapping[str, Value]) -> bool:
            found = subject(item, values)
            return any(_compare("=", found, o(item, values)) for o in options)

        return within
    if tag == "fn":
        return _compile_function(node[1], node[2], names)
    raise AssertionError(tag)


def _compile_between(node: Node, names: Mapping[str, str]) -> Test:
    subject, low_of, high_of = (_compile_operand(n, names) for n in node[1:4])

    def between(item: Item | None, values: Mapping[str, Value]) -> bool:
        found, low, high = subject(item, values), low_of(item, values), high_of(item, values)
        if low is not None and high is not None and _compare(">", low, high):
            raise ExpressionError(
                "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be"
                " greater than or equal to lower bound"
            )
        return _compare(">=", found, low) and _compare("<=", found, high)

    return between


def _compile_function(name: str, arguments: tuple[Node, ...], names: Mapping[str, str]) -> Test:
    path = _compile_path(arguments[0][1], names)
    if name == "attribute_exists":
        return lambda item, values: path(item) is not None
    if name == "attribute_not_exists":
        return lambda item, values: path(item) is None
    # The rest read two operands: the general rule (rare in the adapters' requests).
    return lambda item, values: _function(name, arguments, item, Bindings(names, values))


def _compile_operand(node: Node, names: Mapping[str, str]) -> Operand:
    tag = node[0]
    if tag == "value":
        key = node[1]
        return lambda item, values: values[key]
    if tag == "path":
        path = _compile_path(node[1], names)
        return lambda item, values: path(item)
    if tag == "size":
        inner = _compile_path(node[1][1], names)
        return lambda item, values: _size(inner(item))
    raise AssertionError(tag)


def _compile_path(
    path: DocumentPath, names: Mapping[str, str]
) -> Callable[[Item | None], Value | None]:
    steps = tuple(names[p] if isinstance(p, str) and p.startswith("#") else p for p in path)
    if len(steps) == 1:
        (top,) = steps
        if not isinstance(top, str):
            return lambda item: None
        return lambda item: None if item is None else item.get(top)
    b = Bindings(names, {})
    return lambda item: resolve(item, path, b)


def project(item: Item, text: str | None, bindings: Bindings) -> Item:
    """The item cut to a ``ProjectionExpression``'s top-level attributes."""
    if text is None:
        return item
    parsed = parse_projection(text)
    bindings.use(parsed)
    kept: Item = {}
    for path in parsed.tree:
        if len(path[1]) != 1:
            raise NotImplementedError("a nested ProjectionExpression path")
        name = bindings.name(path[1][0])
        if isinstance(name, str) and name in item:
            kept[name] = item[name]
    return kept


# --- updates ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Updated:
    """An update's result: the new item and the top-level attributes it changed."""

    item: Item
    changed: frozenset[str]


def apply_update(text: str, item: Item, bindings: Bindings, *, keys: frozenset[str]) -> Updated:
    """``item`` after an ``UpdateExpression``; every operand reads the item as it was."""
    parsed = parse_update(text)
    bindings.use(parsed)
    actions = _actions(text, tuple(bindings.names.items()), keys)
    new = dict(item)
    for clause, name, node in actions:
        if clause == "SET":
            new[name] = _set_value(node, item, bindings)
        elif clause == "REMOVE":
            new.pop(name, None)
        elif clause == "ADD":
            new[name] = _add(item.get(name), bindings.values[node[1]])
        else:
            remaining = _delete(item.get(name), bindings.values[node[1]])
            if remaining is None:
                new.pop(name, None)
            else:
                new[name] = remaining
    return Updated(new, frozenset(name for _clause, name, _node in actions))


@cache
def _actions(
    text: str, names: tuple[tuple[str, str], ...], keys: frozenset[str]
) -> tuple[tuple[str, str, Node], ...]:
    """An update's actions, each with the attribute it writes (the names bound), checked
    once per text and names: no key attribute, no two actions on one attribute."""
    bindings = Bindings(dict(names), {})
    clauses: dict[str, list[Any]] = parse_update(text).tree[1]
    actions: list[tuple[str, str, Node]] = []
    written: set[str] = set()
    for clause in ("SET", "REMOVE", "ADD", "DELETE"):
        for action in clauses.get(clause, ()):
            path, node = (action, ()) if clause == "REMOVE" else action
            parts = path[1]
            if len(parts) != 1:
                raise NotImplementedError("an update of a nested document path")
            name = bindings.name(parts[0])
            assert isinstance(name, str)
            if name in keys:
                raise ExpressionError(
                    f"One or more parameter values were invalid: Cannot update attribute {name}."
                    " This attribute is part of the key"
                )
            if name in written:
                raise ExpressionError(
                    "Invalid UpdateExpression: Two document paths overlap with each other;"
                    " must remove or rewrite one of these paths"
                )
            written.add(name)
            actions.append((clause, name, node))
    return tuple(actions)


def _set_value(node: Node, item: Item, bindings: Bindings) -> Value:
    tag = node[0]
    if tag in ("plus", "minus"):
        left = _set_value(node[1], item, bindings)
        right = _set_value(node[2], item, bindings)
        if v.kind(left) != "N" or v.kind(right) != "N":
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        total = (
            v.number(left) + v.number(right) if tag == "plus" else v.number(left) - v.number(right)
        )
        return {"N": v.format_number(total)}
    if tag == "if_not_exists":
        found = resolve(item, node[1][1], bindings)
        return found if found is not None else _set_value(node[2], item, bindings)
    if tag == "list_append":
        left = _set_value(node[1], item, bindings)
        right = _set_value(node[2], item, bindings)
        if v.kind(left) != "L" or v.kind(right) != "L":
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        return {"L": [*left["L"], *right["L"]]}
    if tag == "path":
        found = resolve(item, node[1], bindings)
        if found is None:
            raise ExpressionError(
                "The provided expression refers to an attribute that does not exist in the item"
            )
        return found
    if tag == "value":
        return v.copy_value(bindings.values[node[1]])  # the caller may reuse its request
    return _operand(node, item, bindings) or {}


def _add(current: Value | None, operand: Value) -> Value:
    t = v.kind(operand)
    if t == "N":
        if current is None:
            return {"N": v.format_number(v.number(operand))}
        if v.kind(current) != "N":
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        return {"N": v.format_number(v.number(current) + v.number(operand))}
    if t in v.SET_TYPES:
        if current is None:
            return {t: _unique(operand[t], t)}
        if v.kind(current) != t:
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        return {t: _unique([*current[t], *operand[t]], t)}
    raise ExpressionError(
        "Invalid UpdateExpression: Incorrect operand type for operator or function;"
        f" operator: ADD, operand type: {_TYPE_NAMES.get(t, t)}"
    )


def _delete(current: Value | None, operand: Value) -> Value | None:
    t = v.kind(operand)
    if t not in v.SET_TYPES:
        raise ExpressionError(
            "Invalid UpdateExpression: Incorrect operand type for operator or function;"
            f" operator: DELETE, operand type: {_TYPE_NAMES.get(t, t)}"
        )
    if current is None:
        return None
    if v.kind(current) != t:
        raise ExpressionError("An operand in the update expression has an incorrect data type")
    gone = {_member_key(m, t) for m in operand[t]}
    left = [m for m in current[t] if _member_key(m, t) not in gone]
    return {t: left} if left else None


def _member_key(member: Any, set_type: str) -> Any:
    return Decimal(member) if set_type == "NS" else member


def _unique(members: list[Any], set_type: str) -> list[Any]:
    seen: set[Any] = set()
    kept = []
    for member in members:
        key = _member_key(member, set_type)
        if key not in seen:
            seen.add(key)
            kept.append(member)
    return kept


_TYPE_NAMES: Final = {
    "S": "STRING",
    "N": "NUMBER",
    "B": "BINARY",
    "L": "LIST",
    "M": "MAP",
    "BOOL": "BOOLEAN",
    "NULL": "NULL",
}


# --- key conditions --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyCondition:
    """A Query's ``KeyConditionExpression``: the partition's value and a test of the
    sort key (None: every item of the partition)."""

    partition: Value
    sort: Callable[[Value | None], bool] | None


def key_condition(
    text: str, bindings: Bindings, *, partition_key: str, sort_key: str | None
) -> KeyCondition:
    parsed = parse_condition(text)
    bindings.use(parsed)
    partition_node, sort_term, sort_test = _key_terms(
        text, tuple(bindings.names.items()), partition_key, sort_key
    )
    partition = bindings.values[partition_node[1]]
    if sort_term is None:
        return KeyCondition(partition, None)
    term = sort_term
    if term[0] == "between":  # refuses reversed bounds before any item is read
        low, high = _operand(term[2], None, bindings), _operand(term[3], None, bindings)
        if low is not None and high is not None and _compare(">", low, high):
            raise ExpressionError(
                "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be"
                " greater than or equal to lower bound"
            )

    name, values = sort_key or "", bindings.values

    def sort(value: Value | None) -> bool:
        return value is not None and sort_test({name: value}, values)

    return KeyCondition(partition, sort)


@cache
def _key_terms(
    text: str, names: tuple[tuple[str, str], ...], partition_key: str, sort_key: str | None
) -> tuple[Node, Node | None, Test]:
    """A key condition's partition value (its placeholder) and its sort key's term (and
    that term compiled), checked once per text and names: a Query sends the same few
    texts many times."""
    bindings = Bindings(dict(names), {})
    partition: Node | None = None
    sort_term: Node | None = None
    for term in _conjuncts(parse_condition(text).tree):
        subject = term[2] if term[0] == "cmp" else (term[2][0] if term[0] == "fn" else term[1])
        name = _key_name(subject, bindings)
        if term[0] == "cmp" and term[1] == "=" and name == partition_key and partition is None:
            # Only a placeholder names a value: a path read on no item is nothing.
            partition = term[3] if term[3][0] == "value" else None
        elif name == sort_key and sort_term is None and _sort_condition(term):
            sort_term = term
        else:
            raise ExpressionError(
                "Query key condition not supported"
                if name in (partition_key, sort_key)
                else f"Query condition missed key schema element: {sort_key or partition_key}"
            )
    if partition is None:
        raise ExpressionError(f"Query condition missed key schema element: {partition_key}")
    sort_test = _compile(sort_term, dict(names)) if sort_term is not None else _ALWAYS
    return partition, sort_term, sort_test


def _always(item: Item | None, values: Mapping[str, Value]) -> bool:
    return True


_ALWAYS: Final[Test] = _always


def _conjuncts(node: Node) -> list[Node]:
    if node[0] == "and":
        return _conjuncts(node[1]) + _conjuncts(node[2])
    if node[0] in ("or", "not", "in"):
        raise ExpressionError(f"Invalid operator used in KeyConditionExpression: {node[0].upper()}")
    return [node]


def _sort_condition(term: Node) -> bool:
    return bool(term[0] in ("cmp", "between") and (term[0] != "cmp" or term[1] != "<>")) or (
        term[0] == "fn" and term[1] == "begins_with"
    )


def _key_name(node: Node, bindings: Bindings) -> str | int | None:
    if node[0] != "path" or len(node[1]) != 1:
        return None
    return bindings.name(node[1][0])
