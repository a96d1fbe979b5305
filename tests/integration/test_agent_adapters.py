"""The agent workflow's adapters: Converse on the Bedrock emulator, SNS on moto, HTTP on loopback.

Each failure is checked for the one thing that matters to the ledger: whether it says
"certainly not applied" (``NotApplied``), "unknown" (a plain ``TransientError``) or
"never" (``PermanentError``, ``Rejected``), and how many requests it took to find out.
The HTTP alert's rows are pinned in tests/integration/test_http_effects.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config

from functions.core.adapters.webhook_signing import WebhookSigner
from functions.core.clock import SystemClock
from functions.core.errors import NotApplied, PermanentError, Rejected, TransientError
from functions.core.package import Package
from functions.core.workflow import WorkflowContext
from functions.workflows.adapters.alert_http import HttpAlerts
from functions.workflows.adapters.alert_sns import SnsAlerts
from functions.workflows.adapters.bedrock_converse import (
    DELIVERY_ID_METADATA_KEY,
    BedrockConverse,
)
from functions.workflows.agent import AgentSettings, Alert, ModelSummary
from functions.workflows.agent_prompt import build_prompt
from functions.workflows.wiring import BEDROCK_CONFIG, SNS_CONFIG, build_alert_webhook
from local.bedrock_emulator import (
    DEFAULT_MODEL_ID,
    ConverseError,
    RunningEmulator,
)
from local.notify_sink import NotifySinkServer
from local.stack import generate_signing_secret
from local.testkit.botocore_hooks import answer_first, aws_response, divert_from_emulator
from local.testkit.clock import FakeClock
from local.testkit.moto_world import REGION

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient
from tests.integration.conftest import BlackHole

ROOT = Path(__file__).resolve().parents[2]
DELIVERY = "6f1c2a9e-3b7d-4c1e-9a52-0d4e8f7b2c11"
KEY = f"{DELIVERY}:alert"
PACKAGE = Package(
    package_id="pkg_01JE7Q9V5K3M8N2P4R6T",
    title="Quarterly supplier review",
    briefing="Compare the three offers and recommend one.",
    attachments=(),
    created_at=datetime(2026, 12, 2, 15, 4, tzinfo=UTC),
)
ALERT = Alert(
    delivery_id=DELIVERY,
    event="package.received",
    package_id=PACKAGE.package_id,
    title=PACKAGE.title,
    summary=ModelSummary("The second offer is cheapest.", "end_turn", 90, 8, refused=False),
    archive_key=f"packages/{DELIVERY}.json",
)


# Short timeouts for the endpoints that never answer.
def one_quick_attempt() -> Config:
    """Short timeouts and a single attempt: an unreachable endpoint fails at once."""
    return Config(connect_timeout=1, read_timeout=0.5, retries={"total_max_attempts": 1})


def refused_endpoint() -> str:
    """A loopback port nobody listens on any more."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- Converse --------------------------------------------------------------------------


def model(
    endpoint: str, *, model_id: str = DEFAULT_MODEL_ID, config: Config = BEDROCK_CONFIG
) -> BedrockConverse:
    client = boto3.client("bedrock-runtime", endpoint_url=endpoint, config=config)
    return BedrockConverse(client=client, model_id=model_id)


def converse(adapter: BedrockConverse) -> Any:
    return adapter.converse(
        build_prompt(PACKAGE), max_tokens=64, temperature=0.2, delivery_id=DELIVERY
    )


def test_converse_sends_the_fenced_prompt_without_tools(emulator: RunningEmulator) -> None:
    answer = converse(model(emulator.url))
    assert answer.text.startswith("Summary of Quarterly supplier review:")
    assert answer.stop_reason == "end_turn"
    assert answer.input_tokens > 0 and answer.output_tokens > 0
    request = emulator.emulator.last_request(DELIVERY)
    assert request is not None
    assert request["requestMetadata"] == {DELIVERY_ID_METADATA_KEY: DELIVERY}
    assert request["inferenceConfig"] == {"maxTokens": 64, "temperature": 0.2}
    assert "toolConfig" not in request
    assert "untrusted third-party data" in request["system"][0]["text"]
    assert emulator.calls() == {DELIVERY: 1}


def test_converse_refusal_is_an_answer(emulator: RunningEmulator) -> None:
    emulator.emulator.refuse_next(1)
    answer = converse(model(emulator.url))
    assert (answer.text, answer.stop_reason, answer.output_tokens) == ("", "content_filtered", 0)


def test_throttling_is_not_applied_after_one_call(emulator: RunningEmulator) -> None:
    emulator.emulator.fail_next(5, ConverseError.THROTTLING)
    with pytest.raises(NotApplied, match="model_throttled"):
        converse(model(emulator.url))
    assert emulator.calls() == {DELIVERY: 1}  # no botocore retry: our back-off retries


@pytest.mark.parametrize(
    "error",
    [ConverseError.VALIDATION, ConverseError.ACCESS_DENIED, ConverseError.RESOURCE_NOT_FOUND],
)
def test_rejected_request_is_permanent_after_one_call(
    emulator: RunningEmulator, error: ConverseError
) -> None:
    emulator.emulator.fail_next(1, error)
    with pytest.raises(PermanentError, match="model_rejected"):
        converse(model(emulator.url))
    assert emulator.calls() == {DELIVERY: 1}


def test_unknown_model_id_is_rejected(emulator: RunningEmulator) -> None:
    with pytest.raises(PermanentError, match="model_rejected"):
        converse(model(emulator.url, model_id="amazon.no-such-model-v9:0"))
    assert emulator.calls() == {DELIVERY: 1}


def test_server_error_may_have_run_the_model(emulator: RunningEmulator) -> None:
    emulator.emulator.fail_next(5, ConverseError.INTERNAL_SERVER)
    with pytest.raises(TransientError, match="model_unavailable") as raised:
        converse(model(emulator.url))
    assert not isinstance(raised.value, NotApplied)
    assert emulator.calls() == {DELIVERY: 1}


def test_unreachable_endpoint_is_not_applied() -> None:
    config = one_quick_attempt()
    with pytest.raises(NotApplied, match="model_unavailable"):
        converse(model(refused_endpoint(), config=config))


# --- SNS ---------------------------------------------------------------------------------


@pytest.fixture
def sns(moto_aws: None) -> SNSClient:
    return boto3.client("sns", region_name=REGION, config=SNS_CONFIG)


@pytest.fixture
def topic(sns: SNSClient) -> tuple[str, SQSClient, str]:
    """A topic with an SQS queue subscribed (raw delivery): (topic ARN, sqs, queue URL)."""
    arn = sns.create_topic(Name="relaylink-alerts")["TopicArn"]
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="alerts")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )
    return arn, sqs, queue_url


def answer_every_publish(sns: SNSClient, status: int, code: str) -> list[int]:
    """Make each HTTP attempt of Publish fail with ``code``; returns the attempt count."""
    attempts: list[int] = []
    body = (
        '<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error>'
        f"<Type>Sender</Type><Code>{code}</Code><Message>injected</Message></Error>"
        "<RequestId>injected</RequestId></ErrorResponse>"
    ).encode()

    def answer(request: AWSPreparedRequest, **_: object) -> AWSResponse:
        attempts.append(1)
        response = aws_response(
            request, status, body, content_type="text/xml", request_id="injected"
        )
        divert_from_emulator(request)
        return response

    answer_first(sns, "before-send.sns.Publish", answer)
    return attempts


def test_sns_publish_carries_the_alert_and_its_key(
    sns: SNSClient, topic: tuple[str, SQSClient, str]
) -> None:
    arn, sqs, queue_url = topic
    SnsAlerts(client=sns, topic_arn=arn).send(ALERT, idempotency_key=KEY)
    (message,) = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    assert "The second offer is cheapest." in message["Body"]
    assert message["MessageAttributes"]["idempotency_key"]["StringValue"] == KEY


def test_sns_missing_topic_is_rejected_not_in_doubt(sns: SNSClient) -> None:
    missing = "arn:aws:sns:us-east-1:123456789012:no-such-topic"
    with pytest.raises(Rejected, match="alert_rejected"):
        SnsAlerts(client=sns, topic_arn=missing).send(ALERT, idempotency_key=KEY)


@pytest.mark.parametrize(
    ("status", "code", "raised", "error_code"),
    [
        (400, "Throttling", NotApplied, "alert_throttled"),
        (400, "KMSThrottling", NotApplied, "alert_throttled"),
        (429, "TooManyRequestsException", NotApplied, "alert_throttled"),
        (403, "ExpiredToken", NotApplied, "alert_throttled"),
        (403, "AuthorizationError", Rejected, "alert_rejected"),
        (404, "NotFound", Rejected, "alert_rejected"),
        (400, "InvalidParameter", Rejected, "alert_rejected"),
        (400, "KMSDisabled", Rejected, "alert_rejected"),
        (500, "InternalError", TransientError, "alert_unconfirmed"),
        (503, "ServiceUnavailable", TransientError, "alert_unconfirmed"),
    ],
)
def test_sns_error_answers_map_to_their_outcome_in_one_attempt(
    sns: SNSClient, status: int, code: str, raised: type[Exception], error_code: str
) -> None:
    attempts = answer_every_publish(sns, status, code)
    arn = "arn:aws:sns:us-east-1:123456789012:relaylink-alerts"
    with pytest.raises(raised, match=error_code) as error:
        SnsAlerts(client=sns, topic_arn=arn).send(ALERT, idempotency_key=KEY)
    assert type(error.value) is raised  # an unknown outcome is never NotApplied
    assert attempts == [1]


def test_sns_server_error_is_unknown_and_never_resent(
    sns: SNSClient, topic: tuple[str, SQSClient, str]
) -> None:
    attempts = answer_every_publish(sns, 500, "InternalError")
    with pytest.raises(TransientError, match="alert_unconfirmed") as raised:
        SnsAlerts(client=sns, topic_arn=topic[0]).send(ALERT, idempotency_key=KEY)
    assert not isinstance(raised.value, NotApplied)
    assert attempts == [1]  # botocore did not publish again on its own


def test_sns_unreachable_is_not_applied_and_silence_is_unknown(black_hole: BlackHole) -> None:
    config = one_quick_attempt()
    arn = "arn:aws:sns:us-east-1:123456789012:relaylink-alerts"
    refused = boto3.client("sns", endpoint_url=refused_endpoint(), config=config)
    with pytest.raises(NotApplied, match="alert_unavailable"):
        SnsAlerts(client=refused, topic_arn=arn).send(ALERT, idempotency_key=KEY)
    silent = boto3.client("sns", endpoint_url=black_hole.url, config=config)
    with pytest.raises(TransientError, match="alert_unconfirmed") as raised:
        SnsAlerts(client=silent, topic_arn=arn).send(ALERT, idempotency_key=KEY)
    assert not isinstance(raised.value, NotApplied)


# --- HTTP --------------------------------------------------------------------------------


def test_http_alert_posts_the_payload_with_the_key() -> None:
    with NotifySinkServer() as sink:
        HttpAlerts(url=sink.url, timeout_seconds=2, allow_insecure_loopback=True).send(
            ALERT, idempotency_key=KEY
        )
        assert sink.sink.counts() == {KEY: 1}
        assert sink.sink.body(KEY) == json.loads(json.dumps(ALERT.payload()))


SIGNING_SECRET = "whsec_" + base64.b64encode(b"alert-signing-key-of-32-bytes..!").decode()


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[Received]]]:
    """A loopback endpoint that answers 204 and keeps every request's headers and bytes."""
    received: list[Received] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/T000/B000/credential", received
    server.shutdown()
    server.server_close()


def verified(received: Received, secret: str, *, now: int, tolerance: int = 300) -> bytes:
    """What a Standard Webhooks receiver does (the specification, "Verifying webhooks")."""
    message_id = received.headers["webhook-id"]
    timestamp = received.headers["webhook-timestamp"]
    assert abs(now - int(timestamp)) <= tolerance
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = f"{message_id}.{timestamp}.".encode() + received.body
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    given = [part.split(",", 1)[1] for part in received.headers["webhook-signature"].split()]
    assert any(hmac.compare_digest(expected, signature) for signature in given)
    return received.body


def test_http_alert_is_signed_for_a_standard_webhooks_receiver(
    endpoint: tuple[str, list[Received]],
) -> None:
    url, received = endpoint
    clock = FakeClock(1_765_000_000)
    signer = WebhookSigner(secret=SIGNING_SECRET, clock=clock)
    alerts = HttpAlerts(url=url, timeout_seconds=2, allow_insecure_loopback=True, signer=signer)
    alerts.send(ALERT, idempotency_key=KEY)
    clock.advance(30)
    alerts.send(ALERT, idempotency_key=KEY)  # a retry: the same id, its own timestamp

    first, retry = received
    assert json.loads(verified(first, SIGNING_SECRET, now=clock.now())) == ALERT.payload()
    assert first.headers["webhook-id"] == retry.headers["webhook-id"] == KEY
    assert int(retry.headers["webhook-timestamp"]) == int(first.headers["webhook-timestamp"]) + 30
    verified(retry, SIGNING_SECRET, now=clock.now())
    forged = Received(first.headers, first.body.replace(b"cheapest", b"dearest!"))
    with pytest.raises(AssertionError):
        verified(forged, SIGNING_SECRET, now=clock.now())


def test_the_alert_url_and_signing_secret_are_read_from_their_secrets(
    moto_aws: None, endpoint: tuple[str, list[Received]]
) -> None:
    url, received = endpoint
    secrets = boto3.client("secretsmanager", region_name=REGION)
    url_arn = secrets.create_secret(Name="alert-url", SecretString=url + "\n")["ARN"]
    signing_arn = secrets.create_secret(Name="alert-signing", SecretString=SIGNING_SECRET)["ARN"]
    settings = AgentSettings.from_mapping(
        {"alert_url_secret_arn": url_arn, "alert_signing_secret_arn": signing_arn}
    )
    context = WorkflowContext(
        notify_url=None,
        archive_bucket="archive",
        allow_insecure_loopback=True,
        timeout_seconds=2,
        clock=FakeClock(1_765_000_000),
        settings={},
    )
    build_alert_webhook(settings, context).send(ALERT, idempotency_key=KEY)
    (request,) = received
    verified(request, SIGNING_SECRET, now=1_765_000_000)

    # Read on the first alert: a secret that cannot be read, or holds a URL that is not
    # HTTPS, sends nothing (the message names the setting, never the value).
    missing = AgentSettings.from_mapping({"alert_url_secret_arn": url_arn + "x"})
    with pytest.raises(NotApplied, match="alert_secret_unavailable") as unread:
        build_alert_webhook(missing, context).send(ALERT, idempotency_key=KEY)
    assert "alert_url_secret_arn: the secret cannot be read" in str(unread.value.__cause__)
    secrets.put_secret_value(SecretId=url_arn, SecretString="ftp://hooks.example/T000/secret")
    with pytest.raises(NotApplied, match="alert_secret_unavailable") as refused:
        build_alert_webhook(settings, context).send(ALERT, idempotency_key=KEY)
    assert "alert_url_secret_arn must be https" in str(refused.value.__cause__)
    assert "T000" not in str(refused.value.__cause__)
    assert len(received) == 1
    # A plain URL beside a signing secret is still checked at cold start.
    plain = {"alert_url": "http://hooks.example/x", "alert_signing_secret_arn": signing_arn}
    with pytest.raises(ValueError, match="alert_url must be https"):
        build_alert_webhook(AgentSettings.from_mapping(plain), context)


def test_a_rotated_alert_signing_secret_reaches_a_warm_channel_once_its_read_has_aged(
    moto_aws: None, endpoint: tuple[str, list[Received]]
) -> None:
    url, received = endpoint
    secrets = boto3.client("secretsmanager", region_name=REGION)
    arn = secrets.create_secret(Name="alert-signing-rotated", SecretString=SIGNING_SECRET)["ARN"]
    settings = AgentSettings.from_mapping({"alert_url": url, "alert_signing_secret_arn": arn})
    clock = FakeClock(1_765_000_000)
    context = WorkflowContext(
        notify_url=None,
        archive_bucket="archive",
        allow_insecure_loopback=True,
        timeout_seconds=2,
        clock=clock,
        settings={},
        secrets_max_age_seconds=60,
    )
    channel = build_alert_webhook(settings, context)
    channel.send(ALERT, idempotency_key=KEY)
    rotated = generate_signing_secret()
    secrets.put_secret_value(SecretId=arn, SecretString=rotated)
    clock.advance(59)
    channel.send(ALERT, idempotency_key=KEY)  # read 59 s ago: the old key still signs
    clock.advance(1)
    channel.send(ALERT, idempotency_key=KEY)  # 60 s: read again, the new key signs
    first, kept, reread = received
    verified(first, SIGNING_SECRET, now=clock.now())
    verified(kept, SIGNING_SECRET, now=clock.now())
    verified(reread, rotated, now=clock.now())
    with pytest.raises(AssertionError):
        verified(reread, SIGNING_SECRET, now=clock.now())


def test_the_docs_receiver_verifies_a_signed_alert(endpoint: tuple[str, list[Received]]) -> None:
    # The verifying receiver docs/workflows.md shows, run as written, on a real POST.
    docs = (ROOT / "docs" / "workflows.md").read_text()
    code = docs.split("A receiver verifies it", 1)[1].split("```python\n", 1)[1].split("```")[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/workflows.md", "exec"), namespace)
    url, received = endpoint
    signer = WebhookSigner(secret=SIGNING_SECRET, clock=SystemClock())
    alerts = HttpAlerts(url=url, timeout_seconds=2, allow_insecure_loopback=True, signer=signer)
    alerts.send(ALERT, idempotency_key=KEY)
    (request,) = received
    assert namespace["verify"](SIGNING_SECRET, request.headers, request.body) == request.body
    with pytest.raises(ValueError, match="no valid signature"):
        namespace["verify"](SIGNING_SECRET, request.headers, request.body + b" ")
