"""The log audit with the root logger at DEBUG, as Lambda sets it for ``log_level=DEBUG``.

Lambda's runtime puts its own handler on the root logger and sets the root logger to
the application log level (emulated by ``local/lambda_logging.py``). At DEBUG, botocore
would print every response body (GetSecretValue's: the signing secrets, the MCP token)
and the HTTP clients and the MCP SDK what they send. Here the whole pipeline runs with
the root logger at DEBUG: the receiver's cold start reading its signing secrets, the
relay, the worker fetching its MCP token and calling the real MCP server on loopback
and the notification target, the reconciler. The audit (``tests/conftest.py``) sees
every record as it was logged, before any redaction, and the root handler's output.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from functions.core.deadline import Deadline
from functions.core.models import State
from functions.receiver import handler as receiver_handler
from local.lambda_logging import LambdaJsonFormatter
from local.testkit import builders
from tests import log_audit
from tests.integration.test_pipeline import Pipeline, pipeline  # noqa: F401 (fixture "pipeline")

# The libraries on this path that can print what they send or receive.
PAYLOAD_LOGGERS = ("botocore", "urllib3", "httpx2", "httpcore2", "mcp", "anyio")
# The other side's processes (AWS, emulated by moto; RelayLink's MCP server) run in
# this process too, but not in a Lambda container: held at WARNING here.
OTHER_SIDE = ("moto", "werkzeug", "uvicorn", "starlette", "sse_starlette")


@pytest.fixture
def lambda_root_at_debug() -> Iterator[logging.Handler]:
    """The root logger as Lambda leaves it for DEBUG, with its handler on stdout."""
    root = logging.getLogger()
    others = {name: logging.getLogger(name).level for name in OTHER_SIDE}
    for name in others:
        logging.getLogger(name).setLevel(logging.WARNING)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(LambdaJsonFormatter())
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.setLevel(level)
        root.removeHandler(handler)
        for name, previous in others.items():
            logging.getLogger(name).setLevel(previous)


def test_nothing_secret_is_logged_with_the_root_logger_at_debug(
    pipeline: Pipeline,  # noqa: F811 (the imported fixture)
    lambda_root_at_debug: logging.Handler,
    _log_audit: log_audit.LogCapture,
) -> None:
    aws = pipeline.aws
    request = builders.signed_request(
        timestamp=aws.clock.value, package_id=builders.PACKAGE_ID, mcp_url=pipeline.mcp_server.url
    )
    log_audit.register_body(request.body)
    log_audit.register_signature(request.headers["X-RelayLink-Signature"])

    # The receiver's first request reads the signing secrets (its cold start).
    response = receiver_handler.lambda_handler(
        builders.http_api_event(request.headers, request.body), builders.LambdaContext()
    )
    pipeline.relay()
    # The worker reads the MCP token and sends it to the MCP server.
    _, result = pipeline.worker().run_visible()
    pipeline.reconciler.run(deadline=Deadline.never())

    assert json.loads(response["body"])["outcome"] == "accepted"
    assert result == {"batchItemFailures": []}
    assert aws.inbox(request.delivery_id).state is State.COMPLETED
    assert logging.getLogger().getEffectiveLevel() == logging.DEBUG
    assert {name: logging.getLogger(name).getEffectiveLevel() for name in PAYLOAD_LOGGERS} == (
        dict.fromkeys(PAYLOAD_LOGGERS, logging.WARNING)
    )
    assert _log_audit.records, "nothing was logged at all"
    assert _log_audit.findings() == []
