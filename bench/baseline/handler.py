"""The baseline receiver: all the work inside the request, deduplicated by Powertools.

It reuses our signature check, body parser, MCP client and default workflow, so that
the comparison is about the design (work in the request, ``@idempotent_function``)
and not about a different implementation of the same steps. Effects go straight to
the workflow's targets: there is no effect ledger, the idempotency record is the
only protection against doing a delivery twice, as in the usual Powertools pattern.

Environment: ``IDEMPOTENCY_TABLE`` (partition key ``id``), ``SIGNING_SECRETS_ARN``,
``MCP_TOKEN``, ``NOTIFY_URL``, ``ARCHIVE_BUCKET``, and AWS's usual variables.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)

from bench.baseline.verification import answer, verified_work, work_body
from functions.core.adapters.mcp_fetcher import McpPackageFetcher
from functions.core.clock import SystemClock
from functions.core.effects import EffectMode
from functions.core.env_names import ENV_WORKFLOW_SETTINGS
from functions.core.host_policy import HostPolicy
from functions.core.models import WorkItem
from functions.core.observability import logger
from functions.core.package import Package
from functions.core.workflow import WorkflowContext
from functions.workflows.wiring import build_notify as build_workflow

TIMEOUT_SECONDS = 10.0  # RelayLink waits 10 s for an answer; the function may not take longer

persistence = DynamoDBPersistenceLayer(table_name=os.environ.get("IDEMPOTENCY_TABLE", "idem"))
# Powertools' defaults otherwise: a completed record is kept for an hour.
config = IdempotencyConfig(event_key_jmespath="delivery_id")


class DirectEffects:
    """The workflow's effect hook without a ledger: every effect simply runs."""

    def __init__(self, delivery_id: str) -> None:
        self.delivery_id = delivery_id

    def run(
        self,
        name: str,
        fn: Callable[[str], object],
        *,
        key: str | None = None,
        mode: EffectMode | None = None,
        reconcile: Callable[[str], bool] | None = None,
        repeatable: bool = False,
    ) -> bool:
        """:meth:`EffectLedger.run`'s signature; the outcome mode means nothing here."""
        fn(key or f"{self.delivery_id}:{name}")
        return True


_workflow = None


def _the_workflow() -> Any:
    global _workflow  # noqa: PLW0603 (one per container, as a handler module would)
    if _workflow is None:
        _workflow = build_workflow(
            WorkflowContext(
                notify_url=os.environ["NOTIFY_URL"],
                archive_bucket=os.environ["ARCHIVE_BUCKET"],
                allow_insecure_loopback=True,
                timeout_seconds=TIMEOUT_SECONDS,
                clock=SystemClock(),
                settings=json.loads(os.environ.get(ENV_WORKFLOW_SETTINGS, "{}")),
            )
        )
    return _workflow


async def _fetch(work: WorkItem) -> Package:
    fetcher = McpPackageFetcher(
        token=lambda: os.environ["MCP_TOKEN"],
        policy=HostPolicy(allowed_hosts=("127.0.0.1",), allow_insecure_loopback=True),
        connect_timeout=2.0,
        read_timeout=TIMEOUT_SECONDS,
        max_result_bytes=1024 * 1024,
    )
    async with fetcher:
        return await fetcher.get_package(work.mcp_url, work.package_id)


# Powertools annotates idempotent_function as returning Any; the wrapper keeps the signature.
@idempotent_function(  # type: ignore[untyped-decorator]
    data_keyword_argument="delivery", config=config, persistence_store=persistence
)
def process(delivery: dict[str, Any]) -> dict[str, Any]:
    """Fetch the package and run the workflow: once per delivery id (per the record)."""
    work = WorkItem(
        delivery["delivery_id"], delivery["event"], delivery["package_id"], delivery["mcp_url"]
    )
    package = asyncio.run(_fetch(work))
    _the_workflow().run(work, package, DirectEffects(work.delivery_id))
    return {"delivery_id": work.delivery_id, "processed": True}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config.register_lambda_context(context)  # in-progress records expire with the invocation
    work = verified_work(event)
    if not isinstance(work, WorkItem):
        return work
    try:
        process(delivery=work_body(work))
    except IdempotencyAlreadyInProgressError:
        return answer(409, "in_progress")  # another attempt holds the record: retry later
    except Exception as exc:
        # The type only: the message could quote the package.
        logger.warning("baseline failed", extra={"error_type": type(exc).__name__})
        return answer(500, "failed")
    return answer(200, "processed")
