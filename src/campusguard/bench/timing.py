"""The timing loop: warm-up, then timed calls for at least N iterations and S seconds.

The loop is separate from any model so that its own cost (`measure_timer_overhead`) and its
statistics can be tested with plain functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from campusguard.errors import InvalidInputError

__all__ = ["StageSample", "TimedRun", "run_timed", "measure_timer_overhead"]

StageSample = tuple[float, float, float]
"""(preprocess, inference, postprocess) milliseconds of one call; zeros when the callee has no split."""


@dataclass
class TimedRun:
    """Samples of one timed phase.

    Attributes:
        latency_ms: ``(iterations,)`` wall time of each call in milliseconds.
        stages_ms: per call ``(pre, inference, post)`` milliseconds reported by the callee.
        seconds: wall time of the whole phase in seconds (loop included).
    """

    latency_ms: list[float] = field(default_factory=list)
    stages_ms: list[StageSample] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def iterations(self) -> int:
        return len(self.latency_ms)


def run_timed(
    call: Callable[[int], StageSample | None],
    iters: int,
    min_seconds: float,
    max_iters: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> TimedRun:
    """Call ``call(i)`` until at least ``iters`` calls AND ``min_seconds`` seconds have passed.

    Args:
        call: the work of iteration ``i``; may return its ``(pre, inference, post)`` split in ms.
        iters: minimum number of calls (>= 1).
        min_seconds: minimum wall time of the phase in seconds (>= 0).
        max_iters: optional hard cap on calls (stops a fast call from running for hours).
        clock: seconds counter (monotonic); tests pass a fake one.
    """
    if iters < 1:
        raise InvalidInputError(f"iters={iters} must be at least 1")
    if min_seconds < 0:
        raise InvalidInputError(f"min_seconds={min_seconds} must not be negative")
    run = TimedRun()
    start = clock()
    i = 0
    while True:
        t0 = clock()
        split = call(i)
        t1 = clock()
        run.latency_ms.append((t1 - t0) * 1000.0)
        run.stages_ms.append(split if split is not None else (0.0, 0.0, 0.0))
        i += 1
        elapsed = t1 - start
        if i >= iters and elapsed >= min_seconds:
            break
        if max_iters is not None and i >= max_iters:
            break
    run.seconds = clock() - start
    return run


def measure_timer_overhead(samples: int = 2000) -> float:
    """Milliseconds the timing loop adds per iteration, measured around a no-op call (mean)."""
    run = run_timed(lambda i: None, iters=samples, min_seconds=0.0)
    return run.seconds * 1000.0 / max(run.iterations, 1)
