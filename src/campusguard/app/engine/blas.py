"""BLAS's own thread pool, kept to one thread while the engine runs.

The engine's numpy work is small: the tracker's Kalman filter inverts a 4x4 matrix a track a
frame. NumPy's OpenBLAS still wakes its pool (one thread a core) for such calls, and its idle
threads spin in ``sched_yield`` before they sleep. On the cost check's busy scene (2-vCPU AMD
EPYC) that was two threads at about 0.3 CPU-ms a frame each, all of it system time, on cores the
network and the decoder need. The engine runs its stages on threads of its own and no matrix is
large enough for BLAS's threads to pay, so a running service keeps BLAS on the calling thread.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

__all__ = ["keep_blas_on_one_thread"]


def keep_blas_on_one_thread() -> None:
    """Limit every BLAS library loaded in this process to one thread (`threadpoolctl`), for good."""
    from threadpoolctl import threadpool_info, threadpool_limits

    before = {p["internal_api"]: p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
    threadpool_limits(limits=1, user_api="blas")
    log.debug("BLAS thread pools set to 1 thread (were %s)", before or "none loaded")
