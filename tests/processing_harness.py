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

from local.testkit.moto_world import MotoWorld, StreamReader, moto_world

_EMF = re.compile(r"^\{.*\"_aws\".*\}$", re.MULTILINE)


def emitted_metrics(output: str) -> Counter[str]:
    """Sum the counts of every EMF line Powertools printed."""
    counts: Counter[str] = Counter()
    for line in _EMF.findall(output):
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                counts[metric["Name"]] += int(sum(value) if isinstance(value, list) else value)
    return counts


@pytest.fixture
def aws() -> Iterator[MotoWorld]:
    """A fresh moto world for one test."""
    with moto_world() as world:
        yield world


@pytest.fixture
def stream(aws: MotoWorld) -> StreamReader:
    """The world's table stream, read from its start."""
    return StreamReader(aws.streams, aws.stream_arn)
