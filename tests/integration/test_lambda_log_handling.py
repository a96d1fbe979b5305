"""The functions under Lambda's log handling, at the log levels a deployer may choose.

Each run is a Lambda container emulated in a subprocess
(``tests/integration/lambda_container.py``) under the log settings the stack gives a
function deployed with that ``log_level``: Lambda's handler on the root logger, the
root logger at the application log level, and Lambda's filter over what the function
writes (``local/lambda_logging.py``).

* Metrics: Lambda's filter takes a JSON line without a ``level`` for INFO, and EMF
  metric lines have none; with the application log level above INFO every metric
  would be dropped and its alarm go silent.
* DEBUG: the root logger at DEBUG must not let a library print a secret, and what
  still reaches Lambda's handler is redacted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from functions.core import env_names, metric_names
from functions.core.log_levels import level_number
from local.function_environments import lambda_log_environment
from local.lambda_logging import line_level
from tests import log_audit
from tests.integration import redaction_scenarios
from tests.integration.metric_scenarios import EVERY_METRIC
from tests.processing_harness import emitted_metrics, published_metrics

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_DEADLINE_SECONDS = 120


def run_container(scenarios: str, log_level: str) -> subprocess.CompletedProcess[str]:
    """``scenarios``' ``run()`` in an emulated Lambda container; its output as Lambda keeps it."""
    environment = {
        **os.environ,
        **lambda_log_environment(log_level),
        env_names.ENV_POWERTOOLS_SERVICE_NAME: metric_names.SERVICE,
        env_names.ENV_POWERTOOLS_METRICS_NAMESPACE: metric_names.METRICS_NAMESPACE,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.integration.lambda_container", scenarios],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CONTAINER_DEADLINE_SECONDS,
        check=False,
    )


@pytest.mark.parametrize("log_level", ["WARNING", "ERROR"])
def test_every_metric_of_every_function_survives_lambdas_log_filter(log_level: str) -> None:
    result = run_container("tests.integration.metric_scenarios", log_level)

    assert result.returncode == 0, result.stderr[-4000:]
    # Every count reaches the logs; the alarmed ones as CloudWatch metrics, the others
    # only as fields of their lines (no metric is billed for them).
    assert sorted(EVERY_METRIC - set(emitted_metrics(result.stdout))) == []
    published = published_metrics(result.stdout)
    assert published == EVERY_METRIC & metric_names.PUBLISHED_METRICS
    # The function's own level still holds: no line with a level below it was written.
    threshold = level_number(log_level)
    assert threshold is not None
    levelled = [line for line in result.stdout.splitlines() if '"level"' in line]
    assert all(line_level(line) >= threshold for line in levelled)
    assert log_audit.check_output(result.stdout + result.stderr) == []


def test_at_debug_libraries_stay_quiet_and_lambdas_handler_redacts() -> None:
    log_audit.register_token(redaction_scenarios.TOKEN)

    result = run_container("tests.integration.redaction_scenarios", "DEBUG")

    assert result.returncode == 0, result.stderr[-4000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    loggers = {line.get("logger") for line in lines}
    assert redaction_scenarios.UNHELD_LIBRARY in loggers  # the root logger is at DEBUG
    assert redaction_scenarios.HELD_LIBRARY not in loggers
    assert not any(str(name).startswith(("botocore", "urllib3")) for name in loggers)
    unheld = [line for line in lines if line.get("logger") == redaction_scenarios.UNHELD_LIBRARY]
    assert len(unheld) == 3
    assert all("[redacted]" in json.dumps(line) for line in unheld)
    assert redaction_scenarios.TOKEN not in result.stdout
    assert log_audit.check_output(result.stdout + result.stderr) == []
