"""Counting through Powertools' EMF metrics (the use cases' ``MetricsSink`` port)."""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.core.observability import metrics as default_metrics


class EmfMetrics:
    """Adds counts to the shared metric set; ``flush`` writes them as one EMF line."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics or default_metrics

    def count(self, name: str, value: int = 1) -> None:
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def flush(self) -> None:
        # Only when something was counted: an empty flush warns (and tests treat
        # warnings as errors).
        if self._metrics.metric_set:
            self._metrics.flush_metrics()
