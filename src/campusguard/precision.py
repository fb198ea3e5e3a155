"""Which precision of a model to run: measured on this machine, not guessed from its instruction sets.

A *variant* of an ONNX model is a file next to it: ``NAME-int8.onnx`` (how the bundled model
ships) or ``NAME.int8.onnx`` (what ``campusguard export --int8`` writes), likewise ``fp16``.
Which variants a device may try comes from `campusguard.backends.registry.FORMATS` (INT8 on the CPU,
FP16 on GPUs); nothing is exported or quantised here (INT8 needs calibration images and minutes:
``campusguard export MODEL --int8 --data DIR`` makes one).

`run_trial` times each variant on the same frames, interleaved, and keeps the fastest whose boxes
pass the export accuracy check against FP32 (`campusguard.models.parity.PARITY_THRESHOLDS`). It is
a pure function of a detector factory and frames: no threads, no files; `campusguard.precision_cache`
stores its result per CPU, model files, shape, provider and ONNX Runtime version.

The instruction-set rule (INT8 where the CPU has VNNI or AMX) is kept as information only
(`choose_precision` with ``auto``, shown by ``campusguard doctor``): on a 2-vCPU AMD EPYC without
VNNI the bundled INT8 model ran 1.5x FP32's frames per second.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import CampusGuardError, InvalidInputError, ModelLoadError

__all__ = [
    "INT8_CPU_FLAGS",
    "TRIAL_FRAME_HW",
    "PrecisionChoice",
    "TrialDetector",
    "TrialResult",
    "VariantTiming",
    "choose_precision",
    "cpu_has_bf16",
    "split_label",
    "trial_candidates",
    "trial_label",
    "cpu_prefers_int8",
    "int8_variant",
    "run_trial",
    "shipped_variants",
    "trial_frames",
    "variant_file",
]

INT8_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
Precision = Literal["auto", "fp32", "int8"]
TRIAL_FRAME_HW = (720, 1280)
"""The frame size the start-up trial renders (16:9, what campus cameras send); the input shape
follows from it and ``imgsz`` as it does for a camera of that size."""


def cpu_prefers_int8(flags: Iterable[str]) -> bool:
    """Whether a CPU with these ``/proc/cpuinfo`` flags has fast INT8 dot products (VNNI or AMX)."""
    return any(f in INT8_CPU_FLAGS for f in flags)


def variant_file(model: Path, precision: str) -> Path | None:
    """The ``precision`` file shipped next to ONNX ``model`` (``NAME-P.onnx`` or ``NAME.P.onnx``; an OpenVINO
    IR ``NAME-P.xml`` or ``NAME.P.xml``), if any."""
    if model.suffix != ".onnx":
        return None
    for name in (f"{model.stem}{sep}{precision}{suffix}" for suffix in (".onnx", ".xml") for sep in ("-", ".")):
        candidate = model.with_name(name)
        if candidate.is_file():
            return candidate
    return None


def int8_variant(model: Path) -> Path | None:
    """The INT8 file shipped next to ONNX ``model`` (``NAME-int8.onnx`` or ``NAME.int8.onnx``), if any."""
    return variant_file(model, "int8")


def split_label(label: str) -> tuple[str, str]:
    """A trial label -> ``(backend, precision)``: ``int8`` is ONNX Runtime's INT8, ``openvino-bf16`` OpenVINO's BF16."""
    from campusguard.backends.registry import DEFAULT_BACKEND

    backend, _, precision = label.rpartition("-")
    return (backend or DEFAULT_BACKEND, precision)


def trial_label(backend: str, precision: str) -> str:
    """The label of ``precision`` on ``backend`` in a trial (ONNX Runtime's labels are the bare precision)."""
    from campusguard.backends.registry import DEFAULT_BACKEND

    return precision if backend == DEFAULT_BACKEND else f"{backend}-{precision}"


def cpu_has_bf16(flags: Iterable[str] | None = None) -> bool:
    """Whether the CPU has BF16 arithmetic (AVX-512 BF16 or AMX), from ``/proc/cpuinfo`` flags."""
    if flags is None:
        try:
            with open("/proc/cpuinfo") as f:
                line = next((x for x in f if x.startswith("flags")), "")
            flags = line.split(":", 1)[1].split() if ":" in line else []
        except OSError:
            flags = []
    return any(f in ("avx512_bf16", "amx_bf16") for f in flags)


def trial_candidates(model: Path, backend: str | None = None, flags: Iterable[str] | None = None) -> dict[str, Path]:
    """What ``precision: auto`` times on the CPU for ONNX ``model``: label -> file.

    ``fp32`` (ONNX Runtime on the model itself: the accuracy reference) first, then every precision each
    installed backend's registry entry lists in ``cpu_trial`` (`campusguard.backends.registry`): a file
    precision when its variant file is shipped next to the model (``NAME.int8.onnx``, OpenVINO's ``NAME.int8ov.xml``),
    a compiled one (OpenVINO's ``bf16``) on the model itself when the CPU has it. ``backend`` limits the
    candidates to that backend's (the reference stays, to check them against).
    """
    from campusguard.backends.registry import BACKENDS, FORMATS

    out = {"fp32": model}
    for spec in BACKENDS.values():
        if not spec.cpu_trial or (backend is not None and spec.name != backend) or not spec.available:
            continue
        for precision in spec.cpu_trial:
            label = trial_label(spec.name, precision)
            if label in out:
                continue
            if precision == "fp32":
                out[label] = model
            elif precision in FORMATS:
                if (path := variant_file(model, precision)) is not None:
                    out[label] = path
            elif precision == "bf16" and cpu_has_bf16(flags):
                out[label] = model
    return out


def shipped_variants(model: Path, device_kind: str = "cpu") -> dict[str, Path]:
    """ONNX Runtime's variants of ``model`` a trial on ``device_kind`` (``cpu``, ``cuda``, ``rocm``) compares: FP32
    (the model itself) first, then each shipped file whose precision `FORMATS` lists for that device and ONNX
    Runtime (another engine's files, OpenVINO's IR, are `trial_candidates`' business)."""
    from campusguard.backends.registry import DEFAULT_BACKEND, FORMATS

    out = {"fp32": model}
    for precision, spec in FORMATS.items():
        runs_here = DEFAULT_BACKEND in spec["backends"].split(",") and device_kind in spec["devices"].split(",")
        if precision != "fp32" and runs_here:
            path = variant_file(model, precision)
            if path is not None:
                out[precision] = path
    return out


@dataclass(frozen=True)
class PrecisionChoice:
    """The model file to load and why: ``precision`` is ``"fp32"`` or ``"int8"``."""

    model: Path
    precision: Literal["fp32", "int8"]
    reason: str


def choose_precision(model: Path, requested: Precision, cpu_flags: Iterable[str]) -> PrecisionChoice:
    """Pick FP32 ``model`` or its INT8 variant as requested; ``auto`` here is the instruction-set rule.

    ``int8``: the variant, a `ModelLoadError` when there is none. ``fp32``: ``model`` itself.
    ``auto``: INT8 when the CPU has VNNI/AMX and the variant exists, else FP32 -- information
    (``campusguard doctor``); the app's ``precision: auto`` measures instead (`run_trial`).
    """
    variant = int8_variant(model)
    if requested == "fp32":
        return PrecisionChoice(model, "fp32", "requested")
    if requested == "int8":
        if variant is None:
            raise ModelLoadError(
                f"{model.name} has no INT8 variant (looked for {model.stem}-int8.onnx and {model.stem}.int8.onnx next to it); "
                "make one with `campusguard export MODEL --int8 --data IMAGES`"
            )
        return PrecisionChoice(variant, "int8", "requested")
    flags = list(cpu_flags)
    if not cpu_prefers_int8(flags):
        return PrecisionChoice(model, "fp32", "this CPU has no VNNI/AMX INT8 instructions")
    if variant is None:
        return PrecisionChoice(model, "fp32", f"the CPU has VNNI/AMX but {model.name} has no INT8 variant")
    return PrecisionChoice(variant, "int8", "the CPU has VNNI/AMX and the model an INT8 variant")


# the measured choice ---------------------------------------------------------------------------
class TrialDetector(Protocol):
    """What the trial needs of a `campusguard.Detector`."""

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]: ...

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]: ...


@dataclass(frozen=True)
class VariantTiming:
    """One variant's figures in a trial.

    Attributes:
        precision: ``fp32``, ``int8`` or ``fp16``.
        model: its file.
        ms: median milliseconds per frame (`Detector.predict_batch` of one frame: pre-processing,
            network and post-processing) over the timed rounds; NaN when it did not run.
        runs: timed rounds (0: it could not be loaded).
        parity: the accuracy check against FP32 on the trial frames (one line; empty for FP32).
        accepted: whether it passed that check (FP32 always).
        note: why it was refused, empty when accepted.
    """

    precision: str
    model: str
    ms: float
    runs: int
    parity: str = ""
    accepted: bool = True
    note: str = ""


@dataclass(frozen=True)
class TrialResult:
    """What a trial measured and chose.

    Attributes:
        chosen: the precision to run.
        model: the file to load for it.
        reason: one line: why that one.
        input_hw: the network input shape the variants ran at.
        variants: each variant's figures, FP32 first.
        seconds: the trial's wall time, loading included.
    """

    chosen: str
    model: str
    reason: str
    input_hw: tuple[int, int]
    variants: tuple[VariantTiming, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    @property
    def backend(self) -> str:
        """The backend of the chosen variant (`split_label`)."""
        return split_label(self.chosen)[0]

    @property
    def precision(self) -> str:
        """The precision of the chosen variant: ``fp32``, ``bf16``, ``int8``, ``int8ov``."""
        return split_label(self.chosen)[1]

    def line(self) -> str:
        """The figures in one line, e.g. for the start-up log."""
        figures = ", ".join(
            f"{v.precision} " + (f"{v.ms:.1f} ms" if v.runs else "not run") + ("" if v.accepted else " (refused)")
            for v in self.variants
        )
        h, w = self.input_hw
        return f"{self.chosen.upper()} ({Path(self.model).name}) at {h}x{w}: {figures} per frame; {self.reason}"


def trial_frames(frame_hw: tuple[int, int] = TRIAL_FRAME_HW, count: int = 6, seed: int = 0) -> list[np.ndarray]:
    """``count`` frames of a synthetic campus scene (people, bicycles, vehicles) of ``frame_hw`` pixels:
    the same frames on every machine, with enough objects for the accuracy check to mean something."""
    from campusguard.data.synth.video import SynthVideo

    if count < 1 or min(frame_hw) < 32:
        raise InvalidInputError(f"trial frames: need at least one frame of 32 px or more, got {count} of {frame_hw}")
    fps, seconds = 10, 20.0
    video = SynthVideo(seed, (frame_hw[1], frame_hw[0]), seconds, fps)
    step = int(seconds * fps) // count
    return [video.frame(i * step)[0] for i in range(count)]


def run_trial(
    variants: Mapping[str, Path],
    make: Callable[..., TrialDetector],
    frames: Sequence[np.ndarray],
    *,
    budget_s: float = 3.0,
    min_rounds: int = 3,
    max_rounds: int = 60,
    min_gain: float = 0.05,
    clock: Callable[[], float] = time.perf_counter,
    among: Sequence[str] | None = None,
    batch: int = 2,
) -> TrialResult:
    """Time each variant on ``frames`` and choose the fastest that keeps FP32's boxes.

    A variant's label is its precision on ONNX Runtime (``fp32``, ``int8``) or
    ``<backend>-<precision>`` on another engine (``openvino-bf16``, `trial_candidates`): ``make(path)``
    builds the former, ``make(path, backend=..., precision=...)`` the latter. ``among`` limits the choice
    to those labels (a forced backend); ``fp32`` is still the accuracy reference.

    Each variant is built once with ``make`` and first detects every frame (its warm-up, and the
    boxes the accuracy check compares with FP32's, `PARITY_THRESHOLDS`). Then timed rounds: one
    call of ``batch`` frames per variant per round (milliseconds per frame), the order rotated each
    round, until ``budget_s`` (loading and warm-up included) is spent, at least ``min_rounds`` and at
    most ``max_rounds``. Two frames a call by default: the service's detection stage batches the
    frames queued when it is busy, when speed matters, and an engine's batch path is what it then
    runs (OpenVINO's streams, ONNX Runtime's batched call), not its one-frame latency. A variant other
    than FP32 is chosen when it passed the check and its median is at least ``min_gain`` faster
    than FP32's (a tie keeps FP32, the reference).

    Raises:
        InvalidInputError: no ``fp32`` variant, no frames, or bad round limits.
    """
    from campusguard.backends.registry import backend_spec
    from campusguard.models.parity import PARITY_THRESHOLDS, compare_detections

    if "fp32" not in variants:
        raise InvalidInputError("a precision trial needs the FP32 model as its reference")
    if not frames or min_rounds < 1 or max_rounds < min_rounds or budget_s <= 0 or batch < 1:
        raise InvalidInputError(
            f"a precision trial needs frames, 1 <= min_rounds <= max_rounds and a positive budget "
            f"(got {len(frames)} frames, rounds {min_rounds}..{max_rounds}, budget {budget_s} s, batch {batch})"
        )
    start = clock()
    refusals: dict[str, str] = {}
    detectors = {"fp32": make(variants["fp32"])}
    for p in (p for p in variants if p != "fp32"):
        backend, precision = split_label(p)
        # a compiled precision (OpenVINO's bf16) is asked of the backend; a file precision (its int8ov IR) is the file's
        compiled = precision if precision in backend_spec(backend).precisions else None
        try:
            detectors[p] = (
                make(variants[p]) if p == precision else make(variants[p], backend=backend, precision=compiled)
            )
        except CampusGuardError as exc:  # a broken variant file is refused; FP32 still runs
            refusals[p] = f"cannot load: {exc}"
    names = list(detectors)
    boxes = {p: [detectors[p].predict_batch([f])[0] for f in frames] for p in names}
    checks: dict[str, str] = {}
    for p in names[1:]:
        report = compare_detections(boxes["fp32"], boxes[p])
        checks[p] = report.line()
        bar = PARITY_THRESHOLDS.get(split_label(p)[1])
        failure = "no accuracy bar for this precision" if bar is None else bar.failure(report)
        if failure is not None:
            refusals[p] = failure
    times: dict[str, list[float]] = {p: [] for p in names}
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or clock() - start < budget_s):
        call = [frames[(rounds * batch + k) % len(frames)] for k in range(batch)]
        shift = rounds % len(names)
        for p in names[shift:] + names[:shift]:
            t0 = clock()
            detectors[p].predict_batch(call)
            times[p].append((clock() - t0) * 1000 / batch)
        rounds += 1
    medians = {p: statistics.median(times[p]) for p in names}
    timings = tuple(
        VariantTiming(
            precision=p,
            model=str(variants[p]),
            ms=medians.get(p, float("nan")),
            runs=rounds if p in medians else 0,
            parity=checks.get(p, ""),
            accepted=p not in refusals,
            note=refusals.get(p, ""),
        )
        for p in ["fp32", *(p for p in variants if p != "fp32")]
    )
    chosen, reason = _decide(medians, refusals, min_gain, among)
    frame_hw = (int(frames[0].shape[0]), int(frames[0].shape[1]))
    return TrialResult(
        chosen=chosen,
        model=str(variants[chosen]),
        reason=reason,
        input_hw=detectors["fp32"].input_hw(frame_hw),
        variants=timings,
        seconds=clock() - start,
    )


def _decide(
    medians: Mapping[str, float], refusals: Mapping[str, str], min_gain: float, among: Sequence[str] | None = None
) -> tuple[str, str]:
    """The chosen label and why, from the medians (ms) and the variants the accuracy check refused."""
    if among is not None and "fp32" not in among:
        return _decide_forced(medians, refusals, among)
    fp32 = medians["fp32"]
    others = sorted((ms, p) for p, ms in medians.items() if p != "fp32")
    if not others and not refusals:
        return "fp32", "the model has no other variant for this device"
    good = [(ms, p) for ms, p in others if p not in refusals]
    refused = "; ".join(f"{p.upper()} refused: {why}" for p, why in refusals.items())
    if not good:
        return "fp32", refused
    ms, best = good[0]
    if ms <= fp32 * (1 - min_gain):
        why = f"{fp32 / ms:.2f}x FP32's speed, boxes within the export accuracy check"
        return best, why + (f"; {refused}" if refused else "")
    why = f"{best.upper()} is not {min_gain:.0%} faster than FP32 here ({ms:.1f} vs {fp32:.1f} ms)"
    return "fp32", why + (f"; {refused}" if refused else "")


def _decide_forced(medians: Mapping[str, float], refusals: Mapping[str, str], among: Sequence[str]) -> tuple[str, str]:
    """A forced backend: its fastest variant that passed the accuracy check, else its first (its FP32)."""
    if not among:
        raise InvalidInputError("a forced backend needs at least one candidate")
    good = sorted((medians[p], p) for p in among if p in medians and p not in refusals)
    if good:
        ms, best = good[0]
        return best, f"the fastest of the forced backend's variants that keeps FP32's boxes ({ms:.1f} ms)"
    first = among[0]
    return (
        first,
        f"the forced backend's {first}: none of its variants passed the accuracy check ({refusals.get(first, '')})",
    )
