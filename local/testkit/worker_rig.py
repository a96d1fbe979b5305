"""The real worker handler wired to a :class:`MotoWorld`, an MCP server and a notify URL."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3

from functions.core import env_names
from local.event_sources import sqs_event
from local.testkit.moto_world import (
    BUCKET,
    MAX_ATTEMPTS,
    REGION,
    RETRY_HORIZON_SECONDS,
    TABLE,
    MotoWorld,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    # At run time imported only when a worker is built: the handler imports the MCP SDK.
    from functions.worker.handler import Deps
    from functions.worker.settings import Settings

LEASE_SECONDS = 300


@dataclass
class WorkerRig:
    """One worker container: its own clients, the world's clock, real adapters."""

    world: MotoWorld
    deps: Deps
    settings: Settings

    def run(self, messages: Sequence[MessageTypeDef]) -> dict[str, Any]:
        """Invoke the worker with ``messages``, then do what the event-source mapping does."""
        from functions.worker import handler  # noqa: PLC0415 (imports mcp: only when used)

        event = sqs_event(messages, self.world.queue_arn, REGION)
        response: dict[str, Any] = handler.handle(event, self.deps)
        # A partial batch response: every message not reported as failed is deleted.
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.world.sqs.delete_message(
                    QueueUrl=self.world.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return response

    def run_visible(self) -> tuple[list[MessageTypeDef], dict[str, Any]]:
        """Receive what is visible now (one batch) and process it."""
        messages = self.world.receive()
        return messages, self.run(messages)


def worker_env(
    world: MotoWorld, *, token_arn: str, notify_url: str, **overrides: str
) -> dict[str, str]:
    """The worker's environment for ``world``, an MCP server on loopback and ``notify_url``."""
    env = {
        env_names.ENV_TABLE_NAME: TABLE,
        env_names.ENV_WORK_QUEUE_URL: world.queue_url,
        env_names.ENV_DEAD_LETTER_QUEUE_URL: world.dlq_url,
        env_names.ENV_MCP_TOKEN_SECRET_ARN: token_arn,
        env_names.ENV_MCP_ALLOWED_HOSTS: "127.0.0.1",
        env_names.ENV_MCP_ALLOW_INSECURE_LOOPBACK: "true",
        env_names.ENV_MCP_TIMEOUT_SECONDS: "2",
        env_names.ENV_WORKFLOW: "notify",  # the deployed default, archive, sends nothing
        env_names.ENV_NOTIFY_URL: notify_url,
        env_names.ENV_ARCHIVE_BUCKET: BUCKET,
        env_names.ENV_MAX_ATTEMPTS: str(MAX_ATTEMPTS),
        env_names.ENV_RETRY_HORIZON_SECONDS: str(RETRY_HORIZON_SECONDS),
        env_names.ENV_LEASE_SECONDS: str(LEASE_SECONDS),
        env_names.ENV_SECRETS_MAX_AGE_SECONDS: "300",
    }
    env.update(overrides)
    return env


def make_worker(
    world: MotoWorld,
    *,
    token: str,
    notify_url: str,
    wrap: Callable[[Deps], Deps] | None = None,
    environment: Mapping[str, str] | None = None,
) -> WorkerRig:
    """A worker with the notify workflow (loaded from the setting, as in Lambda).

    ``token`` is stored as a new secret; ``wrap(deps) -> deps`` lets a test put a
    crash point around a port; ``environment`` sets or replaces variables.
    """
    from functions.worker import handler  # noqa: PLC0415 (imports mcp: only when used)
    from functions.worker.settings import Settings  # noqa: PLC0415

    token_arn = world.create_secret(token, prefix="relaylink-mcp")
    settings = Settings.from_env(
        worker_env(world, token_arn=token_arn, notify_url=notify_url, **(environment or {}))
    )
    deps = handler.build_deps(
        settings,
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        sqs=boto3.client("sqs", region_name=REGION),
        secretsmanager=boto3.client("secretsmanager", region_name=REGION),
        clock=world.clock,
    )
    if wrap is not None:
        deps = wrap(deps)
    return WorkerRig(world, deps, settings)
