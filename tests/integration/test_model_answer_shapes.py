"""Every unusable model answer is one error with one retry policy.

A loopback server answers Bedrock's ``Converse`` with 200 and a body that is no JSON,
JSON of another shape (which botocore's parser trips on), or parsed JSON missing a
reply's fields: each is ``TransientError("model_answer_invalid")``, never the parser's
own exception (which the worker took for a bug: ``unexpected_error``, five attempts).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest
from botocore.config import Config

from functions.core.errors import TransientError
from functions.workflows.adapters.bedrock_converse import BedrockConverse
from functions.workflows.agent_prompt import fenced_prompt

ANSWERS = {
    "no JSON": b"not json",
    "output a string": json.dumps({"output": "x"}).encode(),
    "content a string": json.dumps(
        {"output": {"message": {"content": "abc"}}, "usage": 5, "stopReason": 3}
    ).encode(),
    "tokens not a number": json.dumps(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": "a", "outputTokens": 1, "totalTokens": 2},
        }
    ).encode(),
    "a list": b"[]",
    "no usage": json.dumps(
        {"output": {"message": {"role": "assistant", "content": []}}, "stopReason": "end_turn"}
    ).encode(),
}


class _Answers(BaseHTTPRequestHandler):
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    httpd = HTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("shape", sorted(ANSWERS))
def test_an_unusable_answer_is_model_answer_invalid(server: HTTPServer, shape: str) -> None:
    _Answers.body = ANSWERS[shape]
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=f"http://127.0.0.1:{server.server_port}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": 1}),
    )
    model = BedrockConverse(client=client, model_id="amazon.nova-micro-v1:0")
    prompt = fenced_prompt({"title": "t"}, instructions="Summarise.", task="Go.")
    with pytest.raises(TransientError) as failed:
        model.converse(prompt, max_tokens=16, temperature=0.2, delivery_id="d-1")
    assert failed.value.code == "model_answer_invalid"
