"""Figure 2: the receiver's time for an accepted delivery over a bare ``TransactWriteItems``.

Both sides send the very same transaction (captured from the handler's own call and
replayed with a fresh delivery id) to the same DynamoDB: one that answers at once
(:mod:`bench.canned`), then moto with a small table. The bare side is a plain boto3
client (what a hand-written receiver calls) and, beside it, a client with the
receiver's own configuration (so our Python code alone is visible). Measurements are
interleaved (handler, bare, handler, ...) in blocks, and each block gives one ratio
of medians, so slow drift of a shared machine cancels within a block; the figure is
the median of the block ratios with their spread.
"""

from __future__ import annotations

import copy
import functools
import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from bench import canned
from bench.output import quiet_output
from bench.receiver_rig import (
    SECRET_ARN,
    SECRETS_JSON,
    accepted_event,
    bench_session,
    clients,
    make_rig,
)
from bench.stats import Summary, summarize
from functions.core import (
    env_names,
    metric_names,
    observability,
    settings_table,
    table_layout,
    wire,
)
from functions.core.accept import Acceptance, AcceptDelivery
from functions.core.adapters import dynamodb_items
from functions.core.delivery import Delivery
from functions.core.models import Outcome, QuarantineRecord, WorkItem
from functions.core.observability import logger
from functions.receiver import handler
from local.aws_resources import create_table
from local.testkit import builders
from local.testkit.moto_world import REGION, TABLE, moto_world
from local.testkit.receiver_rig import ReceiverRig

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from mypy_boto3_dynamodb.client import DynamoDBClient

TARGET = 1.25
SHARDS = table_layout.DEFAULT_RECEIVED_LOG_SHARDS
PLAIN = "plain_boto3"
SAME_CONFIG = "same_config"


@dataclass(frozen=True)
class OverheadResult:
    """Block ratios handler/bare for each bare client, and the per-call times (µs)."""

    ratios: dict[str, Summary]  # bare client name -> handler/bare, one per block
    handler_us: Summary
    bare_us: dict[str, Summary]
    blocks: int
    per_block: int
    handler_calls: int  # AWS API calls the handler made over the timed run
    bare_calls: dict[str, int]
    # Per bare client: the median block ratio of each process (one entry per process).
    process_ratios: dict[str, list[float]] = field(default_factory=dict)
    # The samples behind the summaries, for pooling runs of several processes.
    block_ratios: dict[str, list[float]] = field(default_factory=dict, repr=False)
    handler_samples: list[float] = field(default_factory=list, repr=False)
    bare_samples: dict[str, list[float]] = field(default_factory=dict, repr=False)

    @property
    def processes(self) -> int:
        return max((len(r) for r in self.process_ratios.values()), default=1)

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": {name: r.to_json() for name, r in self.ratios.items()},
            "processes": self.processes,
            "process_ratios": {
                name: [round(r, 4) for r in ratios] for name, ratios in self.process_ratios.items()
            },
            "handler_us": self.handler_us.to_json(1),
            "bare_us": {name: b.to_json(1) for name, b in self.bare_us.items()},
            "blocks": self.blocks,
            "per_block": self.per_block,
            "handler_api_calls": self.handler_calls,
            "bare_api_calls": self.bare_calls,
        }


class _Capture:
    """The parameters of a client's next ``TransactWriteItems``, and its call count.

    The parameter hook is removed once it has fired, so the timed calls carry
    only the counter (on every client alike).
    """

    _PARAMS_EVENT = "provide-client-params.dynamodb.TransactWriteItems"

    def __init__(self, client: BaseClient) -> None:
        self.params: dict[str, Any] | None = None
        self.calls = 0
        self._events = client.meta.events
        self._events.register(self._PARAMS_EVENT, self._on_params)
        self._events.register("before-call.dynamodb.*", self._on_call)

    def _on_params(self, params: dict[str, Any], **_: Any) -> None:
        self.params = copy.deepcopy(params)
        self._events.unregister(self._PARAMS_EVENT, self._on_params)

    def _on_call(self, **_: Any) -> None:
        self.calls += 1


def _with_delivery_id(params: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The same transaction for another delivery id (every string holding it rewritten)."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return dict(swap(params))


def _time_us(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1000


def measure(
    rig: ReceiverRig,
    bare_clients: dict[str, DynamoDBClient],
    *,
    blocks: int,
    per_block: int,
    between_blocks: Callable[[], None] | None = None,
) -> OverheadResult:
    """Interleave handler and bare calls; one ratio of medians per block and bare client.

    ``rig`` and every bare client must reach the same DynamoDB. The first accepted
    delivery (which also fetches the signing secrets) is a warm-up and is not timed;
    so is one call of each bare client.
    """
    handler_capture = _Capture(rig.dynamodb)
    bare_captures = {name: _Capture(client) for name, client in bare_clients.items()}
    rig.install()
    with quiet_output():
        warm = accepted_event()
        if rig.outcome(warm) != "accepted":
            raise RuntimeError("warm-up delivery was not accepted")
        template = handler_capture.params
        assert template is not None
        template_id = warm["headers"][wire.HEADER_DELIVERY]

        def bare_params() -> dict[str, Any]:
            return _with_delivery_id(template, template_id, str(uuid.uuid4()))

        for client in bare_clients.values():
            client.transact_write_items(**bare_params())
        ratios: dict[str, list[float]] = {name: [] for name in bare_clients}
        handler_all: list[float] = []
        bare_all: dict[str, list[float]] = {name: [] for name in bare_clients}
        handler_before = handler_capture.calls
        bare_before = {name: c.calls for name, c in bare_captures.items()}
        for _ in range(blocks):
            if between_blocks is not None:
                between_blocks()
            events = [accepted_event() for _ in range(per_block)]
            # Lambda's runtime makes the context and reads the response: both are made
            # and read outside the timed call, as the bare side's parameters are.
            contexts = [builders.LambdaContext() for _ in range(per_block)]
            params = {name: [bare_params() for _ in range(per_block)] for name in bare_clients}
            handler_times: list[float] = []
            bare_times: dict[str, list[float]] = {name: [] for name in bare_clients}
            responses: list[dict[str, Any]] = []
            for i, event in enumerate(events):
                handler_times.append(
                    _time_us(functools.partial(_keep_response, event, contexts[i], responses))
                )
                for name, client in bare_clients.items():
                    p = params[name][i]
                    bare_times[name].append(
                        _time_us(functools.partial(client.transact_write_items, **p))
                    )
            outcomes = {json.loads(r["body"])["outcome"] for r in responses}
            if outcomes != {"accepted"}:
                raise RuntimeError(f"expected only accepted deliveries, got {outcomes}")
            handler_median = statistics.median(handler_times)
            for name, times in bare_times.items():
                ratios[name].append(handler_median / statistics.median(times))
                bare_all[name] += times
            handler_all += handler_times
    return OverheadResult(
        ratios={name: summarize(r) for name, r in ratios.items()},
        handler_us=summarize(handler_all),
        bare_us={name: summarize(b) for name, b in bare_all.items()},
        blocks=blocks,
        per_block=per_block,
        handler_calls=handler_capture.calls - handler_before,
        bare_calls={name: c.calls - bare_before[name] for name, c in bare_captures.items()},
        process_ratios={name: [statistics.median(r)] for name, r in ratios.items()},
        block_ratios=ratios,
        handler_samples=handler_all,
        bare_samples=bare_all,
    )


def pooled(runs: Sequence[OverheadResult]) -> OverheadResult:
    """One result from runs in separate processes: every block and call of each.

    Why several processes: where an interpreter's code and objects land in memory
    (address-space randomization, hash seeds) moves the handler's time between
    processes more than its time moves within one, and Lambda serves from many
    containers; one process is a sample of one (pyperf spawns processes for this).
    """
    names = list(runs[0].block_ratios)
    return OverheadResult(
        ratios={n: summarize([r for run in runs for r in run.block_ratios[n]]) for n in names},
        handler_us=summarize([t for run in runs for t in run.handler_samples]),
        bare_us={n: summarize([t for run in runs for t in run.bare_samples[n]]) for n in names},
        blocks=sum(run.blocks for run in runs),
        per_block=runs[0].per_block,
        handler_calls=sum(run.handler_calls for run in runs),
        bare_calls={n: sum(run.bare_calls[n] for run in runs) for n in names},
        process_ratios={n: [r for run in runs for r in run.process_ratios[n]] for n in names},
        block_ratios={n: [r for run in runs for r in run.block_ratios[n]] for n in names},
        handler_samples=[t for run in runs for t in run.handler_samples],
        bare_samples={n: [t for run in runs for t in run.bare_samples[n]] for n in names},
    )


def _keep_response(
    event: dict[str, Any], context: builders.LambdaContext, responses: list[dict[str, Any]]
) -> None:
    responses.append(handler.lambda_handler(event, context))


def bare_clients(session: boto3.Session) -> dict[str, DynamoDBClient]:
    """The bare side: a plain boto3 client, and one configured exactly as the receiver's.

    ``plain`` is what a hand-written receiver would call (botocore's defaults);
    ``same_config`` isolates our Python code from the client settings we chose.
    """
    return {
        PLAIN: session.client("dynamodb", region_name=REGION),
        SAME_CONFIG: session.client("dynamodb", region_name=REGION, config=handler.DYNAMODB_CONFIG),
    }


def canned_rig() -> tuple[ReceiverRig, dict[str, DynamoDBClient], canned.CannedAws]:
    """The receiver and the bare clients, all answered at once by the same canned AWS."""
    session = bench_session()
    dynamodb, secretsmanager = clients(session)
    bare = bare_clients(session)
    aws = canned.CannedAws(canned.receiver_answers(SECRETS_JSON, SECRET_ARN))
    for client in (dynamodb, secretsmanager, *bare.values()):
        aws.install(client)
    return make_rig(dynamodb, secretsmanager), bare, aws


def as_deployed() -> None:
    """The Powertools settings the default stack gives the receiver
    (infra/lambda_function.py): tracing off, so its lines leave X-Ray's trace id out
    and read no environment variable for it."""
    tracing_on = settings_table.TRACING.default
    observability.apply_trace_setting(
        {env_names.ENV_POWERTOOLS_TRACE_DISABLED: "false" if tracing_on else "true"}
    )


def against_canned(*, blocks: int, per_block: int) -> OverheadResult:
    """Figure 2, main: both sides against a DynamoDB that answers at once."""
    as_deployed()
    rig, bare, _ = canned_rig()
    return measure(rig, bare, blocks=blocks, per_block=per_block)


def against_moto(*, blocks: int, per_block: int) -> OverheadResult:
    """Figure 2, beside it: both against moto, with a new table before every block.

    moto's transactions copy the whole table and its stream records, so a growing
    table would hide our overhead behind the emulator's; at most ``3 * per_block``
    items exist at once.
    """
    as_deployed()
    with moto_world() as world:
        arn = world.create_secret(SECRETS_JSON, prefix="relaylink-bench-signing")
        session = bench_session()
        dynamodb, secretsmanager = clients(session)
        rig = make_rig(dynamodb, secretsmanager, secret_arn=arn, table=TABLE)

        def fresh_table() -> None:
            # Deleting items would leave moto's stream records behind (they are copied
            # by every transaction too); a new table starts with an empty stream.
            world.dynamodb.delete_table(TableName=TABLE)
            create_table(world.dynamodb, TABLE)

        return measure(
            rig,
            {PLAIN: session.client("dynamodb", region_name=REGION)},
            blocks=blocks,
            per_block=per_block,
            between_blocks=fresh_table,
        )


class _NoStorageInbox:
    """An inbox that builds the items (as the real adapter does) and stores nothing."""

    def record(
        self,
        delivery: Delivery,
        work: WorkItem | None,
        *,
        body_sha256: str,
        received_at: int,
        expires_at: int,
    ) -> None:
        dynamodb_items.accepted_to_item(
            delivery, work, body_sha256=body_sha256, received_at=received_at, expires_at=expires_at
        )
        if work is not None:
            dynamodb_items.outbox_to_item(
                work, created_at=received_at, expires_at=expires_at, shards=SHARDS
            )

    def quarantine(self, record: QuarantineRecord) -> None:
        dynamodb_items.quarantine_to_item(record)


def own_code(*, repeats: int) -> dict[str, Summary]:
    """Where the receiver's own time goes, with storage taken out (µs per request).

    ``handler``: the whole handler with an inbox that stores nothing; ``after_call``:
    the same, each time right after a bare ``TransactWriteItems`` (as in the handler,
    our code then runs beside botocore's much larger working set); ``record``: its
    per-request log line and EMF metric (``handler._record``); ``log_line`` and
    ``emf_metric``: each of those alone, as the handler makes them.
    """
    as_deployed()
    rig, bare, _aws = canned_rig()
    capture = _Capture(rig.dynamodb)
    with quiet_output():
        warm = accepted_event()
        if rig.outcome(warm) != "accepted":  # fills the secrets cache
            raise RuntimeError("warm-up delivery was not accepted")
        template = capture.params
        assert template is not None
        template_id = warm["headers"][wire.HEADER_DELIVERY]
        accept = AcceptDelivery(
            inbox=_NoStorageInbox(),
            secrets=rig.deps.accept._secrets,
            clock=rig.clock,
            retention_seconds=settings_table.INBOX_RETENTION_DAYS.default * 86400,
        )
        handler.container_deps.set(handler.Deps(accept=accept))
        context = builders.LambdaContext()
        events = [accepted_event() for _ in range(repeats)]
        whole = [_time_us(functools.partial(handler.lambda_handler, e, context)) for e in events]
        client = bare[SAME_CONFIG]
        after_call: list[float] = []
        for event in [accepted_event() for _ in range(repeats)]:
            client.transact_write_items(
                **_with_delivery_id(template, template_id, str(uuid.uuid4()))
            )
            after_call.append(_time_us(functools.partial(handler.lambda_handler, event, context)))
        result = Acceptance(Outcome.ACCEPTED, None, str(uuid.uuid4()))
        ids: dict[str, str | None] = {"aws_request_id": "bench", "api_request_id": "bench"}
        record = [_time_us(lambda: handler._record(result, ids)) for _ in range(repeats)]
        fields = {**ids, "outcome": "accepted", "reason": None, "status": 202}
        log = [
            _time_us(lambda: logger.info("delivery handled", extra=fields)) for _ in range(repeats)
        ]

        def emf() -> None:
            with single_metric(
                name=metric_names.receiver_outcome_metric("accepted"),
                unit=MetricUnit.Count,
                value=1,
                namespace=metric_names.METRICS_NAMESPACE,
                default_dimensions={"service": metric_names.SERVICE},
            ):
                pass

        metric = [_time_us(emf) for _ in range(repeats)]
    rig.install()
    return {
        "handler": summarize(whole),
        "after_call": summarize(after_call),
        "record": summarize(record),
        "log_line": summarize(log),
        "emf_metric": summarize(metric),
    }
