"""Host and device memory sampled through a benchmark run.

`MemorySampler` is a context manager that reads the process's resident set size (psutil) and,
where a reader is available, device memory, every ``interval_s`` seconds on one background
thread, so a peak between two timed batches is not missed and a steady growth (a leak) shows
as a positive slope. It is the one thread in the benchmark kit; it only reads counters.

Device memory readers, tried in order for the device in use:

- PyTorch on CUDA/ROCm: ``torch.cuda.max_memory_allocated`` (peak of the caching allocator);
- NVIDIA: ``nvidia-ml-py`` (NVML) device memory in use, when installed;
- AMD: ``amdsmi`` VRAM in use, when installed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from campusguard.bench.stats import linear_slope

__all__ = ["MemoryReport", "MemorySampler", "CpuShare", "device_memory_reader", "torch_peak_allocated_mb"]

MB = 1024.0 * 1024.0


@dataclass(frozen=True)
class MemoryReport:
    """Memory over a run, in MiB; slopes in MiB per second (positive: growing)."""

    host_rss_peak_mb: float
    host_rss_start_mb: float
    host_rss_end_mb: float
    host_rss_slope_mb_per_s: float
    samples: int
    device_peak_mb: float | None = None
    device_source: str | None = None
    device_slope_mb_per_s: float | None = None
    notes: list[str] = field(default_factory=list)


def _rss_reader() -> Callable[[], float]:
    import psutil

    proc = psutil.Process(os.getpid())
    return lambda: proc.memory_info().rss / MB


def _nvml_reader(index: int) -> Callable[[], float] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetMemoryInfo(handle)
    except Exception:  # NVML installed but no NVIDIA driver or device
        return None
    return lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used / MB


def _amdsmi_reader(index: int) -> Callable[[], float] | None:
    try:
        import amdsmi
    except ImportError:
        return None
    try:
        amdsmi.amdsmi_init()
        handle = amdsmi.amdsmi_get_processor_handles()[index]
        amdsmi.amdsmi_get_gpu_vram_usage(handle)
    except Exception:  # amdsmi installed but no AMD driver or device
        return None
    return lambda: float(amdsmi.amdsmi_get_gpu_vram_usage(handle)["vram_used"])


def device_memory_reader(kind: str, index: int) -> tuple[Callable[[], float] | None, str | None]:
    """A function returning device memory in use (MiB) for ``kind`` (``cuda``/``rocm``/``cpu``), and its name.

    Returns ``(None, None)`` for the CPU or when no reader is installed. NVML and amdsmi report the
    whole device (all processes), which is what a dedicated benchmark machine shows.
    """
    if kind == "cuda":
        reader = _nvml_reader(index)
        return (reader, "nvml device used") if reader else (None, None)
    if kind == "rocm":
        reader = _amdsmi_reader(index)
        return (reader, "amdsmi vram used") if reader else (None, None)
    return None, None


def torch_peak_allocated_mb(reset: bool = False) -> float | None:
    """PyTorch's peak allocated GPU memory in MiB (``None`` without a GPU); ``reset`` clears the peak first."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    if reset:
        torch.cuda.reset_peak_memory_stats()
        return 0.0
    torch.cuda.synchronize()
    return float(torch.cuda.max_memory_allocated()) / MB


class CpuShare:
    """CPU time used by this process and by all others between ``__enter__`` and ``__exit__``.

    ``other_share`` is the busy time of other processes as a fraction of all cores over the wall
    time (0: the machine was ours; 0.5 on 2 cores: one core's worth went to someone else), so a
    benchmark on a shared machine says how contended it was. ``own_seconds`` is this process's
    CPU time (user + system) over the block.
    """

    def __enter__(self) -> CpuShare:
        import psutil

        self._proc = psutil.Process(os.getpid())
        self._t0 = time.perf_counter()
        self._sys0 = psutil.cpu_times()
        self._own0 = self._proc.cpu_times()
        self.own_share = 0.0
        self.other_share = 0.0
        self.own_seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        import psutil

        wall = time.perf_counter() - self._t0
        sys1, own1 = psutil.cpu_times(), self._proc.cpu_times()
        busy = (sum(sys1) - sys1.idle - getattr(sys1, "iowait", 0.0)) - (
            sum(self._sys0) - self._sys0.idle - getattr(self._sys0, "iowait", 0.0)
        )
        own = (own1.user + own1.system) - (self._own0.user + self._own0.system)
        cores = psutil.cpu_count() or 1
        self.own_seconds = max(0.0, own)
        if wall > 0:
            self.own_share = max(0.0, own / (wall * cores))
            self.other_share = min(1.0, max(0.0, (busy - own) / (wall * cores)))


class MemorySampler:
    """Sample host RSS (and device memory) every ``interval_s`` seconds while the ``with`` block runs.

    Args:
        interval_s: sampling period in seconds.
        device_reader: optional function returning device memory in use in MiB.
        device_source: name of that reader, stored in the report.
    """

    def __init__(
        self,
        interval_s: float = 0.05,
        device_reader: Callable[[], float] | None = None,
        device_source: str | None = None,
    ) -> None:
        self.interval_s = float(interval_s)
        self._rss = _rss_reader()
        self._device = device_reader
        self._device_source = device_source
        self._t: list[float] = []
        self._host: list[float] = []
        self._dev: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _sample(self) -> None:
        self._t.append(time.perf_counter() - self._t0)
        self._host.append(self._rss())
        if self._device is not None:
            try:
                self._dev.append(self._device())
            except Exception:  # a reader failing mid-run must not stop the benchmark
                self._device = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> MemorySampler:
        self._t0 = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="cg-memory-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def report(
        self, device_peak_override_mb: float | None = None, device_override_source: str | None = None
    ) -> MemoryReport:
        """Summarise the samples; a device peak from the framework (e.g. PyTorch) replaces the sampled one."""
        n = len(self._host)
        dev_peak = max(self._dev) if self._dev else None
        dev_slope = linear_slope(self._t[: len(self._dev)], self._dev) if len(self._dev) == n and n else None
        source = self._device_source if self._dev else None
        if device_peak_override_mb is not None:
            dev_peak, source = device_peak_override_mb, device_override_source
        return MemoryReport(
            host_rss_peak_mb=max(self._host) if n else 0.0,
            host_rss_start_mb=self._host[0] if n else 0.0,
            host_rss_end_mb=self._host[-1] if n else 0.0,
            host_rss_slope_mb_per_s=linear_slope(self._t, self._host),
            samples=n,
            device_peak_mb=dev_peak,
            device_source=source,
            device_slope_mb_per_s=dev_slope,
        )
