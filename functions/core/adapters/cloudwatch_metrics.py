"""Counts and durations through Powertools' EMF metrics (the use cases' metrics ports)."""

from __future__ import annotations

import threading

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.core.observability import metrics as default_metrics

# One lock for every sink: they all add to Powertools' one shared metric set, from the
# threads of a batch's concurrent messages (the worker's sink and a workflow's own).
_SHARED_SET_LOCK = threading.Lock()


class EmfMetrics:
    """Adds counts to the shared metric set; ``flush`` writes them as one EMF line."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics or default_metrics
        self._lock = _SHARED_SET_LOCK

    def count(self, name: str, value: int = 1) -> None:
        with self._lock:
            self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def seconds(self, name: str, value: float) -> None:
        with self._lock:
            self._metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=value)

    def flush(self) -> None:
        with self._lock:
            # Only when something was counted: an empty flush warns (and tests treat
            # warnings as errors).
            if self._metrics.metric_set:
                self._metrics.flush_metrics()
