"""The ports of counting and timing (CloudWatch EMF in production)."""

from __future__ import annotations

from typing import Protocol


class MetricsSink(Protocol):
    """Port: counts events (CloudWatch EMF in production)."""

    def count(self, name: str, value: int = 1) -> None: ...


class ReconcilerMetrics(MetricsSink, Protocol):
    """Port: counts, and how far behind the received log is (CloudWatch EMF)."""

    def seconds(self, name: str, value: float) -> None: ...
