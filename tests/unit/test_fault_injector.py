"""The local AWS emulator's holds: a held request can be picked by what its body says."""

from __future__ import annotations

from local.aws_emulator import FaultInjector


def test_a_hold_with_a_text_waits_for_the_request_that_contains_it() -> None:
    faults = FaultInjector()
    faults.delay_next("GetItem", 2.0, containing='"effect#alert"')

    assert faults.delays_pending("GetItem")
    assert faults.delay_for("GetItem", b'{"Key": {"sk": {"S": "step#model"}}}') == 0.0
    assert faults.delay_for("PutItem", b'{"Key": {"sk": {"S": "effect#alert"}}}') == 0.0
    assert faults.delay_for("GetItem", b'{"Key": {"sk": {"S": "effect#alert.http"}}}') == 0.0
    assert faults.delay_for("GetItem", b'{"Key": {"sk": {"S": "effect#alert"}}}') == 2.0
    # Taken: the next such request goes through.
    assert not faults.delays_pending("GetItem")
    assert faults.delay_for("GetItem", b'{"Key": {"sk": {"S": "effect#alert"}}}') == 0.0


def test_a_hold_without_a_text_takes_the_next_request_of_its_operation() -> None:
    faults = FaultInjector()
    faults.delay_next("TransactWriteItems", 1.5, count=2)

    assert faults.delay_for("TransactWriteItems") == 1.5
    assert faults.delay_for("TransactWriteItems", b"{}") == 1.5
    assert faults.delay_for("TransactWriteItems") == 0.0


def test_a_lost_answer_takes_the_request_that_contains_its_text_once_and_is_counted() -> None:
    faults = FaultInjector()
    faults.lose_next("TransactWriteItems", containing='"approval#tool.1"')

    assert faults.delays_pending("TransactWriteItems")  # (the body is read for it)
    assert not faults.loses("TransactWriteItems", b'{"sk": {"S": "approval#alert"}}')
    assert not faults.loses("UpdateItem", b'{"sk": {"S": "approval#tool.1"}}')
    assert faults.loses("TransactWriteItems", b'{"sk": {"S": "approval#tool.1"}}')
    assert not faults.loses("TransactWriteItems", b'{"sk": {"S": "approval#tool.1"}}')
    assert faults.counts() == {"lost_answer": 1}
    faults.control({"lose": {"operation": "PutItem"}})
    assert faults.loses("PutItem", b"{}")
