"""The receiver Lambda: API Gateway event in, one use-case call, HTTP response out.

Logs and metrics carry the outcome, a fixed reason code and (once verified) the
delivery id; never the event, body, header values, path or a secret (docs/contract.md,
Request: the receiver URL may itself hold a token).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from botocore.config import Config

from functions.core import metric_names, settings_table, tracing, wire
from functions.core.accept import Acceptance, AcceptDelivery, too_large, unavailable
from functions.core.adapters import span_export
from functions.core.adapters.dynamodb_inbox import DynamoDbInbox
from functions.core.adapters.signing_secrets import SecretsManagerSigningSecrets
from functions.core.adapters.storage_retry import StorageRetry
from functions.core.clock import Clock, SystemClock
from functions.core.delivery import InvalidReason
from functions.core.env_parsers import SettingsError
from functions.core.lazy_deps import LazyDeps
from functions.core.models import Outcome
from functions.core.observability import log_with_counts, logger
from functions.core.trace_context import parse_traceparent, sample
from functions.receiver.http_request import BodyTooLarge, MalformedEvent, parse_event
from functions.receiver.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_secretsmanager.client import SecretsManagerClient

REASON_MALFORMED_EVENT: Final = "malformed_request"
REASON_MISCONFIGURED: Final = "receiver_misconfigured"
REASON_INTERNAL: Final = "internal_error"
_JSON_HEADERS: Final = {"Content-Type": "application/json"}

# RelayLink gives up on an attempt after 10 s (docs/contract.md, Retries and timing).
# Bounded timeouts and attempts keep one request well inside that; a slower answer
# only costs a retry.
# DynamoDB keeps botocore's legacy mode: its DynamoDB policy backs off from 50 ms, where
# standard mode would wait up to 1 s, then 2 s, out of that 10 s budget.
# No client-side parameter validation: the items come from typed builders
# (functions/core/adapters/dynamodb_items.py, covered by tests) and DynamoDB validates
# every request itself; botocore's walk over the request costs about 85 µs, a sixth of
# an accepted delivery's CPU time (docs/benchmarks.md). A malformed request would be
# refused by DynamoDB and answered 503 internal_error, as a validation error is now.
DYNAMODB_CONFIG: Final = Config(
    connect_timeout=1,
    read_timeout=2,
    retries={"mode": "legacy", "total_max_attempts": 3},
    parameter_validation=False,
)
SECRETS_CONFIG: Final = Config(
    connect_timeout=1, read_timeout=2, retries={"mode": "standard", "total_max_attempts": 2}
)


@dataclass(frozen=True, slots=True)
class Deps:
    """Everything the handler needs, built once per container.

    Attributes:
        trace_sample_percent: Percent of new traces recorded (a receipt without
            RelayLink's ``traceparent`` decides here, once for the whole delivery).
    """

    accept: AcceptDelivery
    trace_sample_percent: int = settings_table.TRACE_SAMPLE_PERCENT.default


def build_deps(
    settings: Settings,
    *,
    dynamodb: DynamoDBClient | None = None,
    secretsmanager: SecretsManagerClient | None = None,
    clock: Clock | None = None,
    retry: StorageRetry | None = None,
) -> Deps:
    """Wire the use case to its adapters; tests pass their own clients, clock and
    retry timing (its retries are counted here either way)."""
    if dynamodb is None or secretsmanager is None:
        # botocore's own session rather than boto3's: the same clients (region and
        # credentials from the environment), without importing boto3 and s3transfer
        # on the cold path. One session, so both clients share its loaded data.
        import botocore.session  # noqa: PLC0415 (only production wiring needs a session)

        # botocore's session types every client as its base class; they are the
        # very clients boto3 would make.
        session = botocore.session.get_session()
        dynamodb = dynamodb or cast(
            "DynamoDBClient", session.create_client("dynamodb", config=DYNAMODB_CONFIG)
        )
        secretsmanager = secretsmanager or cast(
            "SecretsManagerClient",
            session.create_client("secretsmanager", config=SECRETS_CONFIG),
        )
    clock = clock or SystemClock()
    span_export.install_from_env(os.environ)
    return Deps(
        accept=AcceptDelivery(
            inbox=DynamoDbInbox(
                dynamodb,
                settings.table_name,
                received_log_shards=settings.received_log_shards,
                retry=dataclasses.replace(retry or StorageRetry(), on_retry=_count_retry),
            ),
            secrets=SecretsManagerSigningSecrets(
                secret_arn=settings.signing_secrets_arn,
                max_age_seconds=settings.secrets_max_age_seconds,
                client=secretsmanager,
                clock=clock,  # one clock for the timestamp check and the secrets' age
            ),
            clock=clock,
            retention_seconds=settings.retention_seconds,
        ),
        trace_sample_percent=settings.trace_sample_percent,
    )


# The container's dependencies, built from the environment on first use; tests and
# the local runtime replace them with ``container_deps.set``.
container_deps: Final = LazyDeps(lambda: build_deps(Settings.from_env(os.environ)))


def handle(event: object, deps: Deps) -> Acceptance:
    """Parse the API Gateway event and run the use case."""
    try:
        request = parse_event(event, max_body_bytes=wire.MAX_BODY_BYTES)
    except BodyTooLarge:
        return too_large()
    except MalformedEvent:
        return Acceptance(Outcome.INVALID, REASON_MALFORMED_EVENT)
    return deps.accept(request.headers, request.body)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (API Gateway HTTP API payload 2.0; REST 1.0 tolerated)."""
    # Passed per log line rather than appended to the logger: invocations may overlap
    # in one process (local runtime), and appended keys are shared.
    ids = {
        "aws_request_id": getattr(context, "aws_request_id", None),
        "api_request_id": _api_request_id(event),
    }
    try:
        deps: Deps | Exception = container_deps.get()
    except Exception as exc:  # noqa: BLE001 (answered 503 and logged in the accept span below)
        deps = exc
    # The accept span: the first of the delivery's trace (or the next of RelayLink's,
    # when its request carries a traceparent, whose flag decides the sampling); the
    # line below names the trace. The decision travels in the flags stored with the
    # delivery: every later hop follows it.
    parent = parse_traceparent(_incoming_traceparent(event))
    with tracing.span(
        tracing.SPAN_ACCEPT,
        parent=parent,
        attributes={"api_request_id": ids["api_request_id"]},
        sampled=parent is not None or _sampled(deps),
    ) as accepting:
        ids["trace_id"] = accepting.context.trace_id
        result = _accept(event, ids, deps)
        if accepting.recorded:  # a span nothing records takes no attributes: skip the work
            accepting.set("outcome", result.outcome.value)
            accepting.set("reason", result.reason)
            accepting.set("delivery_id", result.delivery_id)  # once the signature matched
        _record(result, ids)
    tracing.flush()
    return _response(result)


def _sampled(deps: Deps | Exception) -> bool:
    """A new trace's sampling decision (a broken receiver's answer is always traced)."""
    return isinstance(deps, Exception) or sample(deps.trace_sample_percent)


def _accept(
    event: dict[str, Any], ids: dict[str, str | None], deps: Deps | Exception
) -> Acceptance:
    """The use case's verdict, or the 503 that a broken receiver answers."""
    try:
        if isinstance(deps, Exception):
            raise deps
        return handle(event, deps)
    except SettingsError as exc:
        # The message names the variable, never a value.
        logger.error("receiver settings are invalid", extra={**ids, "error": str(exc)})
        return unavailable(REASON_MISCONFIGURED)
    except Exception as exc:  # noqa: BLE001 (the last line: never a 500 or a stack trace to the sender)
        # 503 rather than 500: RelayLink retries either way, and a retry after the fix
        # is exactly what a bug here needs. Log where it happened, not the message,
        # which could quote input.
        logger.error(
            "receiver failed unexpectedly",
            extra={**ids, "error_type": type(exc).__name__, "where": _where(exc)},
        )
        return unavailable(REASON_INTERNAL)


def _count_retry() -> None:
    """One line, and one count of the retries metric, per receipt retried."""
    current = tracing.current()  # the accept span: this line names its trace
    log_with_counts(
        logging.INFO,
        "receipt retried after throttling",
        {} if current is None else {"trace_id": current.trace_id},
        (metric_names.METRIC_RECEIPT_RETRIES,),
    )


def _record(result: Acceptance, ids: dict[str, str | None]) -> None:
    """One log line per request, which also carries the outcome's metric (EMF)."""
    quarantined = result.outcome is Outcome.QUARANTINED
    log_with_counts(
        logging.WARNING if quarantined else logging.INFO,
        "delivery handled",
        {
            **ids,
            "outcome": result.outcome.value,
            "reason": result.reason,
            "status": result.status,
            "delivery_id": result.delivery_id,
        },
        _counted(result.outcome, result.reason),
    )


@functools.lru_cache(maxsize=128)
def _counted(outcome: Outcome, reason: str | None) -> tuple[str, ...]:
    """The metrics one outcome and reason count: a fixed set each, named once."""
    counted = [metric_names.receiver_outcome_metric(outcome.value)]
    if reason == InvalidReason.TOO_DEEP.value:
        counted.append(metric_names.METRIC_BODY_TOO_DEEP)
    return tuple(counted)


def _response(result: Acceptance) -> dict[str, Any]:
    return {
        "statusCode": result.status,
        "headers": dict(_JSON_HEADERS),
        "body": _response_body(result.outcome, result.reason),
        "isBase64Encoded": False,
    }


@functools.lru_cache(maxsize=128)
def _response_body(outcome: Outcome, reason: str | None) -> str:
    """The body for one outcome and reason: a fixed code each, so few bodies exist and
    each is serialized once per container."""
    return json.dumps({"outcome": outcome.value, "reason": reason})


def _api_request_id(event: object) -> str | None:
    """API Gateway's own request id (generated by AWS, not sent by the caller)."""
    context = event.get("requestContext") if isinstance(event, dict) else None
    request_id = context.get("requestId") if isinstance(context, dict) else None
    return request_id if isinstance(request_id, str) else None


def _incoming_traceparent(event: object) -> str | None:
    """RelayLink's ``traceparent`` header, if it sent one (HTTP API events lower-case
    header names; a REST event keeps the sender's case)."""
    headers = event.get("headers") if isinstance(event, dict) else None
    if not isinstance(headers, dict):
        return None
    value = headers.get(wire.HEADER_TRACEPARENT) or headers.get("Traceparent")
    return value if isinstance(value, str) else None


def _where(exc: BaseException) -> list[str]:
    return [
        f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}"
        for f in traceback.extract_tb(exc.__traceback__)
    ]
