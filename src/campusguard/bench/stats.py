"""Latency statistics, trend slopes and relative deltas used by the benchmark and its reports.

All latencies are milliseconds; percentiles use linear interpolation (NumPy's default), so
they match what ``numpy.percentile`` gives on the same samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from campusguard.errors import InvalidInputError

__all__ = [
    "LatencyStats",
    "latency_stats",
    "linear_slope",
    "relative_delta",
    "spread",
    "throughput",
    "cost_per_million",
]


@dataclass(frozen=True)
class LatencyStats:
    """Summary of latency samples in milliseconds (one sample per batch or per query)."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float
    std: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def latency_stats(samples_ms: Sequence[float] | np.ndarray) -> LatencyStats:
    """Mean, percentiles (50, 90, 99), extremes and population standard deviation of latencies.

    Args:
        samples_ms: ``(N,)`` latencies in milliseconds, N >= 1.

    Raises:
        InvalidInputError: when there are no samples or a sample is negative or not finite.
    """
    x = np.asarray(samples_ms, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise InvalidInputError("latency statistics need at least one sample")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise InvalidInputError("latency samples must be finite and non-negative")
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return LatencyStats(
        n=int(x.size),
        mean=float(x.mean()),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        min=float(x.min()),
        max=float(x.max()),
        std=float(x.std()),
    )


def linear_slope(t_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray) -> float:
    """Least-squares slope of ``values`` over time ``t_s`` (units of ``values`` per second).

    Returns 0.0 for fewer than two samples or when all times are equal.
    """
    t = np.asarray(t_s, dtype=np.float64).reshape(-1)
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if t.shape != v.shape:
        raise InvalidInputError(f"slope needs as many times as values ({t.size} != {v.size})")
    if t.size < 2 or np.ptp(t) == 0:
        return 0.0
    tc = t - t.mean()
    return float(np.dot(tc, v - v.mean()) / np.dot(tc, tc))


def relative_delta(value: float | None, baseline: float | None) -> float | None:
    """``value / baseline - 1`` (e.g. +0.07 is 7% more), or ``None`` when either is missing or baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return float(value) / float(baseline) - 1.0


def spread(values: Sequence[float]) -> float:
    """Relative spread ``max / min - 1`` of positive values (0.0 for one value): how far repeats disagree."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise InvalidInputError("spread needs at least one value")
    if np.any(v <= 0):
        raise InvalidInputError("spread needs positive values")
    return float(v.max() / v.min() - 1.0)


def throughput(images: int, seconds: float) -> float:
    """Images per second; 0.0 when no time has passed."""
    return float(images) / seconds if seconds > 0 else 0.0


def cost_per_million(images_per_s: float, price_per_hour: float | None) -> float | None:
    """US dollars to process one million images at ``images_per_s`` on a machine costing ``price_per_hour``."""
    if price_per_hour is None or images_per_s <= 0:
        return None
    return float(price_per_hour) / (images_per_s * 3600.0) * 1e6
