"""The environment fingerprint stored in every benchmark result, and the machine name.

The fingerprint is `campusguard.doctor.collect_environment`, so `doctor` and every result
describe a machine the same way.
"""

from __future__ import annotations

import logging
import platform
import re
from typing import Any

__all__ = ["environment_fingerprint", "default_machine_name"]

log = logging.getLogger(__name__)


def environment_fingerprint() -> dict[str, Any]:
    """`campusguard doctor`'s report (OS, CPU and its SIMD flags, RAM, versions, GPUs, providers).

    A failure inside the diagnosis must not stop a benchmark: it is recorded as ``error``
    beside the platform basics.
    """
    from campusguard.doctor import collect_environment

    try:
        env = collect_environment()
    except Exception as exc:  # diagnosis is best effort inside a benchmark
        log.warning("doctor.collect_environment failed (%s); storing the platform basics only", exc)
        return {"source": "platform", "os": f"{platform.system()} {platform.release()}", "machine": platform.machine(),
                "cpu": platform.processor() or platform.machine(), "error": str(exc)[:200]}  # fmt: skip
    env["source"] = "campusguard.doctor"
    return env


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
