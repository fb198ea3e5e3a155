"""Diagnose the machine: what hardware and runtimes exist, and which backend will really run where.

`collect_environment()` returns a JSON-serialisable dict; it is also the environment
fingerprint stored in every benchmark result.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from campusguard.backends.devices import list_gpus, visible_devices_env
from campusguard.backends.registry import BACKENDS

__all__ = [
    "Verdict",
    "backend_verdicts",
    "check_visible_devices",
    "collect_environment",
    "cpu_flags",
    "cpu_name",
]

PACKAGES = (
    "campusguard",
    "numpy",
    "opencv-python-headless",
    "opencv-python",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-migraphx",
    "onnxruntime-openvino",
    "openvino",
    "nncf",
    "onnx",
    "torch",
    "torchvision",
    "ultralytics",
    "nvidia-ml-py",
    "amdsmi",
    "faster-coco-eval",
    "trackers",
)


@dataclass(frozen=True)
class Verdict:
    """Whether one backend/provider combination is usable here, and why."""

    backend: str
    status: str  # "ready", "cpu-only", "unavailable"
    detail: str

    def line(self) -> str:
        return f"{self.backend}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``); results measured on different CPUs are not comparable."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The CPU's instruction-set flags that matter for inference (AVX2, AVX-512, VNNI, AMX, FMA)."""
    return _cpu_flags()


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return sorted(
                        f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "fma") if f in flags
                    )
    except OSError:
        pass
    return []


def _torch_info() -> dict[str, Any] | None:
    if _version("torch") is None:
        return None
    try:
        import torch
    except Exception as exc:  # a broken torch install is itself a diagnosis
        return {"error": f"{type(exc).__name__}: {exc}"}
    info: dict[str, Any] = {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "gpu_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }
    info["build"] = (
        f"ROCm/HIP {info['hip']}" if info["hip"] else (f"CUDA {info['cuda']}" if info["cuda"] else "CPU-only")
    )
    if info["gpu_available"]:
        info["devices"] = [
            {
                "index": i,
                "name": torch.cuda.get_device_name(i),
                "memory_total": torch.cuda.get_device_properties(i).total_memory,
            }
            for i in range(torch.cuda.device_count())
        ]
    return info


def check_visible_devices(env: dict[str, str | None], physical: int) -> list[str]:
    """Problems with ``*_VISIBLE_DEVICES`` values given ``physical`` GPUs present (empty list: fine)."""
    problems = []
    for var, value in env.items():
        if value is None:
            continue
        if value.strip() == "":
            problems.append(f"{var} is set but empty: every GPU is hidden")
            continue
        for part in value.split(","):
            p = part.strip()
            if p.isdigit() and int(p) >= physical:
                problems.append(f"{var}={value}: ordinal {p} does not exist ({physical} GPU(s) present)")
            elif not p.isdigit() and not p.startswith(("GPU-", "MIG-")) and not p.startswith("0x"):
                problems.append(f"{var}={value}: {p!r} is neither an ordinal nor a UUID")
    return problems


def backend_verdicts(
    providers: list[str], torch_info: dict[str, Any] | None, gpus: list[dict[str, Any]]
) -> list[Verdict]:
    """One verdict per backend/provider: "ready", "cpu-only" or "unavailable", with the reason.

    Every backend of the registry (`campusguard.backends.registry`) gets its verdicts from its own
    ``verdicts`` function, else one line from its availability check.
    """
    context = {"providers": providers, "torch": torch_info, "gpus": gpus}
    out: list[Verdict] = []
    for spec in BACKENDS.values():
        if spec.verdicts is None:
            missing = spec.missing()
            out.append(Verdict(spec.name, "unavailable" if missing else "ready", missing or ""))
            continue
        for v in spec.verdict_function()(context):
            out.append(v if isinstance(v, Verdict) else Verdict(*v))
    return out


def collect_environment(include_torch: bool = True) -> dict[str, Any]:
    """Everything `campusguard doctor` reports, as a JSON-serialisable dict."""
    import onnxruntime as ort

    from campusguard.backends.onnxruntime_backend import migraphx_cache_root

    mem = psutil.virtual_memory()
    gpus = [asdict(g) for g in list_gpus()]
    providers = ort.get_available_providers()
    torch_info = _torch_info() if include_torch else {"error": "not checked (--no-torch)"}
    env = visible_devices_env()
    return {
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu": {
            "name": cpu_name(),
            "logical_cores": psutil.cpu_count(),
            "physical_cores": psutil.cpu_count(logical=False),
            "flags": _cpu_flags(),
        },
        "ram_bytes": mem.total,
        "python": sys.version.split()[0],
        "packages": {p: v for p in PACKAGES if (v := _version(p)) is not None},
        "torch": torch_info,
        "gpus": gpus,
        "visible_devices": env,
        "visible_devices_problems": check_visible_devices(env, len(gpus)) if gpus else [],
        "onnxruntime": {
            "version": ort.__version__,
            "device": ort.get_device(),
            "providers": providers,
            "migraphx_cache": str(migraphx_cache_root()),  # one directory per model, shape and precision below
        },
        "verdicts": [asdict(v) for v in backend_verdicts(providers, torch_info, gpus)],
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "precision": _precision_advice(_cpu_flags()),
    }


def _precision_advice(flags: list[str]) -> dict[str, Any]:
    """The instruction-set rule's verdict on the bundled model: information only, since ``precision:
    auto`` measures (`campusguard.precision_cache`; ``campusguard doctor`` adds the stored trials)."""
    from campusguard.models.resolve import DEFAULT_MODEL
    from campusguard.precision import choose_precision

    rule = choose_precision(DEFAULT_MODEL, "auto", flags)
    return {"instruction_sets": {"int8_instructions": rule.precision == "int8", "reason": rule.reason}}
