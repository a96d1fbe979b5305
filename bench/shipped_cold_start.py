"""Figure 3, as shipped: the receiver's Lambda asset against a minimal Powertools
handler, both cold, on the Lambda runtime's Python, in the same run.

Each side is a directory as Lambda would unpack it, bytecode included and nothing
written at run time (``PYTHONDONTWRITEBYTECODE``: Lambda's code directory is
read-only): the receiver's asset as the synth bundles it (:mod:`infra.bundle`), and a
handler that a user would write with Powertools (a ``Logger``, a DynamoDB client made
at import, one ``TransactWriteItems`` per request) beside the same Powertools, compiled
by the same step. boto3 stands in for the runtime's own (installed for the runtime's
Python, compiled, after the code on the path, as in ``/var/runtime``). Both reach the
canned endpoint of :mod:`bench.cold_start`; runs alternate, one ratio per pair.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.canned import CannedEndpoint
from bench.cold_start import RECEIVER_SCRIPT, fresh_env, run_script
from bench.receiver_rig import SECRET_ARN, SECRETS_JSON
from bench.stats import Summary, summarize
from functions.core import settings_table
from infra import bundle, bytecode
from infra.environments import receiver_environment
from local.testkit import builders

TARGET: Final = 1.1
WORKDIR: Final = bundle.BUILD / "bench-cold-start"
RUNTIME_PACKAGES: Final = ("boto3", "botocore", "s3transfer")
TABLE: Final = "relaylink-bench"

MINIMAL_HANDLER: Final = """
import os

import boto3
from aws_lambda_powertools import Logger

logger = Logger()
dynamodb = boto3.client("dynamodb")


def lambda_handler(event, context):
    delivery_id = event["headers"].get("relaylink-delivery-id", "cold-start")
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": os.environ["TABLE_NAME"], "Item": {"pk": {"S": delivery_id}}}}
        ]
    )
    logger.info("accepted", extra={"delivery_id": delivery_id})
    return {"statusCode": 202, "body": ""}
"""
MINIMAL_SCRIPT: Final = RECEIVER_SCRIPT.replace(
    "from functions.receiver import handler", "import app as handler"
)


@dataclass(frozen=True)
class ShippedColdStart:
    ratio: Summary  # shipped receiver total / minimal handler total, one per pair
    receiver_ms: Summary
    minimal_ms: Summary
    python: str
    pairs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio.to_json(),
            "receiver_total_ms": self.receiver_ms.to_json(1),
            "minimal_total_ms": self.minimal_ms.to_json(1),
            "python": self.python,
            "pairs": self.pairs,
        }


def _runtime_boto3() -> Path:
    """boto3 for the runtime's Python (the bundler's cached install of the pins of
    constraints.txt: pure-Python wheels), copied and compiled."""
    target = WORKDIR / "runtime"
    shutil.rmtree(target, ignore_errors=True)
    installed = bundle.dependency_dir(RUNTIME_PACKAGES)
    shutil.copytree(installed, target, ignore=shutil.ignore_patterns(".complete"))
    bytecode.precompile(target, bundle.LAMBDA_PYTHON_VERSION)
    return target


def _minimal_asset() -> Path:
    """The minimal handler beside the receiver's own Powertools, compiled alike."""
    target = WORKDIR / "minimal"
    shutil.rmtree(target, ignore_errors=True)
    powertools = bundle.dependency_dir(bundle.FUNCTIONS["receiver"].requirements)
    shutil.copytree(powertools, target, ignore=shutil.ignore_patterns(".complete"))
    (target / "app.py").write_text(MINIMAL_HANDLER, encoding="utf-8")
    bytecode.precompile(target, bundle.LAMBDA_PYTHON_VERSION)
    return target


def measure(*, pairs: int) -> ShippedColdStart:
    """Alternate ``pairs`` shipped-receiver and minimal-handler cold starts."""
    python = bytecode.runtime_python(bundle.LAMBDA_PYTHON_VERSION)
    runtime = _runtime_boto3()
    shutil.rmtree(WORKDIR / "receiver", ignore_errors=True)
    asset = bundle.AssetRecipe(bundle.FUNCTIONS["receiver"]).write(WORKDIR / "receiver")
    minimal = _minimal_asset()
    receiver_totals: list[float] = []
    minimal_totals: list[float] = []
    ratios: list[float] = []
    with CannedEndpoint(SECRETS_JSON, SECRET_ARN) as endpoint:
        variables = receiver_environment(
            table_name=TABLE,
            signing_secrets_arn=SECRET_ARN,
            inbox_retention_days=settings_table.INBOX_RETENTION_DAYS.default,
        )

        def env(code: Path) -> dict[str, str]:
            found = fresh_env(endpoint.url, {**variables, "TABLE_NAME": TABLE}, code)
            found["PYTHONPATH"] = f"{code}:{runtime}"  # the code first, as /var/task
            found["PYTHONDONTWRITEBYTECODE"] = "1"  # Lambda's code directory is read-only
            return found

        for _ in range(pairs):
            event = json.dumps(
                builders.event_for(builders.signed_request(timestamp=int(time.time())))
            )
            ours, _wall = run_script(RECEIVER_SCRIPT, env(asset), event, python=python)
            theirs, _wall = run_script(MINIMAL_SCRIPT, env(minimal), event, python=python)
            if ours["status"] != 202 or theirs["status"] != 202:
                raise RuntimeError(f"cold answers {ours['status']} and {theirs['status']}")
            receiver_totals.append(ours["total_ms"])
            minimal_totals.append(theirs["total_ms"])
            ratios.append(ours["total_ms"] / theirs["total_ms"])
    return ShippedColdStart(
        ratio=summarize(ratios),
        receiver_ms=summarize(receiver_totals),
        minimal_ms=summarize(minimal_totals),
        python=python,
        pairs=pairs,
    )
