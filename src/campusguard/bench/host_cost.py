"""Host work per frame: what a camera frame costs the CPU outside the detector (a capacity plan input).

A host-cost file (versioned JSON, schema in ``host_cost.schema.json``) holds core-milliseconds per
frame of each stage, measured on one core by ``benchmarks/host_cost.py``:

- ``decode``: reading and decoding the frame to BGR (the camera reader);
- ``motion``: the motion gate's plan, crops and merge (only with motion gating on);
- ``tracking_rules``: tracking, rules and handing events on (the analytics worker);
- ``events``: store writes and alert sinks (the event worker), spread over all frames.

`HostCost.ms_per_frame` turns it into the figure `campusguard plan` adds to the detector's work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from campusguard.bench.results import read_json, validate_document

__all__ = [
    "HOST_COST_KIND",
    "HOST_COST_SCHEMA_VERSION",
    "HOST_COST_SCHEMA_PATH",
    "STAGES",
    "HostCost",
    "load_host_cost_schema",
    "validate_host_cost",
    "load_host_cost",
    "write_host_cost",
]

HOST_COST_KIND = "campusguard-host-cost"
HOST_COST_SCHEMA_VERSION = 1
HOST_COST_SCHEMA_PATH = Path(__file__).with_name("host_cost.schema.json")

STAGES: dict[str, str] = {
    "decode": "decode",
    "motion": "motion",
    "tracking_rules": "tracking and rules",
    "events": "events",
}
"""Stage key in the file -> its name in printed plans, in pipeline order."""


@lru_cache(maxsize=1)
def load_host_cost_schema() -> dict[str, Any]:
    """The JSON Schema of host-cost files (draft 2020-12)."""
    with HOST_COST_SCHEMA_PATH.open(encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


def validate_host_cost(doc: Any, source: str = "host cost") -> None:
    """Check a host-cost mapping: version first (newer: refused), then the JSON Schema.

    Raises:
        InvalidInputError: one line naming ``source`` and the first problem found.
    """
    validate_document(doc, load_host_cost_schema(), "host-cost file", HOST_COST_SCHEMA_VERSION, source, HOST_COST_KIND)


@dataclass(frozen=True)
class HostCost:
    """Measured host work per frame of one camera.

    Attributes:
        source: the file it was read from.
        cpu: CPU model name of the machine it was measured on.
        resolution_wh: frame size of the test video (width, height), pixels.
        stages_ms: core-ms per frame of each stage (keys of `STAGES`).
        notes: conditions of the run (e.g. a loaded machine), or None.
    """

    source: str
    cpu: str
    resolution_wh: tuple[int, int]
    stages_ms: dict[str, float]
    notes: str | None = None

    @classmethod
    def from_document(cls, doc: dict[str, Any], source: str) -> HostCost:
        """A validated host-cost document as a `HostCost`."""
        validate_host_cost(doc, source)
        w, h = doc["video"]["resolution_wh"]
        return cls(
            source=source,
            cpu=str(doc["cpu"]),
            resolution_wh=(int(w), int(h)),
            stages_ms={k: float(doc["stages_ms"][k]) for k in STAGES},
            notes=doc.get("notes"),
        )

    def ms_per_frame(self, resolution_wh: tuple[int, int], gated: bool) -> tuple[float, str]:
        """Core-ms of host work per frame for cameras of ``resolution_wh``, and how it was made up.

        Motion analysis counts only when ``gated`` (without gating the motion gate does not run).
        Decoding scales with the pixels per frame when the cameras' resolution differs from the test
        video's (an estimate); the other stages do not depend on the frame size (motion analysis
        works on a downscaled copy).
        """
        parts: list[str] = []
        total = 0.0
        for key, name in STAGES.items():
            ms = self.stages_ms[key]
            if key == "motion" and not gated:
                parts.append(f"{name} not run (no gating)")
                continue
            if key == "decode" and resolution_wh != self.resolution_wh:
                ratio = (resolution_wh[0] * resolution_wh[1]) / (self.resolution_wh[0] * self.resolution_wh[1])
                ms *= ratio
                w, h = self.resolution_wh
                name = f"{name} (x{ratio:.3g}: pixels against the measured {w}x{h})"
            parts.append(f"{name} {ms:.2f}")
            total += ms
        return total, " + ".join(parts)


def load_host_cost(path: str | Path) -> HostCost:
    """Read and validate a host-cost file (one-line `InvalidInputError` when it is not one)."""
    doc = read_json(path, "host-cost file")
    return HostCost.from_document(doc, str(path))


def write_host_cost(doc: dict[str, Any], path: str | Path) -> Path:
    """Validate and write a host-cost document as indented JSON."""
    validate_host_cost(doc, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path
