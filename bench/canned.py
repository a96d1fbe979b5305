"""An AWS that answers at once: botocore ``before-send`` hooks returning canned responses.

Everything botocore does on the client side still runs (parameter validation,
serialization, endpoint resolution, signing, response parsing); only the network and
the service's own work are replaced by an immediate answer. That is the floor a
receiver built on boto3 cannot go below, so our code's overhead is measured against it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from botocore.awsrequest import AWSResponse

from local.testkit.botocore_hooks import aws_response

DYNAMODB_JSON: Final = "application/x-amz-json-1.0"
SECRETS_JSON: Final = "application/x-amz-json-1.1"

Answer = Callable[[Any], tuple[int, dict[str, Any]]]


class CannedAws:
    """Answers chosen operations of the clients (or sessions) it is installed on.

    ``answers`` maps ``(service, operation)`` to a function of the prepared request
    returning ``(status, payload)``; ``service`` is the event name's service id
    (``dynamodb``, ``secrets-manager``). Operations without an answer go to the network
    (or to moto, if moto is active), so a missing answer is never silently faked.
    """

    def __init__(self, answers: dict[tuple[str, str], Answer]) -> None:
        self._answers = answers
        self._lock = threading.Lock()
        self.answered: Counter[tuple[str, str]] = Counter()

    def install(self, emitter_owner: Any) -> None:
        """Register on a client (``client.meta.events``) or a botocore session (``.events``)."""
        events = emitter_owner.meta.events if hasattr(emitter_owner, "meta") else emitter_owner
        events.register_first("before-send", self._on_send)

    def _on_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        _prefix, service, operation = event_name.split(".", 2)
        answer = self._answers.get((service, operation))
        if answer is None:
            return None
        status, payload = answer(request)
        with self._lock:
            self.answered[(service, operation)] += 1
        content_type = DYNAMODB_JSON if service == "dynamodb" else SECRETS_JSON
        body = json.dumps(payload).encode()
        return aws_response(request, status, body, content_type=content_type, request_id="canned")


def transact_ok(_request: Any) -> tuple[int, dict[str, Any]]:
    """``TransactWriteItems`` succeeded (DynamoDB answers an empty object)."""
    return 200, {}


def secret_value(value: str, arn: str) -> Answer:
    """``GetSecretValue`` returning ``value`` as the secret string."""

    def answer(_request: Any) -> tuple[int, dict[str, Any]]:
        return 200, {
            "ARN": arn,
            "Name": arn.rsplit(":", 1)[-1],
            "VersionId": "00000000-0000-0000-0000-000000000001",
            "SecretString": value,
            "VersionStages": ["AWSCURRENT"],
            "CreatedDate": 1_760_000_000.0,
        }

    return answer


def receiver_answers(secrets_json: str, secret_arn: str) -> dict[tuple[str, str], Answer]:
    """What the receiver's accepted path needs: a transaction and its signing secrets."""
    return {
        ("dynamodb", "TransactWriteItems"): transact_ok,
        ("secrets-manager", "GetSecretValue"): secret_value(secrets_json, secret_arn),
    }


class CannedEndpoint:
    """The same canned answers over HTTP on loopback, for processes the bench starts.

    A fresh interpreter pointed at it with ``AWS_ENDPOINT_URL`` builds, signs and
    sends its requests for real (connection set-up included) and gets an immediate
    answer: its cold start is measured without an emulator's own start-up or speed.
    Operations are told apart by the JSON protocols' ``X-Amz-Target`` header.
    """

    def __init__(self, secrets_json: str, secret_arn: str) -> None:
        answers = {
            "DynamoDB_20120810.TransactWriteItems": (DYNAMODB_JSON, transact_ok),
            "secretsmanager.GetSecretValue": (SECRETS_JSON, secret_value(secrets_json, secret_arn)),
        }
        self.answered: Counter[str] = Counter()
        lock = threading.Lock()
        answered = self.answered

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target", "")
                content_type, answer = answers.get(target, (DYNAMODB_JSON, _unknown))
                status, payload = answer(None)
                with lock:
                    answered[target] += 1
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("x-amzn-RequestId", "canned")
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an IPv4 server's address: (host, port)
        return f"http://{host}:{port}"

    def __enter__(self) -> CannedEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _unknown(_request: Any) -> tuple[int, dict[str, Any]]:
    return 400, {"__type": "UnknownOperationException", "message": "not canned"}
