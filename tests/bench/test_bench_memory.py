"""Memory sampling: the peak and the slope show a growing process; device readers degrade to None."""

from __future__ import annotations

import mmap
import time

import numpy as np

from campusguard.bench.memory import CpuShare, MemorySampler, device_memory_reader, torch_peak_allocated_mb


def test_growing_memory_shows_as_peak_and_positive_slope() -> None:
    keep: list[mmap.mmap] = []
    with MemorySampler(interval_s=0.01) as sampler:
        # 36 MiB blocks mapped anew and every page written: fresh resident pages whatever the process
        # did before. (Blocks from malloc could reuse a heap freed earlier, and did in a pytest-xdist
        # worker that had run the engines' tests: the RSS did not move.)
        for _ in range(4):
            block = mmap.mmap(-1, 36 * 1024 * 1024)
            np.frombuffer(block, dtype=np.uint8)[:] = 1
            keep.append(block)
            time.sleep(0.05)
    rep = sampler.report()
    for block in keep:
        block.close()
    assert rep.samples >= 3
    assert rep.host_rss_peak_mb >= rep.host_rss_start_mb + 100  # 144 MiB allocated in total
    assert rep.host_rss_slope_mb_per_s > 0
    assert rep.device_peak_mb is None and rep.device_source is None


def test_steady_memory_has_no_large_slope_and_device_reader_is_used() -> None:
    values = iter(range(100, 10_000))
    with MemorySampler(interval_s=0.01, device_reader=lambda: float(next(values)), device_source="fake") as sampler:
        time.sleep(0.1)
    rep = sampler.report()
    assert rep.device_source == "fake"
    assert rep.device_peak_mb is not None and rep.device_peak_mb >= 101
    assert rep.device_slope_mb_per_s is not None and rep.device_slope_mb_per_s > 0
    over = sampler.report(device_peak_override_mb=5.0, device_override_source="torch")
    assert (over.device_peak_mb, over.device_source) == (5.0, "torch")


def test_a_failing_device_reader_is_dropped_not_raised() -> None:
    def broken() -> float:
        raise OSError("driver gone")

    with MemorySampler(interval_s=0.01, device_reader=broken, device_source="x") as sampler:
        time.sleep(0.03)
    assert sampler.report().device_peak_mb is None


def test_no_device_reader_on_cpu_and_no_torch_peak_without_gpu() -> None:
    assert device_memory_reader("cpu", 0) == (None, None)
    assert torch_peak_allocated_mb() is None or torch_peak_allocated_mb() >= 0


def test_cpu_share_is_a_fraction() -> None:
    with CpuShare() as cpu:
        sum(i * i for i in range(3_000_000))  # ~0.3 s of CPU, well above the 10 ms clock tick
    assert 0.0 <= cpu.other_share <= 1.0
    assert cpu.own_share > 0.0
