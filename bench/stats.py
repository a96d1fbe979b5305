"""Summaries of repeated measurements: median and spread, never a lone number."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Summary:
    """Median and spread of ``n`` samples (quantiles by linear interpolation)."""

    n: int
    median: float
    p25: float
    p75: float
    minimum: float
    maximum: float

    def to_json(self, digits: int = 4) -> dict[str, Any]:
        return {
            k: (round(v, digits) if isinstance(v, float) else v) for k, v in asdict(self).items()
        }


def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, linear between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(samples: Sequence[float]) -> Summary:
    """Median, quartiles and range of ``samples``."""
    return Summary(
        n=len(samples),
        median=statistics.median(samples),
        p25=quantile(samples, 0.25),
        p75=quantile(samples, 0.75),
        minimum=min(samples),
        maximum=max(samples),
    )
