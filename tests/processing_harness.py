"""Fixtures for the processing tests: a moto world with its stream, and EMF metrics.

Everything the relay, worker and reconciler touch is the production adapter against
moto (:mod:`local.testkit.moto_world`); the stream is read and filtered the way
Lambda's event-source mapping would and fed to the relay by the test.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator

import pytest

from functions.core import metric_names
from functions.core.models import Outcome
from functions.relay import handler as relay
from local.testkit.moto_world import MotoWorld, StreamReader, moto_world

_JSON_LINE = re.compile(r"^\{.*\}$", re.MULTILINE)
# Every count a function makes: the published ones are EMF metrics, the others fields of
# their log lines (a Powertools flush's metadata, or a line of counts).
COUNTED = frozenset(
    {v for k, v in vars(metric_names).items() if k.startswith("METRIC_") and isinstance(v, str)}
    | {metric_names.receiver_outcome_metric(outcome.value) for outcome in Outcome}
    | {relay.METRIC_SKIPPED}
)


def emitted_metrics(output: str) -> Counter[str]:
    """Sum every count the functions printed: EMF metrics and counted log fields."""
    counts: Counter[str] = Counter()
    for line in _JSON_LINE.findall(output):
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        for name in COUNTED & blob.keys():
            value = blob[name]
            counts[name] += int(sum(value) if isinstance(value, list) else value)
    return counts


def published_metrics(output: str) -> set[str]:
    """The names the EMF directives of ``output`` publish as CloudWatch metrics."""
    names: set[str] = set()
    for line in _JSON_LINE.findall(output):
        if '"_aws"' in line:
            for directive in json.loads(line)["_aws"]["CloudWatchMetrics"]:
                names.update(metric["Name"] for metric in directive["Metrics"])
    return names


@pytest.fixture
def aws() -> Iterator[MotoWorld]:
    """A fresh moto world for one test."""
    with moto_world() as world:
        yield world


@pytest.fixture
def stream(aws: MotoWorld) -> StreamReader:
    """The world's table stream, read from its start."""
    return StreamReader(aws.streams, aws.stream_arn)
