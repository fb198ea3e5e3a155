"""The precision trial's results, cached so that a later start is instant.

One small JSON file per key under ``<cache root>/precision/`` (`campusguard.cache.cache_dir`). The
key is what the figures depend on: the CPU model, each variant file (`campusguard.cache.file_key`:
path, size and modification time, so a replaced file is measured again), the requested ``imgsz``
and trial frame size (hence the input shape), the execution provider and the ONNX Runtime
version. Files are written atomically (temporary file, ``os.replace``), so two processes starting
at once both leave a whole file; one that cannot be read or does not match its key is ignored and
rewritten by the next trial.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.cache import cache_dir, file_key, write_text_atomically
from campusguard.precision import TRIAL_FRAME_HW, TrialDetector, TrialResult, VariantTiming, run_trial, trial_frames

__all__ = [
    "CACHE_VERSION",
    "Calibration",
    "TrialKey",
    "cached_calibrations",
    "calibrate",
    "calibration_file",
    "load_calibration",
    "store_calibration",
    "trial_key",
]

log = logging.getLogger(__name__)

CACHE_VERSION = 4  # 2: the engine trial (several backends, their versions in the key); 3: timed two frames a call;
# 4: on the CPU, timed by the process's CPU time (a wall clock under load picked engines at random)
_FOLDER = "precision"


@dataclass(frozen=True)
class TrialKey:
    """What a trial's figures depend on; equal keys may share one measurement."""

    cpu: str
    files: tuple[tuple[str, str], ...]  # (precision, file key) of each variant, FP32 first
    imgsz: tuple[int, int] | None  # as requested; None: the model's own size
    frame_hw: tuple[int, int]
    provider: str
    onnxruntime: str
    engines: tuple[tuple[str, str], ...] = ()  # (backend, version) of every other engine in the trial

    def digest(self) -> str:
        """A stable name for this key (SHA-256 of its JSON), the same in every process."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Calibration:
    """A stored trial: its key, the model it was for, when it ran (UTC, ISO 8601) and its result."""

    key: TrialKey
    model: str
    measured_at: str
    result: TrialResult

    def summary(self) -> dict[str, Any]:
        """The figures ``campusguard doctor`` shows: ms per variant, the choice, refusals, when measured."""
        r = self.result
        return {
            "model": self.model,
            "input_hw": list(r.input_hw),
            "provider": self.key.provider,
            "onnxruntime": self.key.onnxruntime,
            "engines": dict(self.key.engines),
            "chosen": r.chosen,
            "backend": r.backend,
            "precision": r.precision,
            "chosen_model": r.model,
            "reason": r.reason,
            "ms": {v.precision: round(v.ms, 2) if v.runs else None for v in r.variants},
            "refused": {v.precision: v.note for v in r.variants if not v.accepted},
            "runs": max((v.runs for v in r.variants), default=0),
            "measured_at": self.measured_at,
            "trial_seconds": round(r.seconds, 2),
        }

    def to_json(self) -> dict[str, Any]:
        return {"version": CACHE_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: Any) -> Calibration:
        """Parse a stored calibration; `ValueError` when it is not one (any missing or mistyped field)."""
        try:
            if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
                raise ValueError(f"not a version-{CACHE_VERSION} calibration")
            k, r = data["key"], data["result"]
            key = TrialKey(
                cpu=str(k["cpu"]),
                files=tuple((str(p), str(f)) for p, f in k["files"]),
                imgsz=None if k["imgsz"] is None else (int(k["imgsz"][0]), int(k["imgsz"][1])),
                frame_hw=(int(k["frame_hw"][0]), int(k["frame_hw"][1])),
                provider=str(k["provider"]),
                onnxruntime=str(k["onnxruntime"]),
                engines=tuple((str(b), str(v)) for b, v in k["engines"]),
            )
            variants = tuple(
                VariantTiming(
                    precision=str(v["precision"]),
                    model=str(v["model"]),
                    ms=float(v["ms"]),
                    runs=int(v["runs"]),
                    parity=str(v["parity"]),
                    accepted=bool(v["accepted"]),
                    note=str(v["note"]),
                )
                for v in r["variants"]
            )
            result = TrialResult(
                chosen=str(r["chosen"]),
                model=str(r["model"]),
                reason=str(r["reason"]),
                input_hw=(int(r["input_hw"][0]), int(r["input_hw"][1])),
                variants=variants,
                seconds=float(r["seconds"]),
            )
            if result.chosen not in {v.precision for v in variants}:
                raise ValueError(f"chosen {result.chosen!r} is not among the measured variants")
            return cls(key=key, model=str(data["model"]), measured_at=str(data["measured_at"]), result=result)
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed calibration ({type(exc).__name__}: {exc})") from None


def trial_key(
    variants: Mapping[str, Path],
    *,
    imgsz: tuple[int, int] | None,
    frame_hw: tuple[int, int] = TRIAL_FRAME_HW,
    provider: str = "CPUExecutionProvider",
) -> TrialKey:
    """The key of a trial of ``variants`` on this machine (reads only file metadata: no session)."""
    import importlib.metadata

    import onnxruntime as ort

    from campusguard.backends.registry import DEFAULT_BACKEND, backend_spec
    from campusguard.doctor import cpu_name
    from campusguard.precision import split_label

    others = sorted({split_label(label)[0] for label in variants} - {DEFAULT_BACKEND})
    versions = []
    for backend in others:
        package = backend_spec(backend).requires[0] if backend_spec(backend).requires else backend
        try:
            versions.append((backend, importlib.metadata.version(package)))
        except importlib.metadata.PackageNotFoundError:
            versions.append((backend, "?"))
    return TrialKey(
        cpu=cpu_name(),
        files=tuple((p, file_key(path)) for p, path in variants.items()),
        imgsz=imgsz,
        frame_hw=frame_hw,
        provider=provider,
        onnxruntime=ort.__version__,
        engines=tuple(versions),
    )


def calibration_file(key: TrialKey) -> Path:
    """Where the calibration of ``key`` is stored."""
    return cache_dir() / _FOLDER / f"{key.digest()}.json"


def _read(path: Path) -> Calibration | None:
    try:
        return Calibration.from_json(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        log.warning("ignoring the unreadable precision calibration %s (%s); it will be measured again", path, exc)
        return None


def load_calibration(key: TrialKey) -> Calibration | None:
    """The stored calibration of ``key``; ``None`` when there is none or it is unreadable or for another key."""
    path = calibration_file(key)
    if not path.is_file():
        return None
    found = _read(path)
    return found if found is not None and found.key == key else None


def store_calibration(calibration: Calibration) -> Path:
    """Write ``calibration`` atomically under its key; returns the file."""
    path = calibration_file(calibration.key)
    write_text_atomically(path, json.dumps(calibration.to_json(), indent=2))
    return path


def cached_calibrations() -> list[Calibration]:
    """Every readable stored calibration, newest first (unreadable files are skipped with a warning)."""
    folder = cache_dir() / _FOLDER
    found = [c for p in sorted(folder.glob("*.json")) if (c := _read(p)) is not None] if folder.is_dir() else []
    return sorted(found, key=lambda c: c.measured_at, reverse=True)


def calibrate(
    variants: Mapping[str, Path],
    make: Callable[..., TrialDetector],
    *,
    imgsz: tuple[int, int] | None,
    frame_hw: tuple[int, int] = TRIAL_FRAME_HW,
    provider: str = "CPUExecutionProvider",
    budget_s: float = 3.0,
    fresh: bool = False,
    frames: list[np.ndarray] | None = None,
    among: list[str] | None = None,
) -> tuple[Calibration, bool]:
    """The stored calibration of these variants here, or a new trial (`run_trial`) stored for next time.

    ``fresh`` measures again even when one is stored. ``frames`` replaces the synthetic trial
    frames (`trial_frames`). Returns the calibration and whether it came from the cache.

    On the CPU the variants are timed by the process's CPU time (`time.process_time`, every thread):
    what a service pays per frame, and what other processes' load does not change (timed by the wall
    clock on a loaded 2-core machine, the same trial chose three engines in six runs;
    docs/results/trial-clock-cpu-intel-xeon-amx.md). On a GPU, whose work the host's CPU time does
    not see, by the wall clock.
    """
    key = trial_key(
        variants,
        imgsz=imgsz,
        frame_hw=frame_hw,
        provider=provider + ("" if among is None else f"|among={','.join(among)}"),
    )
    if not fresh and (stored := load_calibration(key)) is not None:
        return stored, True
    clock = time.process_time if provider == "CPUExecutionProvider" else time.perf_counter
    result = run_trial(
        variants, make, frames or trial_frames(frame_hw), budget_s=budget_s, among=among, clock=clock
    )
    calibration = Calibration(
        key=key,
        model=str(variants["fp32"]),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        result=result,
    )
    store_calibration(calibration)
    return calibration, False
