"""Statistics of the benchmark on inputs with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from campusguard.bench.stats import cost_per_million, latency_stats, linear_slope, relative_delta, spread, throughput
from campusguard.bench.timing import measure_timer_overhead, run_timed
from campusguard.errors import InvalidInputError


def test_latency_stats_of_1_to_100() -> None:
    s = latency_stats(list(range(1, 101)))
    assert s.n == 100
    assert s.mean == pytest.approx(50.5)
    assert s.p50 == pytest.approx(50.5)
    assert s.p90 == pytest.approx(90.1)
    assert s.p99 == pytest.approx(99.01)
    assert (s.min, s.max) == (1.0, 100.0)
    assert s.std == pytest.approx(math.sqrt((100**2 - 1) / 12))


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([5.0], {"mean": 5.0, "p50": 5.0, "p99": 5.0, "std": 0.0}),
        ([1.0, 3.0], {"mean": 2.0, "p50": 2.0, "p90": 2.8, "std": 1.0}),
        ([10.0, 10.0, 10.0, 40.0], {"mean": 17.5, "p50": 10.0, "max": 40.0, "p90": 31.0}),
    ],
)
def test_latency_stats_table(samples: list[float], expected: dict[str, float]) -> None:
    s = latency_stats(samples).to_dict()
    for key, value in expected.items():
        assert s[key] == pytest.approx(value), key


@pytest.mark.parametrize("bad", [[], [1.0, -2.0], [float("nan")], [float("inf")]])
def test_latency_stats_rejects_bad_samples(bad: list[float]) -> None:
    with pytest.raises(InvalidInputError):
        latency_stats(bad)


def test_linear_slope_recovers_a_line_and_flat_cases() -> None:
    t = np.linspace(0, 10, 50)
    assert linear_slope(t, 3.0 * t + 7.0) == pytest.approx(3.0)
    assert linear_slope(t, np.full(50, 4.0)) == pytest.approx(0.0)
    assert linear_slope([1.0], [2.0]) == 0.0
    with pytest.raises(InvalidInputError):
        linear_slope([1.0, 2.0], [1.0])


def test_deltas_spread_throughput_cost() -> None:
    assert relative_delta(150.0, 100.0) == pytest.approx(0.5)
    assert relative_delta(80.0, 100.0) == pytest.approx(-0.2)
    assert relative_delta(None, 1.0) is None
    assert relative_delta(1.0, 0.0) is None
    assert spread([100.0, 105.0]) == pytest.approx(0.05)
    assert spread([7.0]) == 0.0
    with pytest.raises(InvalidInputError):
        spread([0.0, 1.0])
    assert throughput(80, 2.0) == pytest.approx(40.0)
    assert throughput(10, 0.0) == 0.0
    # $3.60 per hour at 1000 img/s: 3.6 million images per hour cost $3.60, so $1 per million
    assert cost_per_million(1000.0, 3.6) == pytest.approx(1.0)
    assert cost_per_million(1000.0, None) is None
    assert cost_per_million(0.0, 3.6) is None


class FakeClock:
    """A clock that advances by ``step`` seconds at every call's end."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self, i: int) -> tuple[float, float, float]:
        self.now += self.step
        self.calls += 1
        return (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    ("iters", "min_seconds", "max_iters", "expected_calls"),
    [
        (3, 0.0, None, 3),  # iterations bound
        (3, 1.0, None, 8),  # seconds bound: 8 calls of 0.125 s
        (3, 1.0, 5, 5),  # hard cap wins
        (20, 0.5, None, 20),
    ],
)
def test_run_timed_honours_iters_and_min_seconds(
    iters: int, min_seconds: float, max_iters: int | None, expected_calls: int
) -> None:
    clock = FakeClock(0.125)  # exact in binary, so the seconds bound is hit exactly
    run = run_timed(clock.work, iters, min_seconds, max_iters, clock=clock)
    assert run.iterations == expected_calls == clock.calls
    assert run.latency_ms == pytest.approx([125.0] * expected_calls)
    assert run.stages_ms[0] == (1.0, 2.0, 3.0)
    assert run.seconds == pytest.approx(0.125 * expected_calls)


def test_run_timed_rejects_bad_arguments_and_measures_its_overhead() -> None:
    with pytest.raises(InvalidInputError):
        run_timed(lambda i: None, 0, 1.0)
    with pytest.raises(InvalidInputError):
        run_timed(lambda i: None, 1, -1.0)
    run = run_timed(lambda i: None, 5, 0.0)
    assert run.stages_ms == [(0.0, 0.0, 0.0)] * 5
    overhead = measure_timer_overhead(200)
    assert overhead > 0.0 and math.isfinite(overhead)
