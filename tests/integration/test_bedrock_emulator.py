"""The Bedrock emulator as boto3's own bedrock-runtime client sees it, on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from functions.core.package import Attachment, Package
from functions.workflows.agent_prompt import build_prompt, sanitize_model_output
from local.bedrock_emulator import (
    DEFAULT_MODEL_ID,
    REFUSE_MARKER,
    BedrockEmulator,
    ConverseError,
    RunningEmulator,
    start_in_thread,
    token_count,
)

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.client import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import ConverseResponseTypeDef

MAX_ATTEMPTS = 3
RetryMode = Literal["legacy", "standard", "adaptive"]


class Clients:
    """Makes real bedrock-runtime clients and closes their connection pools afterwards."""

    def __init__(self) -> None:
        self._made: list[BedrockRuntimeClient] = []

    def __call__(
        self,
        target: RunningEmulator | str,
        *,
        mode: RetryMode = "standard",
        attempts: int = MAX_ATTEMPTS,
    ) -> BedrockRuntimeClient:
        """A client for ``target`` (a handle or its URL), ``attempts`` tries in all."""
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=target if isinstance(target, str) else target.url,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=Config(
                retries={"mode": mode, "total_max_attempts": attempts},
                connect_timeout=2,
                read_timeout=10,
            ),
        )
        self._made.append(client)
        return client

    def close(self) -> None:
        for client in self._made:
            client.close()


@pytest.fixture
def client_for() -> Iterator[Clients]:
    clients = Clients()
    yield clients
    clients.close()


def _converse(
    client: BedrockRuntimeClient, delivery_id: str, text: str = "Hello there.", **overrides: Any
) -> ConverseResponseTypeDef:
    request: dict[str, Any] = {
        "modelId": DEFAULT_MODEL_ID,
        "system": [{"text": "Summarise."}],
        "messages": [{"role": "user", "content": [{"text": text}]}],
        "inferenceConfig": {"maxTokens": 200, "temperature": 0.0},
        "requestMetadata": {"delivery_id": delivery_id},
    }
    request.update(overrides)
    return client.converse(**request)


def _error_code(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    return str(excinfo.value.response["Error"]["Code"])


def _package(briefing: str) -> Package:
    return Package(
        package_id="pkg_emulator",
        title="Quarterly supplier review",
        briefing=briefing,
        attachments=(Attachment("notes.md", "text/markdown", 1832),),
        created_at=datetime(2026, 12, 2, 15, 4, tzinfo=UTC),
    )


def test_converse_answers_a_fenced_package_with_its_title(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    delivery_id = str(uuid.uuid4())
    prompt = build_prompt(_package("Compare the three offers before Friday."))
    response = client_for(emulator).converse(
        modelId=DEFAULT_MODEL_ID,
        system=prompt.converse_system(),
        messages=prompt.converse_messages(),
        inferenceConfig={"maxTokens": 300, "temperature": 0.2},
        requestMetadata={"delivery_id": delivery_id},
    )
    message = response["output"]["message"]
    assert message["role"] == "assistant"
    text = sanitize_model_output(message["content"][0]["text"], 500)
    assert text.startswith(
        "Summary of Quarterly supplier review: Compare the three offers before Friday. ["
    )
    assert response["stopReason"] == "end_turn"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert response["ResponseMetadata"]["RequestId"]
    recorded = emulator.emulator.last_request(delivery_id)
    assert recorded is not None
    assert "toolConfig" not in recorded
    assert recorded["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.2}


def test_converse_is_deterministic_per_input(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    client = client_for(emulator)
    first = _converse(client, "d1", "same input")["output"]["message"]["content"][0]["text"]
    again = _converse(client, "d1", "same input")["output"]["message"]["content"][0]["text"]
    other = _converse(client, "d1", "other input")["output"]["message"]["content"][0]["text"]
    assert first == again
    assert first != other
    assert first.startswith("Summary of the request: same input [")


def test_converse_usage_counts_tokens_of_input_and_answer(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    response = _converse(client_for(emulator), "d1", "x" * 401)
    usage = response["usage"]
    answer = response["output"]["message"]["content"][0]["text"]
    assert usage["inputTokens"] == token_count("Summarise." + "x" * 401) == 103
    assert usage["outputTokens"] == token_count(answer)
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert response["metrics"]["latencyMs"] >= 0


def test_converse_stops_at_max_tokens(emulator: RunningEmulator, client_for: Clients) -> None:
    response = _converse(
        client_for(emulator), "d1", "many words " * 50, inferenceConfig={"maxTokens": 3}
    )
    assert response["stopReason"] == "max_tokens"
    assert len(response["output"]["message"]["content"][0]["text"]) == 12
    assert response["usage"]["outputTokens"] == 3


@pytest.mark.parametrize("mode", ["standard", "legacy"])
def test_throttling_is_retried_by_botocore_then_raised(
    emulator: RunningEmulator, mode: RetryMode, client_for: Clients
) -> None:
    emulator.emulator.fail_next(MAX_ATTEMPTS, ConverseError.THROTTLING)
    with pytest.raises(ClientError) as excinfo:
        _converse(client_for(emulator, mode=mode), "d-throttled")
    assert _error_code(excinfo) == "ThrottlingException"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert excinfo.value.response["ResponseMetadata"]["RetryAttempts"] == MAX_ATTEMPTS - 1
    assert emulator.calls() == {"d-throttled": MAX_ATTEMPTS}


def test_throttling_then_success_is_one_answer(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    emulator.emulator.fail_next(1, ConverseError.SERVICE_UNAVAILABLE)
    response = _converse(client_for(emulator), "d-recovers")
    assert response["stopReason"] == "end_turn"
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    assert emulator.calls() == {"d-recovers": 2}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ConverseError.ACCESS_DENIED, 403),
        (ConverseError.MODEL_TIMEOUT, 408),
        (ConverseError.MODEL_ERROR, 424),
        (ConverseError.RESOURCE_NOT_FOUND, 404),
    ],
)
def test_injected_errors_surface_with_their_code_and_status(
    emulator: RunningEmulator, error: ConverseError, status: int, client_for: Clients
) -> None:
    emulator.emulator.fail_next(1, error)
    with pytest.raises(ClientError) as excinfo:
        _converse(client_for(emulator, attempts=1), "d1")
    assert _error_code(excinfo) == error.value
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert excinfo.value.response["Error"]["Message"]


def test_unknown_model_is_a_validation_error_not_retried(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    with pytest.raises(ClientError) as excinfo:
        _converse(client_for(emulator), "d-invalid", modelId="acme.no-such-model-v1:0")
    assert _error_code(excinfo) == "ValidationException"
    assert "model identifier is invalid" in excinfo.value.response["Error"]["Message"]
    assert emulator.calls() == {"d-invalid": 1}


@pytest.mark.parametrize(
    "overrides",
    [
        {"messages": [{"role": "assistant", "content": [{"text": "hi"}]}]},
        {
            "messages": [
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "user", "content": [{"text": "b"}]},
            ]
        },
        {"inferenceConfig": {"temperature": 1.5}},
        {"requestMetadata": {"delivery_id": "not allowed: <>"}},
    ],
)
def test_requests_bedrock_refuses_are_validation_errors(
    emulator: RunningEmulator, overrides: dict[str, Any], client_for: Clients
) -> None:
    with pytest.raises(ClientError) as excinfo:
        _converse(client_for(emulator), "d1", **overrides)
    assert _error_code(excinfo) == "ValidationException"


def test_input_over_the_context_window_is_a_validation_error(client_for: Clients) -> None:
    with start_in_thread(emulator=BedrockEmulator(context_tokens=10)) as small:
        with pytest.raises(ClientError) as excinfo:
            _converse(client_for(small), "d1", "x" * 100)
        assert "too long" in excinfo.value.response["Error"]["Message"]


def test_refuse_next_answers_empty_and_content_filtered(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    emulator.emulator.refuse_next(1)
    client = client_for(emulator)
    refused = _converse(client, "d1")
    assert refused["stopReason"] == "content_filtered"
    assert refused["output"]["message"]["content"] == []
    assert refused["usage"]["outputTokens"] == 0
    assert _converse(client, "d1")["stopReason"] == "end_turn"


def test_refuse_marker_in_a_fenced_package_is_refused(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    prompt = build_prompt(_package(f"Please summarise. {REFUSE_MARKER}"))
    response = client_for(emulator).converse(
        modelId=DEFAULT_MODEL_ID,
        system=prompt.converse_system(),
        messages=prompt.converse_messages(),
    )
    assert response["stopReason"] == "content_filtered"
    assert response["output"]["message"]["content"] == []


def test_calls_are_counted_per_delivery_id_over_http(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    client = client_for(emulator)
    for delivery_id in ("a", "b", "a"):
        _converse(client, delivery_id)
    _converse(client, "x", requestMetadata={"other": "value"})
    with urllib.request.urlopen(emulator.calls_url, timeout=5) as answer:
        assert json.loads(answer.read()) == {"a": 2, "b": 1}
    assert emulator.calls() == {"a": 2, "b": 1}
    assert emulator.emulator.total_calls == 4


def test_concurrent_calls_are_all_counted(emulator: RunningEmulator, client_for: Clients) -> None:
    client = client_for(emulator)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: _converse(client, f"d{i % 2}", f"call {i}"), range(40)))
    assert emulator.calls() == {"d0": 20, "d1": 20}


def test_latency_is_added_to_every_call(emulator: RunningEmulator, client_for: Clients) -> None:
    emulator.emulator.set_latency(0.3)
    started = time.monotonic()
    response = _converse(client_for(emulator), "d1")
    assert time.monotonic() - started >= 0.3
    assert response["metrics"]["latencyMs"] >= 300


def test_failure_rate_is_reproducible_with_a_seed(
    emulator: RunningEmulator, client_for: Clients
) -> None:
    client = client_for(emulator, attempts=1)

    def outcomes() -> list[str]:
        emulator.emulator.set_failure_rate(0.5, error=ConverseError.THROTTLING, seed=7)
        seen: list[str] = []
        for _ in range(20):
            try:
                seen.append(_converse(client, "d1")["stopReason"])
            except ClientError as exc:
                seen.append(exc.response["Error"]["Code"])
        return seen

    first = outcomes()
    assert first == outcomes()
    assert {"end_turn", "ThrottlingException"} == set(first)


def test_unknown_operation_is_a_404(emulator: RunningEmulator) -> None:
    request = urllib.request.Request(emulator.url + "/model/m/converse-stream", method="POST")
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, data=b"{}", timeout=5)
    with excinfo.value as answer:  # an HTTPError holds the open response
        assert answer.code == 404
        assert answer.headers["x-amzn-ErrorType"] == "UnknownOperationException"


def test_runs_alone_as_a_module(client_for: Clients) -> None:
    command = [sys.executable, "-m", "local.bedrock_emulator", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # the banner, printed once listening
            url = line.rsplit(" ", 1)[1].strip()
            _converse(client_for(url), "cli")
            with urllib.request.urlopen(url + "/_emulator/calls", timeout=5) as answer:
                assert json.loads(answer.read()) == {"cli": 1}
        finally:
            process.terminate()
