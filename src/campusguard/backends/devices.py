"""Device strings: parsing, and checking that the device really exists.

Accepted: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"rocm"``, ``"rocm:N"``, ``"N"`` (a GPU ordinal
of whatever vendor is present). Visible-device variables (``CUDA_VISIBLE_DEVICES``,
``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``) are honoured by counting what the
runtimes report after they are applied.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from campusguard.errors import DeviceError, InvalidInputError

__all__ = ["DeviceSpec", "GpuInfo", "parse_device", "list_gpus", "resolve_device", "visible_devices_env"]

Kind = Literal["auto", "cpu", "cuda", "rocm"]


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device request: ``kind`` and GPU ``index`` (0 for CPU/auto)."""

    kind: Kind
    index: int = 0

    def __str__(self) -> str:
        return self.kind if self.kind in ("cpu", "auto") else f"{self.kind}:{self.index}"


@dataclass(frozen=True)
class GpuInfo:
    """One visible GPU: vendor (``"nvidia"`` or ``"amd"``), ordinal, name and memory in bytes."""

    vendor: Literal["nvidia", "amd"]
    index: int
    name: str
    memory_total: int | None = None
    source: str = ""


_KINDS: dict[str, Kind] = {"auto": "auto", "cpu": "cpu", "cuda": "cuda", "rocm": "rocm"}  # regex text to Kind
_DEVICE_RE = re.compile(r"^(?:(cpu|auto)|(cuda|rocm|gpu)(?::(\d+))?|(\d+))$")


def parse_device(device: str | int | None) -> DeviceSpec:
    """Parse a device string; raise `InvalidInputError` for anything malformed."""
    text = "auto" if device is None else str(device).strip().lower()
    m = _DEVICE_RE.match(text)
    if not m:
        raise InvalidInputError(f"device {device!r} is not one of auto, cpu, cuda[:N], rocm[:N] or N")
    if m.group(1):
        return DeviceSpec(_KINDS[m.group(1)])
    if m.group(4) is not None:
        vendor = _vendor_present() or "cuda"
        return DeviceSpec(vendor, int(m.group(4)))
    kind = (_vendor_present() or "cuda") if m.group(2) == "gpu" else _KINDS[m.group(2)]
    return DeviceSpec(kind, int(m.group(3) or 0))


def visible_devices_env() -> dict[str, str | None]:
    """The visible-device variables as set in the environment (``None`` when unset)."""
    return {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}


def _nvidia_gpus() -> list[GpuInfo]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            gpus = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
                gpus.append(GpuInfo("nvidia", i, name if isinstance(name, str) else name.decode(), int(mem), "nvml"))
            return _apply_visible(gpus, "CUDA_VISIBLE_DEVICES")
        except Exception:  # NVML present but no driver
            pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
            gpus = []
            for line in out.strip().splitlines():
                idx, name, mem = (p.strip() for p in line.split(","))
                gpus.append(GpuInfo("nvidia", int(idx), name, int(float(mem)) * 1024 * 1024, "nvidia-smi"))
            return _apply_visible(gpus, "CUDA_VISIBLE_DEVICES")
        except (subprocess.SubprocessError, ValueError, OSError):
            pass
    return []


def _amd_gpus() -> list[GpuInfo]:
    try:
        import amdsmi

        amdsmi.amdsmi_init()
        gpus = []
        for i, h in enumerate(amdsmi.amdsmi_get_processor_handles()):
            info = amdsmi.amdsmi_get_gpu_asic_info(h)
            vram = amdsmi.amdsmi_get_gpu_vram_usage(h)
            gpus.append(
                GpuInfo(
                    "amd", i, str(info.get("market_name", "AMD GPU")), int(vram["vram_total"]) * 1024 * 1024, "amdsmi"
                )
            )
        return _apply_visible(gpus, "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    except Exception:
        pass
    if os.path.exists("/dev/kfd") and shutil.which("rocm-smi"):
        try:
            out = subprocess.run(
                ["rocm-smi", "--showproductname", "--csv"], capture_output=True, text=True, timeout=10
            ).stdout
            gpus = []
            for line in out.strip().splitlines()[1:]:
                parts = line.split(",")
                if parts and parts[0].startswith("card"):
                    gpus.append(GpuInfo("amd", len(gpus), parts[1] if len(parts) > 1 else "AMD GPU", None, "rocm-smi"))
            return _apply_visible(gpus, "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
        except (subprocess.SubprocessError, OSError):
            pass
    return []


def _apply_visible(gpus: list[GpuInfo], *variables: str) -> list[GpuInfo]:
    """Restrict and renumber GPUs as the runtime does when a visible-devices variable is set."""
    for var in variables:
        value = os.environ.get(var)
        if value is None:
            continue
        wanted = [v.strip() for v in value.split(",") if v.strip()]
        chosen = []
        for w in wanted:
            if not w.isdigit() or int(w) >= len(gpus):
                break  # runtimes stop at the first invalid entry
            chosen.append(gpus[int(w)])
        gpus = [GpuInfo(g.vendor, i, g.name, g.memory_total, g.source) for i, g in enumerate(chosen)]
    return gpus


def _torch_gpus() -> list[GpuInfo]:
    import sys

    torch = sys.modules.get("torch")  # only if already imported: importing torch costs seconds
    if torch is None or not torch.cuda.is_available():
        return []
    vendor: Literal["nvidia", "amd"] = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    return [
        GpuInfo(
            vendor, i, torch.cuda.get_device_name(i), int(torch.cuda.get_device_properties(i).total_memory), "torch"
        )
        for i in range(torch.cuda.device_count())
    ]


@lru_cache(maxsize=1)
def list_gpus() -> tuple[GpuInfo, ...]:
    """All GPUs visible to this process (after visible-device variables), NVIDIA then AMD."""
    gpus = _nvidia_gpus() + _amd_gpus()
    return tuple(gpus or _torch_gpus())


def _vendor_present() -> Kind | None:
    gpus = list_gpus()
    if not gpus:
        return None
    return "rocm" if gpus[0].vendor == "amd" else "cuda"


def resolve_device(device: str | int | None) -> DeviceSpec:
    """Parse and check a device request against the GPUs that exist.

    ``auto`` becomes the first GPU if any, else ``cpu``.

    Raises:
        DeviceError: naming the devices that do exist, when the requested one does not.
    """
    spec = parse_device(device)
    gpus = list_gpus()
    if spec.kind == "cpu":
        return spec
    if spec.kind == "auto":
        if not gpus:
            return DeviceSpec("cpu")
        return DeviceSpec("rocm" if gpus[0].vendor == "amd" else "cuda", 0)
    vendor = "amd" if spec.kind == "rocm" else "nvidia"
    mine = [g for g in gpus if g.vendor == vendor]
    if spec.index >= len(mine):
        raise DeviceError(f"invalid device ordinal: {spec} requested, {describe_devices()}")
    return spec


def describe_devices() -> str:
    """One phrase naming the devices that exist, for error messages."""
    gpus = list_gpus()
    if not gpus:
        return "but this machine has no usable GPU (available: cpu)"
    names = ", ".join(f"{'rocm' if g.vendor == 'amd' else 'cuda'}:{g.index} ({g.name})" for g in gpus)
    return f"available: cpu, {names}"
