"""The redacting filter: what it masks, and that it works where it sits (on handlers)."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from functions.core.redaction import REDACTED, RedactingFilter, install_on, remember_secret

# Planted values, each only in this module (the log audit knows none of them, and
# nothing here reaches a handler the audit or pytest captures).
TOKEN = "Zt4qW8nB2xK6vR1mP9sL"
QUOTED = 'ab"cd\\efgh1234'


def _tree() -> tuple[logging.Logger, logging.Logger]:
    """A parent and a child outside the logging manager (the audit never sees them)."""
    parent = logging.Logger("planted-parent", logging.DEBUG)
    child = logging.Logger("planted-parent.child", logging.DEBUG)
    child.parent = parent
    return parent, child


def test_a_remembered_value_without_any_shape_is_masked_in_bytes_and_nested_extras() -> None:
    remember_secret(TOKEN)
    record = logging.LogRecord("x", logging.DEBUG, __file__, 1, "body %r", None, None)
    record.args = (json.dumps({"SecretString": TOKEN}).encode(),)
    vars(record)["headers"] = {"Authorization": [f"token {TOKEN}"]}  # as an `extra` is

    RedactingFilter().filter(record)

    assert TOKEN not in record.getMessage() and REDACTED in record.getMessage()
    assert vars(record)["headers"] == {"Authorization": [f"token {REDACTED}"]}


def test_the_json_escaped_form_of_a_remembered_value_is_masked_too() -> None:
    remember_secret(QUOTED)
    escaped = json.dumps(QUOTED)[1:-1]

    record = logging.LogRecord("x", logging.DEBUG, __file__, 1, f"doc {escaped}", None, None)
    RedactingFilter().filter(record)

    assert record.getMessage() == f"doc {REDACTED}"


def test_short_values_are_not_remembered() -> None:
    remember_secret("abc1234")  # seven characters: too common to mask

    record = logging.LogRecord("x", logging.DEBUG, __file__, 1, "abc1234", None, None)
    RedactingFilter().filter(record)

    assert record.getMessage() == "abc1234"


def test_a_bearer_credential_of_any_visible_characters_is_masked() -> None:
    record = logging.LogRecord(
        "x", logging.DEBUG, __file__, 1, "sent Authorization: Bearer a!b#c$d%e&f", None, None
    )
    RedactingFilter().filter(record)

    assert record.getMessage() == f"sent Authorization: {REDACTED}"


def test_a_secret_in_an_exception_moves_into_the_message_masked() -> None:
    remember_secret(TOKEN)
    try:
        raise ValueError(f"rejected {TOKEN}")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())

    RedactingFilter().filter(record)

    assert record.exc_info is None
    assert record.getMessage().startswith("failed\nTraceback")
    assert TOKEN not in record.getMessage() and REDACTED in record.getMessage()


def test_an_exception_without_a_secret_is_left_as_it_is() -> None:
    try:
        raise ValueError("nothing to hide")
    except ValueError:
        info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, info)

    RedactingFilter().filter(record)

    assert record.exc_info == info and record.getMessage() == "failed"


def test_on_a_handler_it_masks_records_propagated_from_child_loggers() -> None:
    remember_secret(TOKEN)
    parent, child = _tree()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    install_on([handler])
    parent.addHandler(handler)

    parent.debug("response %s", TOKEN)
    child.debug("response %s", TOKEN)  # reaches the parent's handler, not its filters

    assert stream.getvalue() == f"response {REDACTED}\n" * 2


def test_on_a_logger_it_would_miss_records_propagated_from_child_loggers() -> None:
    remember_secret(TOKEN)
    parent, child = _tree()
    parent.addFilter(RedactingFilter())
    stream = io.StringIO()
    parent.addHandler(logging.StreamHandler(stream))

    child.debug("response %s", TOKEN)

    assert TOKEN in stream.getvalue()  # why the filter goes on handlers


def test_install_on_puts_one_filter_on_each_handler() -> None:
    handlers: list[logging.Handler] = [logging.NullHandler(), logging.NullHandler()]

    install_on(handlers)
    install_on(handlers)

    assert [sum(isinstance(f, RedactingFilter) for f in h.filters) for h in handlers] == [1, 1]


def test_every_shape_and_value_is_found_deep_in_a_record_and_nothing_else_is_touched() -> None:
    remember_secret(TOKEN)
    planted = {
        "shape": "key whsec_c2VjcmV0",
        "upper bearer": "sent BEARER abc.def",
        "mixed bearer": "sent bEaReR\tabc",
        "value": f"prefix{TOKEN}suffix",
        "quoted": json.dumps(QUOTED)[1:-1],
    }
    remember_secret(QUOTED)
    for name, text in planted.items():
        clean = {"outcome": "accepted", "status": 202, "nested": [{"Name": "m"}, 1.0, None]}
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "handled", None, None)
        vars(record).update({"clean": clean, "deep": {"a": [("b", {"c": text})]}})

        RedactingFilter().filter(record)

        deep = vars(record)["deep"]["a"][0][1]["c"]
        assert REDACTED in deep, name
        assert vars(record)["clean"] is clean  # a clean extra is left as it was


def test_strings_side_by_side_never_make_a_secret_together() -> None:
    # The search runs over every string of a record joined: a word ending one string
    # and the next string must not read as a bearer credential.
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a bearer", None, None)
    vars(record).update({"next": "token-looking", "list": ["bearer", "x"]})

    RedactingFilter().filter(record)

    assert record.getMessage() == "a bearer"
    assert vars(record)["next"] == "token-looking" and vars(record)["list"] == ["bearer", "x"]


def test_a_record_holding_itself_ends_the_search_as_it_always_has() -> None:
    # Walking a container that holds itself would never end: the search gives up and
    # the rebuild fails as the recursive walk always did, without hanging the caller.
    looped: dict[str, object] = {"outcome": "accepted"}
    looped["self"] = [looped]
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "handled", None, None)
    vars(record)["looped"] = looped

    with pytest.raises(RecursionError):
        RedactingFilter().filter(record)
