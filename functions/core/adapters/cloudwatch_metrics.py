"""Counts and durations through Powertools' EMF metrics (the use cases' metrics ports).

Only the published names (metric_names.PUBLISHED_METRICS, those an alarm reads) become
CloudWatch metrics; the other counts are summed here and written as fields of the flush's
line, where Logs Insights reads them (a metric is billed whatever its volume).
"""

from __future__ import annotations

import threading

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.core import metric_names
from functions.core.observability import metrics as default_metrics
from functions.core.observability import print_counts

# One lock for every sink: they all add to Powertools' one shared metric set, from the
# threads of a batch's concurrent messages (the worker's sink and a workflow's own).
_SHARED_SET_LOCK = threading.Lock()
# The counts that are no metric, shared as Powertools' metric set is: any sink's flush
# writes them (a workflow's own sink counts into the worker's flush).
_SHARED_FIELDS: dict[str, float] = {}


class EmfMetrics:
    """Adds counts to the shared metric set; ``flush`` writes them as one EMF line."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics or default_metrics
        self._lock = _SHARED_SET_LOCK
        self._fields = _SHARED_FIELDS

    def count(self, name: str, value: int = 1) -> None:
        self._add(name, MetricUnit.Count, value)

    def seconds(self, name: str, value: float) -> None:
        self._add(name, MetricUnit.Seconds, value)

    def _add(self, name: str, unit: MetricUnit, value: float) -> None:
        with self._lock:
            if name in metric_names.PUBLISHED_METRICS:
                self._metrics.add_metric(name=name, unit=unit, value=value)
            else:
                self._fields[name] = self._fields.get(name, 0) + value

    def flush(self) -> None:
        with self._lock:
            fields = dict(self._fields)
            self._fields.clear()
            # Only when something was counted: an empty flush warns (and tests treat
            # warnings as errors).
            if self._metrics.metric_set:
                for name, value in fields.items():
                    self._metrics.add_metadata(key=name, value=value)
                self._metrics.flush_metrics()
            elif fields:
                print_counts(fields)
