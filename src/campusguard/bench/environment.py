"""The environment fingerprint stored in every benchmark result, and the machine name.

`campusguard.doctor.collect_environment` is the source when it exists; otherwise (or when it
fails) a minimal fingerprint is built here: platform, CPU, memory, library versions, GPUs and
ONNX Runtime providers, so a result never lacks one.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import re
import socket
from typing import Any

__all__ = ["environment_fingerprint", "minimal_fingerprint", "default_machine_name", "cpu_model"]

log = logging.getLogger(__name__)

_PACKAGES = ("campusguard", "numpy", "opencv-python-headless", "onnxruntime", "onnxruntime-gpu", "torch", "ultralytics")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_flags() -> list[str]:
    """SIMD flags that decide INT8/FP16 kernel choice (avx2, avx512*, vnni, amx)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return sorted(f for f in flags if re.match(r"^(avx|amx|fma|f16c|sse4)", f))
    except OSError:
        pass
    return []


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def minimal_fingerprint() -> dict[str, Any]:
    """A fingerprint built without `campusguard.doctor`: OS, CPU, memory, versions, GPUs, providers."""
    import psutil

    info: dict[str, Any] = {
        "source": "campusguard.bench.environment",
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cpu_logical": os.cpu_count(),
        "cpu_physical": psutil.cpu_count(logical=False),
        "ram_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "versions": _versions(),
    }
    try:
        import onnxruntime as ort

        info["ort_providers"] = list(ort.get_available_providers())
    except ImportError:
        info["ort_providers"] = []
    try:
        from campusguard.backends.devices import list_gpus

        info["gpus"] = [
            {"vendor": g.vendor, "index": g.index, "name": g.name, "memory_total": g.memory_total} for g in list_gpus()
        ]
    except Exception as exc:  # GPU discovery must never stop a benchmark
        info["gpus"] = []
        info["gpu_error"] = str(exc)[:200]
    return info


def environment_fingerprint() -> dict[str, Any]:
    """The doctor's fingerprint when available, completed with the fields the reports need."""
    base = minimal_fingerprint()
    try:
        from campusguard.doctor import collect_environment  # type: ignore[attr-defined]
    except ImportError:
        return base
    try:
        doctor = collect_environment()
    except Exception as exc:  # a diagnosis bug must not stop a benchmark; keep the minimal one
        log.warning("doctor.collect_environment failed (%s); using the minimal fingerprint", exc)
        return base
    if not isinstance(doctor, dict):
        return base
    merged = dict(doctor)
    merged["source"] = "campusguard.doctor"
    for key, value in base.items():
        merged.setdefault(key, value)
    return merged


def default_machine_name(fingerprint: dict[str, Any]) -> str:
    """A short machine name for reports: the first GPU's name, else the CPU's (e.g. ``cpu-amd-epyc``)."""
    gpus = fingerprint.get("gpus") or []
    if gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        name = str(gpus[0]["name"])
        prefix = "gpu"
    else:
        cpu = fingerprint.get("cpu") or "unknown"
        name = str(cpu.get("name", "unknown")) if isinstance(cpu, dict) else str(cpu)
        prefix = "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
    slug = re.sub(r"-(processor|cpu|\d+-core)\b", "", slug).strip("-")
    slug = "-".join(slug.split("-")[:4])
    return f"{prefix}-{slug}" if not slug.startswith(prefix) else slug
