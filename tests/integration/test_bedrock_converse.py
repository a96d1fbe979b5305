"""Converse through the worker's own bedrock-runtime client: one HTTP attempt per call,
and each answer mapped to one outcome (the list in the adapter's docstring).

The client is the one the agent workflow's wiring builds (``bedrock_client``), pointed
at the Bedrock emulator, or at a loopback socket that drops the connection, on
127.0.0.1. Every row checks the outcome (not applied, never, unknown) and that it took
exactly one request: a second, hidden one could have run the model unseen.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from functions.core.errors import NotApplied, PermanentError, TransientError
from functions.workflows.adapters.bedrock_converse import BedrockConverse
from functions.workflows.agent import ModelAnswer
from functions.workflows.agent_prompt import build_prompt
from functions.workflows.wiring import BEDROCK_CONFIG, bedrock_client
from local.bedrock_emulator import DEFAULT_MODEL_ID, ConverseError, RunningEmulator
from tests.integration.conftest import BlackHole
from tests.integration.test_agent_adapters import DELIVERY, PACKAGE

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.client import BedrockRuntimeClient


def converse(client: BedrockRuntimeClient) -> ModelAnswer:
    adapter = BedrockConverse(client=client, model_id=DEFAULT_MODEL_ID)
    return adapter.converse(
        build_prompt(PACKAGE), max_tokens=64, temperature=0.2, delivery_id=DELIVERY
    )


def impatient_client(endpoint: str) -> BedrockRuntimeClient:
    """The production config (one attempt) with a read timeout a test can wait out."""
    config = BEDROCK_CONFIG.merge(Config(read_timeout=0.3))
    return boto3.client("bedrock-runtime", endpoint_url=endpoint, config=config)


def test_an_answer_takes_one_request(emulator: RunningEmulator) -> None:
    answer = converse(bedrock_client(emulator.url))
    assert answer.stop_reason == "end_turn"
    assert emulator.calls() == {DELIVERY: 1}


@pytest.mark.parametrize(
    ("error", "outcome", "code"),
    [
        (ConverseError.THROTTLING, NotApplied, "model_throttled"),
        (ConverseError.MODEL_NOT_READY, NotApplied, "model_throttled"),
        (ConverseError.VALIDATION, PermanentError, "model_rejected"),
        (ConverseError.ACCESS_DENIED, PermanentError, "model_rejected"),
        (ConverseError.RESOURCE_NOT_FOUND, PermanentError, "model_rejected"),
        (ConverseError.INTERNAL_SERVER, TransientError, "model_unavailable"),
        (ConverseError.SERVICE_UNAVAILABLE, TransientError, "model_unavailable"),
        (ConverseError.MODEL_TIMEOUT, TransientError, "model_unavailable"),
        (ConverseError.MODEL_ERROR, TransientError, "model_unavailable"),
    ],
)
def test_each_error_answer_is_one_request_and_one_outcome(
    emulator: RunningEmulator, error: ConverseError, outcome: type[Exception], code: str
) -> None:
    # Answered with the error every time: a retry would show as a second request.
    emulator.emulator.fail_next(3, error)
    with pytest.raises(outcome, match=code) as raised:
        converse(bedrock_client(emulator.url))
    if outcome is TransientError:
        # Unknown: the model may have run; never "not applied" (settled at 0).
        assert not isinstance(raised.value, NotApplied)
    assert emulator.calls() == {DELIVERY: 1}


def test_a_server_error_then_a_throttle_is_unknown_not_free(emulator: RunningEmulator) -> None:
    """The call that may have run is reported, not hidden behind the later throttle."""
    emulator.emulator.fail_next(1, ConverseError.INTERNAL_SERVER)
    emulator.emulator.set_failure_rate(1.0, error=ConverseError.THROTTLING)  # every later call
    with pytest.raises(TransientError) as raised:
        converse(bedrock_client(emulator.url))
    assert not isinstance(raised.value, NotApplied)
    assert emulator.calls() == {DELIVERY: 1}
    # The next call (our own retry, reserved anew) is the one throttled.
    with pytest.raises(NotApplied, match="model_throttled"):
        converse(bedrock_client(emulator.url))
    assert emulator.calls() == {DELIVERY: 2}


def test_never_connected_is_not_applied() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]  # closed when the block ends: connections refused
    with pytest.raises(NotApplied, match="model_unavailable"):
        converse(bedrock_client(f"http://127.0.0.1:{port}"))


def test_a_read_timeout_is_unknown_after_one_request(emulator: RunningEmulator) -> None:
    emulator.emulator.set_latency(1.0)
    with pytest.raises(TransientError, match="model_unavailable") as raised:
        converse(impatient_client(emulator.url))
    assert not isinstance(raised.value, NotApplied)
    assert emulator.calls() == {DELIVERY: 1}


class DropsAfterReading(BlackHole):
    """A loopback server that reads each request, then closes without an answer."""

    def _take(self, connection: socket.socket) -> None:
        connection.settimeout(5)
        if connection.recv(65536):
            self._held.append(connection)
        connection.close()


@pytest.fixture
def drops() -> Iterator[DropsAfterReading]:
    server = DropsAfterReading()
    yield server
    server.close()


def test_a_connection_lost_after_sending_is_unknown(drops: DropsAfterReading) -> None:
    with pytest.raises(TransientError, match="model_unavailable") as raised:
        converse(bedrock_client(drops.url))
    assert not isinstance(raised.value, NotApplied)
    assert drops.connections == 1
