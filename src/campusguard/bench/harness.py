"""The benchmark harness: plan the matrix, time each combination, assemble the result.

Per combination (model x backend x precision x batch, plus multi-stream runs):

1. skip rules (`prepare.skip_reason`) - a combination that cannot run here is recorded with
   its reason and the matrix goes on;
2. preparation (export / FP16 / INT8, cached) - timed as ``prepare_s``, never mixed in;
3. first inference - session creation (``load_ms``, where TensorRT / MIGraphX compile) and the
   first call (``first_run_ms``), reported on their own;
4. warm-up calls, then timed calls for at least ``iters`` iterations and ``min_seconds`` seconds,
   ``repeat`` times back to back, with memory sampled throughout;
5. accuracy on a YOLO data set (skipped with the reason for random-weight models);
6. cost per million images from the price per hour and the measured throughput.

Any error in one combination is recorded as ``failed`` with a one-line reason.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from campusguard.backends.devices import DeviceSpec, resolve_device
from campusguard.backends.registry import backend_spec
from campusguard.bench.memory import (
    CpuShare,
    MemoryReport,
    MemorySampler,
    device_memory_reader,
    torch_peak_allocated_mb,
)
from campusguard.bench.prepare import (
    BACKENDS,
    ORT_VARIANTS,
    PRECISIONS,
    TORCH_VARIANTS,
    VARIANTS,
    prepare_onnx,
    skip_reason,
)
from campusguard.bench.results import SCHEMA_VERSION
from campusguard.bench.stats import cost_per_million, latency_stats, spread, throughput
from campusguard.bench.timing import TimedRun, run_timed
from campusguard.errors import CampusGuardError, DeviceError, InvalidInputError, MissingDependencyError
from campusguard.models.families import head_end_to_end
from campusguard.models.resolve import parse_model_ref

if TYPE_CHECKING:
    from campusguard.detector import Detector

__all__ = [
    "SCENARIOS",
    "BenchSettings",
    "Combination",
    "plan_matrix",
    "check_batches",
    "bench_combination",
    "run_matrix",
    "summarise_scenarios",
    "build_result",
]

log = logging.getLogger(__name__)

SCENARIOS = ("single-stream", "offline", "multi-stream")


@dataclass(frozen=True)
class BenchSettings:
    """How every combination is measured.

    Attributes:
        imgsz_hw: network input (height, width) in pixels.
        device: ``auto``, ``cpu``, ``cuda:N``, ``rocm:N``.
        warmup: untimed calls after the first inference.
        iters: minimum timed calls per repeat.
        min_seconds: minimum timed seconds per repeat.
        max_iters: hard cap on timed calls per repeat.
        repeat: back-to-back timed phases (repeatability check when >= 2).
        repeat_tolerance: largest relative spread of the repeats' medians that counts as agreement.
        price_per_hour: machine price in US dollars per hour (cost per million images), or ``None``.
        conf: confidence threshold while timing (0..1).
        iou: NMS IoU threshold (0..1).
        accuracy_conf: confidence threshold for mAP (COCO practice: 0.001).
        accuracy_images: evaluate on at most this many data set images (``None``: all).
        dynamic: ONNX export with dynamic batch instead of one static export per batch size.
        memory_interval_s: memory sampling period in seconds.
        max_samples: latency samples kept in the result for distribution plots.
        int8_per_channel: INT8 per-channel weight scales.
        int8_reduce_range: INT8 7-bit weights.
        torch_threads: PyTorch intra-op threads (``None``: PyTorch's default, one per core).
        ort_threads: ONNX Runtime intra-op threads (0: one per physical core).
        ort_spinning: ONNX Runtime pool threads spin-wait between calls; off gives steadier
            numbers on shared machines.
        head: the head of ``.pt`` and architecture models (``end2end``, ``classic``; ``None``: their own).
    """

    imgsz_hw: tuple[int, int] = (640, 640)
    device: str = "auto"
    warmup: int = 3
    iters: int = 20
    min_seconds: float = 5.0
    max_iters: int | None = 100_000
    repeat: int = 1
    repeat_tolerance: float = 0.10
    price_per_hour: float | None = None
    conf: float = 0.25
    iou: float = 0.7
    accuracy_conf: float = 0.001
    accuracy_images: int | None = None
    dynamic: bool = False
    memory_interval_s: float = 0.05
    max_samples: int = 2000
    int8_per_channel: bool = False
    int8_reduce_range: bool = True
    torch_threads: int | None = None
    ort_threads: int = 0
    ort_spinning: bool = True
    head: str | None = None


@dataclass(frozen=True)
class Combination:
    """One cell of the matrix. ``scenario`` is ``batch`` or ``multi-stream`` (then ``batch == streams``)."""

    model: str
    backend: str
    precision: str
    batch: int
    scenario: str = "batch"

    @property
    def label(self) -> str:
        tag = f"streams={self.batch}" if self.scenario == "multi-stream" else f"b{self.batch}"
        return f"{self.model} {self.backend} {self.precision} {tag}"


def check_batches(batches: Sequence[int]) -> list[int]:
    """Validate batch sizes (each >= 1, at least one); return them without duplicates, in order."""
    if not batches:
        raise InvalidInputError("give at least one batch size")
    for b in batches:
        if int(b) < 1:
            raise InvalidInputError(f"batch size {b} must be at least 1")
    return list(dict.fromkeys(int(b) for b in batches))


def plan_matrix(
    models: Sequence[str],
    backends: Sequence[str],
    precisions: Sequence[str],
    batches: Sequence[int],
    scenarios: Sequence[str] = ("single-stream", "offline"),
    streams: int = 4,
) -> list[Combination]:
    """All combinations to run, validated up front (unknown models, backends, precisions, bad batches raise).

    Single-stream needs batch 1 and offline the batch list; multi-stream adds one run per
    model/backend/precision with ``streams`` sources.
    """
    if not models:
        raise InvalidInputError("give at least one model")
    for m in models:
        parse_model_ref(m)
    for b in backends:
        if b not in BACKENDS:
            raise InvalidInputError(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    for p in precisions:
        if p not in PRECISIONS:
            raise InvalidInputError(f"unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")
    for s in scenarios:
        if s not in SCENARIOS:
            raise InvalidInputError(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    sizes = check_batches(batches)
    if "single-stream" in scenarios and 1 not in sizes:
        sizes = [1, *sizes]
    if streams < 1:
        raise InvalidInputError(f"streams={streams} must be at least 1")
    combos = [Combination(m, be, p, b) for m in models for be in backends for p in precisions for b in sizes]
    if "multi-stream" in scenarios:
        combos += [
            Combination(m, be, p, streams, "multi-stream") for m in models for be in backends for p in precisions
        ]
    return combos


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _queries(combo: Combination, frames: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """The frame lists of successive calls: batches drawn from the pool, or one frame per stream."""
    from campusguard.bench.inputs import stream_frames

    if combo.scenario == "multi-stream":
        sources = stream_frames(frames, combo.batch)
        n = len(sources[0])
        return [[src[k] for src in sources] for k in range(n)]
    n = max(1, len(frames))
    return [[frames[(k * combo.batch + j) % n] for j in range(combo.batch)] for k in range(n)]


def _base_record(combo: Combination, spec: DeviceSpec) -> dict[str, Any]:
    return {
        "model": combo.model,
        "backend": combo.backend,
        "precision": combo.precision,
        "batch": combo.batch,
        "scenario": combo.scenario,
        "streams": combo.batch if combo.scenario == "multi-stream" else None,
        "status": "skipped",
        "reason": None,
        "device": str(spec),
    }


def _accuracy(detector: Any, dataset: Any, batch: int, settings: BenchSettings) -> dict[str, Any]:
    """mAP of ``detector`` on ``dataset`` at ``settings.accuracy_conf`` (threshold restored after)."""
    from campusguard.eval import evaluate_detections
    from campusguard.eval.validate import predict_dataset

    n = len(dataset.image_paths) if settings.accuracy_images is None else min(settings.accuracy_images, len(dataset))
    paths, truths = dataset.image_paths[:n], dataset.truths[:n]
    saved = detector.conf
    detector.conf = settings.accuracy_conf
    try:
        preds = predict_dataset(detector, paths, batch=batch)
    finally:
        detector.conf = saved
    metrics = evaluate_detections(preds, truths, dataset.names)
    return {
        "status": "ok",
        "reason": None,
        "map50_95": float(metrics.map50_95),
        "map50": float(metrics.map50),
        "images": n,
        "data": str(dataset.data_yaml),
        "conf": settings.accuracy_conf,
    }


def _accuracy_skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason, "map50_95": None, "map50": None, "images": None, "data": None}


def bench_combination(
    combo: Combination,
    settings: BenchSettings,
    frames: Sequence[np.ndarray],
    spec: DeviceSpec,
    dataset: Any = None,
    calibration: Sequence[Path] | None = None,
    measure_accuracy: bool = True,
) -> dict[str, Any]:
    """Measure one combination; never raises for a problem of this combination alone (recorded instead)."""
    rec = _base_record(combo, spec)
    ref = parse_model_ref(combo.model)
    reason = skip_reason(ref, combo.backend, combo.precision, spec.kind)
    if reason:
        rec["reason"] = reason
        return rec
    try:
        rec.update(_measure(combo, settings, frames, spec, dataset, calibration, measure_accuracy))
        rec["status"], rec["reason"] = "ok", None
    except (DeviceError, MissingDependencyError) as exc:
        rec["status"], rec["reason"] = "skipped", _first_line(exc)
    except CampusGuardError as exc:
        rec["status"], rec["reason"] = "failed", _first_line(exc)
    except Exception as exc:  # one broken combination must not stop the matrix
        log.exception("combination %s failed", combo.label)
        rec["status"], rec["reason"] = "failed", f"{type(exc).__name__}: {_first_line(exc)}"
    return rec


@dataclass
class _TimedPhase:
    """What the timed repeats of one combination measured."""

    runs: list[TimedRun]
    phase_shares: list[float]  # other processes' CPU share during each repeat: explains disagreement
    cpu: CpuShare
    memory: MemoryReport
    load_start: float


def _measure(
    combo: Combination,
    settings: BenchSettings,
    frames: Sequence[np.ndarray],
    spec: DeviceSpec,
    dataset: Any,
    calibration: Sequence[Path] | None,
    measure_accuracy: bool,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    model_arg = _prepare_model(combo, settings, calibration)
    prepare_s = time.perf_counter() - t0
    queries = _queries(combo, frames)
    images_per_call = len(queries[0])
    det, first_inference = _load_and_warm_up(model_arg, combo, settings, spec, queries)
    timed = _timed_phase(
        det, queries, settings, spec, gpu_torch=combo.backend in TORCH_VARIANTS and spec.kind in ("cuda", "rocm")
    )
    timing = _timing_summary(timed, images_per_call, settings)
    info = det.info
    accuracy = _accuracy_or_reason(det, dataset, combo.batch, settings) if measure_accuracy else None
    latencies = [x for r in timed.runs for x in r.latency_ms]
    return {
        "provider": det.provider,
        "export": None if combo.backend in TORCH_VARIANTS else ("dynamic" if info.batch is None else "static"),
        "model_batch": info.batch,
        "input_hw": list(det.input_hw(frames[0].shape[:2])),
        "random_weights": bool(info.random_weights),
        "nms": info.nms,
        "head": info.head,
        "prepare_s": prepare_s,
        "first_inference_ms": first_inference,
        **timing,
        "memory": _memory_record(combo, timed.memory),
        "accuracy": accuracy,
        "cost_per_million_usd": cost_per_million(timing["throughput_ips"], settings.price_per_hour),
        "contention": {
            "own_cpu_share": timed.cpu.own_share,
            "other_processes_cpu_share": timed.cpu.other_share,
            "cpu_ms_per_image": timed.cpu.own_seconds * 1000.0 / max(1, images_per_call * len(latencies)),
            "loadavg_1m_start": timed.load_start,
            "loadavg_1m_end": os.getloadavg()[0],
        },
        "samples_ms": _thinned(latencies, settings.max_samples),
    }


def _prepare_model(combo: Combination, settings: BenchSettings, calibration: Sequence[Path] | None) -> str | Path:
    """The model the `Detector` loads: the prepared (exported, FP16 or INT8) ONNX file for ONNX Runtime."""
    if combo.backend not in ORT_VARIANTS:
        return combo.model
    return prepare_onnx(
        combo.model,
        combo.precision,
        combo.batch,
        settings.imgsz_hw,
        dynamic=settings.dynamic,
        calibration=calibration,
        per_channel=settings.int8_per_channel,
        reduce_range=settings.int8_reduce_range,
        end_to_end=head_end_to_end(settings.head),
        backend=VARIANTS[combo.backend][0],
    )


def _load_and_warm_up(
    model_arg: str | Path,
    combo: Combination,
    settings: BenchSettings,
    spec: DeviceSpec,
    queries: Sequence[list[np.ndarray]],
) -> tuple[Detector, dict[str, float]]:
    """Load the `Detector`, time the load and the first call apart, then run the untimed warm-up calls."""
    from campusguard.detector import Detector

    backend, pipeline, cuda_graphs = VARIANTS[combo.backend]
    engine = backend_spec(backend)
    if engine.set_threads is not None and settings.torch_threads is not None:
        engine.set_threads(settings.torch_threads)
    t0 = time.perf_counter()
    det = Detector(
        model_arg,
        device=str(spec),
        imgsz=settings.imgsz_hw,
        conf=settings.conf,
        iou=settings.iou,
        backend=backend,
        half=combo.precision == "fp16" and engine.fp16_cast,
        batch=combo.batch,
        dynamic=settings.dynamic,
        rect=False,
        threads=settings.ort_threads,
        spinning=settings.ort_spinning,
        pipeline=pipeline,
        cuda_graphs=cuda_graphs,
        head=settings.head,
        precision=combo.precision,
    )
    t1 = time.perf_counter()
    det.predict_batch(queries[0])
    t2 = time.perf_counter()
    for i in range(settings.warmup):
        det.predict_batch(queries[(i + 1) % len(queries)])
    first = {"load_ms": (t1 - t0) * 1000.0, "first_run_ms": (t2 - t1) * 1000.0, "total_ms": (t2 - t0) * 1000.0}
    return det, first


def _timed_phase(
    det: Detector, queries: Sequence[list[np.ndarray]], settings: BenchSettings, spec: DeviceSpec, gpu_torch: bool
) -> _TimedPhase:
    """``settings.repeat`` timed repeats back to back, with CPU shares and memory sampled throughout."""

    def call(i: int) -> tuple[float, float, float]:
        det.predict_batch(queries[i % len(queries)])
        t = det.timings
        return (t.preprocess_ms, t.inference_ms, t.postprocess_ms)

    if gpu_torch:  # peak over the timed phase: the weights stay allocated, so they are counted too
        torch_peak_allocated_mb(reset=True)
    reader, source = device_memory_reader(spec.kind, spec.index)
    runs = []
    phase_shares: list[float] = []
    load_start = os.getloadavg()[0]
    with CpuShare() as cpu, MemorySampler(settings.memory_interval_s, reader, source) as sampler:
        for _ in range(settings.repeat):
            with CpuShare() as phase:
                runs.append(run_timed(call, settings.iters, settings.min_seconds, settings.max_iters))
            phase_shares.append(phase.other_share)
    torch_peak = torch_peak_allocated_mb() if gpu_torch else None
    memory = sampler.report(torch_peak, "torch.cuda.max_memory_allocated" if torch_peak is not None else None)
    return _TimedPhase(runs, phase_shares, cpu, memory, load_start)


def _timing_summary(timed: _TimedPhase, images_per_call: int, settings: BenchSettings) -> dict[str, Any]:
    """Latency statistics, throughput, stage means and per-repeat figures of the timed phase."""
    runs = timed.runs
    latencies = [x for r in runs for x in r.latency_ms]
    stages = np.array([s for r in runs for s in r.stages_ms], dtype=np.float64).reshape(-1, 3)
    seconds = sum(r.seconds for r in runs)
    medians = [float(np.median(r.latency_ms)) for r in runs]
    agreement = spread(medians) if len(runs) > 1 else None
    stage_mean = stages.mean(axis=0)
    return {
        "latency_ms": latency_stats(latencies).to_dict(),
        "per_image_ms": float(np.mean(latencies)) / images_per_call,
        "throughput_ips": throughput(images_per_call * len(latencies), seconds),
        "stages_ms": {
            "preprocess": float(stage_mean[0]),
            "inference": float(stage_mean[1]),
            "postprocess": float(stage_mean[2]),
        },
        "harness_overhead_ms": float(np.mean(np.asarray(latencies) - stages.sum(axis=1))),
        "iterations": len(latencies),
        "seconds": seconds,
        "repeats": [
            {
                "p50_ms": m,
                "throughput_ips": throughput(images_per_call * r.iterations, r.seconds),
                "iterations": r.iterations,
                "other_processes_cpu_share": share,
            }
            for m, r, share in zip(medians, runs, timed.phase_shares, strict=True)
        ],
        "repeat_spread": agreement,
        "repeat_agree": None if agreement is None else bool(agreement <= settings.repeat_tolerance),
    }


def _memory_record(combo: Combination, memory: MemoryReport) -> dict[str, Any]:
    notes = []
    if combo.backend in ORT_VARIANTS:
        notes.append("ONNX Runtime exposes no arena counter in Python; its CPU arena is inside host RSS")
    return {**memory.__dict__, "notes": notes + list(memory.notes)}


def _accuracy_or_reason(det: Detector, dataset: Any, batch: int, settings: BenchSettings) -> dict[str, Any]:
    """mAP on ``dataset``, or why it was skipped (no data set, random weights)."""
    if dataset is None:
        return _accuracy_skipped("no --data set given")
    if det.info.random_weights:
        return _accuracy_skipped("random-weight architecture model: mAP is meaningless (speed and memory only)")
    return _accuracy(det, dataset, batch, settings)


def _thinned(latencies: list[float], max_samples: int) -> list[float]:
    """At most ``max_samples`` latencies, evenly spaced, rounded to 0.1 microsecond."""
    samples = latencies
    if len(samples) > max_samples:
        idx = np.linspace(0, len(samples) - 1, max_samples).astype(int)
        samples = [latencies[i] for i in idx]
    return [round(x, 4) for x in samples]


def run_matrix(
    combos: Sequence[Combination],
    settings: BenchSettings,
    frames: Sequence[np.ndarray],
    dataset: Any = None,
    calibration: Sequence[Path] | None = None,
    on_result: Callable[[int, Combination, dict[str, Any]], None] | None = None,
    on_start: Callable[[int, Combination], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every combination in order; accuracy is measured once per model/backend/precision.

    ``on_start(i, combo)`` and ``on_result(i, combo, record)`` let a caller drive a progress bar.

    Raises:
        DeviceError: when the requested device does not exist (nothing could run at all).
    """
    spec = resolve_device(settings.device)
    records: list[dict[str, Any]] = []
    accuracy_done: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, combo in enumerate(combos):
        if on_start:
            on_start(i, combo)
        key = (combo.model, combo.backend, combo.precision)
        first = key not in accuracy_done and combo.scenario == "batch"
        rec = bench_combination(combo, settings, frames, spec, dataset, calibration, measure_accuracy=first)
        if rec["status"] == "ok":
            if first and rec.get("accuracy") is not None:
                accuracy_done[key] = {**rec["accuracy"], "measured_at_batch": combo.batch}
            elif key in accuracy_done:
                rec["accuracy"] = dict(accuracy_done[key])
            else:
                rec["accuracy"] = None
        records.append(rec)
        if on_result:
            on_result(i, combo, rec)
    return records


def summarise_scenarios(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """MLPerf-style scores: single-stream p90 at batch 1, offline best throughput, multi-stream p99 per frame set."""
    out: list[dict[str, Any]] = []
    ok = [r for r in records if r.get("status") == "ok"]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in ok:
        key = (r["model"], r["backend"], r["precision"])
        if r["scenario"] == "batch":
            groups.setdefault(key, []).append(r)
            if r["batch"] == 1:
                out.append(_score("single-stream", r, "p90_latency", r["latency_ms"]["p90"], "ms"))
        elif r["scenario"] == "multi-stream":
            out.append(_score("multi-stream", r, "p99_latency_per_frame_set", r["latency_ms"]["p99"], "ms"))
    for rows in groups.values():
        best = max(rows, key=lambda r: r["throughput_ips"])
        out.append(_score("offline", best, "throughput", best["throughput_ips"], "img/s"))
    return out


def _score(scenario: str, r: dict[str, Any], metric: str, value: float, unit: str) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "model": r["model"],
        "backend": r["backend"],
        "precision": r["precision"],
        "batch": r["batch"],
        "metric": metric,
        "value": float(value),
        "unit": unit,
    }


def build_result(
    records: list[dict[str, Any]],
    settings: BenchSettings,
    config: dict[str, Any],
    machine: str,
    command: str,
    environment: dict[str, Any],
    timer_overhead_ms: float,
    notes: str | None = None,
    started: _dt.datetime | None = None,
) -> dict[str, Any]:
    """The result document (see ``result.schema.json``)."""
    started = started or _dt.datetime.now(_dt.UTC)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "campusguard-bench",
        "run_id": f"{started.strftime('%Y%m%dT%H%M%SZ')}-{machine}",
        "machine": machine,
        "created_utc": started.isoformat(timespec="seconds"),
        "command": command,
        "notes": notes,
        "environment": environment,
        "config": {
            **config,
            "imgsz": list(settings.imgsz_hw),
            "device": settings.device,
            "warmup": settings.warmup,
            "iters": settings.iters,
            "min_seconds": settings.min_seconds,
            "repeat": settings.repeat,
            "repeat_tolerance": settings.repeat_tolerance,
            "price_per_hour": settings.price_per_hour,
            "conf": settings.conf,
            "iou": settings.iou,
            "export": "dynamic" if settings.dynamic else "static",
            "int8": {"per_channel": settings.int8_per_channel, "reduce_range": settings.int8_reduce_range},
            "torch_threads": settings.torch_threads,
            "head": settings.head,
        },
        "harness": {
            "timer_overhead_ms": timer_overhead_ms,
            "description": "timer_overhead_ms: mean cost of one timed loop iteration around a no-op call; "
            "per combination, harness_overhead_ms is wall time per call minus the detector's pre+inference+post",
        },
        "results": records,
        "scenarios": summarise_scenarios(records),
    }
