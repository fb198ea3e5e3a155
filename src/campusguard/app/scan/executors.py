"""Where scan units run: the parent's own thread, a local process pool, or a Ray cluster.

All three take the same `scan_file` and give back `concurrent.futures.Future` objects, so the
scan's driver (`campusguard.app.scan.runner`) is one loop whatever runs the units; each also
carries the progress channel its units report frames on.

- `LocalExecutor(1)`: one unit at a time in a thread of this process (the single-process path).
- `LocalExecutor(n)`: ``n`` spawned worker processes, one unit each at a time; a worker whose
  parent died exits (no orphan keeps scanning).
- `RayExecutor(address)`: units as Ray tasks (``num_cpus=1``, ``max_retries``: a task lost with
  its worker or node is run again elsewhere; its events reach the store only once the task
  returns, so a retry cannot duplicate them). Every node needs campusguard installed and the
  recordings at the same paths.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

from campusguard.app.scan.unit import FileResult, ScanJob, scan_file, stop_running_units
from campusguard.errors import CampusGuardError, InvalidInputError, require

__all__ = ["LocalExecutor", "RayExecutor", "UnitExecutor"]


class UnitExecutor(Protocol):
    """Runs `scan_file` units and collects their frame progress."""

    workers: int
    description: str

    def submit(self, job: ScanJob) -> Future[FileResult]:
        """Start (or queue) one unit."""
        ...

    def progress(self) -> list[tuple[str, int]]:
        """The ``(recording key, frames)`` reports that arrived since the last call."""
        ...

    def close(self, cancel: bool = False) -> None:
        """Release the workers; ``cancel`` drops queued units and stops running ones."""
        ...


def _drain(q: Any) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out
        except (EOFError, OSError):  # the manager went away (interrupted)
            return out


def _watch_parent(parent_pid: int, period_s: float = 1.0) -> None:
    while os.getppid() == parent_pid:
        time.sleep(period_s)
    os._exit(1)  # the scan's driver died: its units' events have nowhere to go


_POOL_PROGRESS: Any = None  # a pool worker's progress queue, set by `_init_worker`


def _init_worker(parent_pid: int, progress: Any) -> None:
    """A pool worker: Ctrl-C is the driver's to handle; exit when the driver dies; keep the progress queue."""
    global _POOL_PROGRESS
    _POOL_PROGRESS = progress
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watch", daemon=True).start()


def _warm_up() -> None:
    """Import what every unit needs (ONNX Runtime, the detector) while the driver is still checking."""
    import onnxruntime  # noqa: F401

    import campusguard.detector  # noqa: F401


def _pool_unit(job: ScanJob) -> FileResult:
    """`scan_file` in a pool worker, reporting on the queue the worker was started with."""
    return scan_file(job, _POOL_PROGRESS)


class LocalExecutor:
    """Units on this machine: in a thread of this process (``workers=1``) or in spawned processes.

    Args:
        workers: units run at the same time (>= 1).
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise InvalidInputError(f"--workers must be at least 1, got {workers}")
        self.workers = workers
        self._pool: ThreadPoolExecutor | ProcessPoolExecutor
        if workers == 1:
            self.description = "1 worker (this process)"
            self._queue: Any = queue.Queue()
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="scan-unit")
        else:
            self.description = f"{workers} worker processes"
            ctx = multiprocessing.get_context("spawn")
            self._queue = ctx.Queue()  # handed to each worker when it starts (no manager process to orphan)
            self._pool = ProcessPoolExecutor(
                workers, mp_context=ctx, initializer=_init_worker, initargs=(os.getpid(), self._queue)
            )
            for _ in range(workers):  # start the workers now: they import while the driver checks the sources
                self._pool.submit(_warm_up)

    def submit(self, job: ScanJob) -> Future[FileResult]:
        if isinstance(self._pool, ThreadPoolExecutor):
            return self._pool.submit(scan_file, job, self._queue)
        return self._pool.submit(_pool_unit, job)

    def progress(self) -> list[tuple[str, int]]:
        return _drain(self._queue)

    def close(self, cancel: bool = False) -> None:
        if cancel and isinstance(self._pool, ThreadPoolExecutor):
            stop_running_units()  # the in-process unit stops at its next frame
        elif cancel:
            self._terminate_workers()
        self._pool.shutdown(wait=True, cancel_futures=cancel)

    def _terminate_workers(self) -> None:
        """End the worker processes now (an interrupted scan must not wait for their current files)."""
        terminate = getattr(self._pool, "terminate_workers", None)  # Python 3.14+
        if terminate is not None:
            terminate()
            return
        for process in list(getattr(self._pool, "_processes", {}).values()):  # older Pythons: the pool's own table
            process.terminate()


class RayExecutor:
    """Units as Ray tasks on a cluster.

    Args:
        address: ``"auto"`` (the cluster this machine belongs to), a cluster address
            (``ray://host:10001`` or ``host:6379``), or None to start a private local Ray.
        max_retries: times Ray re-runs a unit lost with its worker or node.
        num_cpus: CPUs of a private local Ray (None: all); ignored when connecting.

    Raises:
        MissingDependencyError: Ray is not installed (names the ``ray`` extra).
        ClusterError: the cluster cannot be reached.
    """

    def __init__(self, address: str | None = "auto", *, max_retries: int = 3, num_cpus: int | None = None) -> None:
        from campusguard.app.cluster.ray_executor import connect

        ray = require("ray", "ray")
        self._started = not ray.is_initialized()
        connect("local" if address is None else address, num_cpus=num_cpus)  # `ClusterError` when unreachable
        from ray.util.queue import Queue

        self._ray = ray
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.description = f"Ray cluster ({self.workers} CPUs)"
        self._remote = ray.remote(num_cpus=1, max_retries=max_retries)(scan_file)
        self._queue = Queue(actor_options={"num_cpus": 0})
        self._refs: list[Any] = []

    def submit(self, job: ScanJob) -> Future[FileResult]:
        ref = self._remote.remote(job, self._queue)
        self._refs.append(ref)
        future: Future[FileResult] = ref.future()
        return future

    def progress(self) -> list[tuple[str, int]]:
        try:
            n = self._queue.qsize()
            return list(self._queue.get_nowait_batch(n)) if n else []
        except CampusGuardError:
            raise
        except Exception:  # the queue actor is gone (shutting down): progress is cosmetic
            return []

    def close(self, cancel: bool = False) -> None:
        if cancel:
            for ref in self._refs:
                with contextlib.suppress(Exception):  # already finished
                    self._ray.cancel(ref, force=True)
        self._queue.shutdown()
        if self._started:
            self._ray.shutdown()
