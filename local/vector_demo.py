"""Run every shared vector through the real receiver handler against moto; print a table.

``python -m local.vector_demo`` (``make demo``). Each case gets an empty table, as the
vectors prescribe; each sequence runs its steps in order against one empty table.
The receiver's clock is the vectors' ``now`` and its secrets are the vectors' own.
Exits non-zero when any row's status or outcome differs from the expected one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from functions.core import env_names
from functions.core.observability import logger
from functions.receiver import handler
from functions.receiver.settings import Settings
from local.aws_resources import create_secret, create_table

SHARED_DIR_ENV = "RELAYLINK_SHARED_DIR"
REGION = "us-east-1"


@dataclass(frozen=True)
class _Clock:
    value: int

    def now(self) -> int:
        return self.value


@dataclass(frozen=True)
class Row:
    name: str
    status: int
    outcome: str
    expected_status: int
    expected_outcome: str

    @property
    def ok(self) -> bool:
        return (self.status, self.outcome) == (self.expected_status, self.expected_outcome)


def shared_dir() -> Path:
    """``$RELAYLINK_SHARED_DIR``, else ``shared/`` beside the repository root."""
    override = os.environ.get(SHARED_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "shared"


def _event(request: dict[str, Any]) -> dict[str, Any]:
    """The HTTP API (2.0) event API Gateway would hand the receiver."""
    return {
        "version": "2.0",
        "routeKey": "POST /relaylink",
        "rawPath": "/relaylink",
        "headers": {k.lower(): v for k, v in request["headers"].items()},
        "requestContext": {"http": {"method": "POST"}, "requestId": "vector-demo"},
        "body": request["body"],
        "isBase64Encoded": False,
    }


def run() -> list[Row]:
    """Every case and sequence step, in file order."""
    path = shared_dir() / "vectors" / "deliveries.json"
    if not path.exists():  # a clone without shared/ beside it: the tests' vendored copy
        path = Path(__file__).resolve().parents[1] / "tests" / "vectors" / "deliveries.json"
    vectors = json.loads(path.read_text("utf-8"))
    clock = _Clock(int(vectors["now"]))
    logger.setLevel("CRITICAL")  # the table is the output; the handler's log lines are not
    rows: list[Row] = []
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        secretsmanager = boto3.client("secretsmanager", region_name=REGION)

        def install(number: int, secrets: list[str]) -> None:
            table = f"relaylink-demo-{number}"
            create_table(dynamodb, table)
            arn = create_secret(secretsmanager, name=table, value=json.dumps(secrets))
            settings = Settings.from_env(
                {env_names.ENV_TABLE_NAME: table, env_names.ENV_SIGNING_SECRETS_ARN: arn}
            )
            handler.container_deps.set(
                handler.build_deps(
                    settings, dynamodb=dynamodb, secretsmanager=secretsmanager, clock=clock
                )
            )

        def invoke(name: str, step: dict[str, Any]) -> None:
            with contextlib.redirect_stdout(io.StringIO()):  # EMF records
                response = handler.lambda_handler(_event(step["request"]), None)
            rows.append(
                Row(
                    name=name,
                    status=int(response["statusCode"]),
                    outcome=str(json.loads(response["body"])["outcome"]),
                    expected_status=int(step["expect"]["status"]),
                    expected_outcome=str(step["expect"]["outcome"]),
                )
            )

        number = 0
        for case in vectors["cases"]:
            number += 1
            install(number, case["secrets"])
            invoke(case["name"], case)
        for sequence in vectors["sequences"]:
            number += 1
            install(number, sequence["secrets"])
            for index, step in enumerate(sequence["steps"], start=1):
                invoke(f"{sequence['name']} [step {index}]", step)
        handler.container_deps.reset()
    return rows


def render(rows: list[Row]) -> str:
    width = max(len(r.name) for r in rows)
    lines = [f"{'case':<{width}}  status  {'outcome':<12}  {'expected':<17}  ok"]
    lines.append("-" * len(lines[0]))
    for r in rows:
        expected = f"{r.expected_status} {r.expected_outcome}"
        mark = "OK" if r.ok else "MISMATCH"
        lines.append(f"{r.name:<{width}}  {r.status:<6}  {r.outcome:<12}  {expected:<17}  {mark}")
    failed = sum(not r.ok for r in rows)
    lines.append(f"\n{len(rows)} rows, {len(rows) - failed} as expected, {failed} mismatched")
    return "\n".join(lines)


def main() -> int:
    # moto, offline: fake credentials and no account-specific endpoints.
    for name, value in {
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    rows = run()
    print(render(rows))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
