"""`Detector`: frames in, `Detections` out, on any backend and device.

Pre-processing (`ops.preprocess`), the backend call and post-processing (`ops.postprocess`)
are timed separately for every batch (``detector.timings``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from campusguard.backends.base import Backend, Started, start_inference, takes_bgr_uint8
from campusguard.backends.loader import load_backend
from campusguard.backends.onnxruntime_device import OrtDevicePipeline
from campusguard.backends.registry import BACKENDS, backend_spec, choices
from campusguard.backends.torch_device import DevicePipeline
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.models.aliases import alias_of
from campusguard.models.families import head_end_to_end
from campusguard.models.info import DEFAULT_IMGSZ, ModelInfo, check_imgsz
from campusguard.ops.postprocess import postprocess
from campusguard.ops.preprocess import LetterboxMeta, fit_shape, letterbox, make_batch, to_bgr_uint8

__all__ = ["Detector", "PendingDetections", "StageTimings"]

log = logging.getLogger(__name__)


@dataclass
class StageTimings:
    """Milliseconds spent in each stage of the last call, and the batch size it covered."""

    preprocess_ms: float = 0.0
    inference_ms: float = 0.0
    postprocess_ms: float = 0.0
    images: int = 0

    @property
    def total_ms(self) -> float:
        return self.preprocess_ms + self.inference_ms + self.postprocess_ms


@dataclass
class PendingDetections:
    """A `Detector.submit` not yet collected: per input-shape chunk, its image indices, letterbox metas and
    the backend's wait (`campusguard.backends.base.start_inference`), or the finished detections."""

    count: int
    timings: StageTimings
    chunks: list[tuple[list[int], list[LetterboxMeta], Started[np.ndarray]]] = field(default_factory=list)
    done: list[Detections] | None = None

    @property
    def running(self) -> bool:
        """Whether the network may still be at work on it (False: `Detector.collect` will not wait)."""
        return self.done is None and any(started.running for _, _, started in self.chunks)


_Pending = TypeVar("_Pending")


class _DevicePath(Protocol[_Pending]):
    """What the detector needs of a device-resident pipeline: `DevicePipeline` and `OrtDevicePipeline`."""

    def submit(self, frames: list[np.ndarray]) -> _Pending: ...

    def collect(self, pending: _Pending) -> list[Detections]: ...


def _submit_then_collect(
    path: _DevicePath[_Pending], batches: list[list[np.ndarray]]
) -> tuple[list[list[Detections]], float]:
    """Submit every batch, then collect each (the device works while the host submits the next);
    returns the detections per batch and the `time.perf_counter` after the last submission."""
    pending = [path.submit(frames) for frames in batches]
    t_submitted = time.perf_counter()
    return [path.collect(p) for p in pending], t_submitted


def _check_unit(name: str, value: float) -> float:
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInputError(f"{name}={value} is outside 0..1")
    return float(value)


class Detector:
    """YOLOv8 detector with Ultralytics-identical pre- and post-processing.

    Args:
        model: ``None`` (bundled default), a ``.onnx`` or ``.pt`` path, official weights by name
            as in Ultralytics (``yolov8n``, ``yolo11s.pt``, ``yolo26m``: a local file of that name,
            else the weights cache, downloaded on first use unless offline), an alias such as
            ``fall-yolov8s`` (`campusguard.models.aliases`: its classes come out as COCO ids, with
            extra flags such as ``data["fallen"]``), or an architecture config such as
            ``yolov8n.yaml`` (random weights: speed and memory work only).
        device: ``auto``, ``cpu``, ``cuda:N``, ``rocm:N``.
        imgsz: network input as an int (square) or ``(height, width)``; ``None`` (default): the
            size the model was trained or exported at (`ModelInfo.imgsz_hw`, read before a ``.pt``
            is exported, so both backends agree), else 640. A model with a static input shape
            always uses its own.
        conf: confidence threshold (0..1), applied before NMS.
        iou: NMS IoU threshold (0..1).
        max_det: detections kept per image.
        classes: keep only these class ids.
        backend: a `campusguard.backends.registry` name: ``onnxruntime`` (default), ``torch`` or
            ``openvino``.
        agnostic: class-agnostic NMS.
        half: FP16 (GPU).
        batch: batch size of exported models (``.pt``/architecture to ONNX).
        dynamic: export with dynamic shapes (``.pt``/architecture to ONNX).
        rect: letterbox to the smallest stride-aligned shape holding the frame (like Ultralytics'
            PyTorch predict) when the model takes any shape; default: on for dynamic models.
        allow_cpu_fallback: accept the CPU (with a loud warning) when the requested GPU is unusable.
        tensorrt: use TensorRT before CUDA.
        threads: ONNX Runtime intra-op threads (0: one per physical core).
        spinning: ONNX Runtime pool threads spin-wait between calls (off for shared machines).
        pipeline: ``host`` (letterbox and NMS on the CPU, every backend), ``device`` (uint8 frames
            uploaded once, letterbox, normalisation and NMS where the model runs: PyTorch through
            `campusguard.backends.torch_device.DevicePipeline` (pinned memory, FP16, CUDA graphs),
            ONNX Runtime through `campusguard.backends.onnxruntime_device.OrtDevicePipeline` (the
            model fused with a letterbox and an NMS graph, I/O bound on the device)), or ``auto``:
            ``device`` for the torch backend on a GPU, else ``host``.
        cuda_graphs: with the device pipeline on a GPU, replay each static shape from a CUDA graph.
        head: the head of ``.pt`` and architecture models (`campusguard.models.families.HEADS`):
            ``None`` their own (YOLO26: ``end2end``, NMS-free), ``"classic"`` the one-to-many head
            with CampusGuard's NMS (the boxes of Ultralytics 8.4's default ``predict``),
            ``"end2end"`` the one-to-one head (an error for a model without one). ``info.head``
            says which runs.
        precision: the inference precision of a backend that compiles for one (OpenVINO: ``fp32``,
            ``bf16``); ``None``: the engine's default. INT8 and FP16 are model files (or ``half``).
        throughput: CPU per frame before one frame's latency, as a service wants (`LoadOptions.throughput`:
            OpenVINO runs even a single frame on one stream of one thread).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str = "auto",
        imgsz: int | tuple[int, int] | str | None = None,
        conf: float = 0.25,
        iou: float = 0.7,
        max_det: int = 300,
        classes: list[int] | None = None,
        backend: str | None = None,
        agnostic: bool = False,
        half: bool = False,
        batch: int = 1,
        dynamic: bool = False,
        rect: bool | None = None,
        allow_cpu_fallback: bool = False,
        tensorrt: bool = False,
        threads: int = 0,
        spinning: bool = True,
        pipeline: str = "host",
        cuda_graphs: bool = False,
        head: str | None = None,
        precision: str | None = None,
        throughput: bool = False,
    ) -> None:
        self.conf = _check_unit("conf", conf)
        self.iou = _check_unit("iou", iou)
        if max_det < 1:
            raise InvalidInputError(f"max_det={max_det} must be at least 1")
        if batch < 1:
            raise InvalidInputError(f"batch={batch} must be at least 1")
        requested = None if imgsz is None else check_imgsz(imgsz)
        self.max_det = int(max_det)
        self.classes = None if classes is None else [int(c) for c in classes]
        self.agnostic = agnostic
        self.backend: Backend = load_backend(
            model,
            backend=backend,
            device=device,
            imgsz_hw=requested,
            batch=batch,
            dynamic=dynamic,
            half=half,
            allow_cpu_fallback=allow_cpu_fallback,
            tensorrt=tensorrt,
            intra_op_threads=threads,
            allow_spinning=spinning,
            end_to_end=head_end_to_end(head),
            precision=precision,
            throughput=throughput,
        )
        info = self.backend.info
        if head is not None and info.head != head:  # an ONNX file has one head, chosen at export
            raise InvalidInputError(
                f"{info.source} runs the {info.head} head, fixed at export; export it again with --head {head}"
            )
        self.class_map = alias.class_map if (alias := alias_of(model, info)) is not None else None
        if self.class_map is not None:  # filters and NMS see the model's own classes
            self.classes = None if self.classes is None else self.class_map.model_ids(self.classes)
            self.agnostic = agnostic or self.class_map.merges_classes
        self.imgsz_hw = requested or info.imgsz_hw or (DEFAULT_IMGSZ, DEFAULT_IMGSZ)
        if info.input_hw is not None and info.input_hw != self.imgsz_hw:
            log.info(
                "model %s has a static input %s; using it instead of imgsz %s",
                info.source,
                info.input_hw,
                self.imgsz_hw,
            )
        self.rect = (info.input_hw is None) if rect is None else (rect and info.input_hw is None)
        if info.random_weights:
            log.warning("%s has RANDOM weights: right for speed and memory, meaningless for accuracy", info.source)
        self.timings = StageTimings()
        self._buffer: np.ndarray | None = None
        self._device_path = self._device_pipeline(pipeline, cuda_graphs)

    def _device_pipeline(self, pipeline: str, cuda_graphs: bool) -> DevicePipeline | OrtDevicePipeline | None:
        """The device-resident path when ``pipeline`` asks for it (see the class docstring)."""
        if pipeline not in ("host", "device", "auto"):
            raise InvalidInputError(f"pipeline {pipeline!r} must be host, device or auto")
        name = getattr(self.backend, "name", "")
        if pipeline != "host" and self.backend.info.end_to_end:
            if pipeline == "device":
                raise InvalidInputError(
                    "pipeline='device' runs NMS on the classic head; this model is end-to-end: "
                    "use pipeline='host' or head='classic'"
                )
            return None
        spec = backend_spec(name) if name in BACKENDS else None
        if pipeline == "device" and (spec is None or spec.device_pipeline is None):
            with_device = tuple(s.name for s in BACKENDS.values() if s.device_pipeline is not None)
            raise InvalidInputError(f"pipeline='device' runs on the {choices(with_device)} backend, not {name!r}")
        auto = spec is not None and spec.auto_device and self.provider.split(":")[1] != "cpu"  # "<engine>:<device>"
        if pipeline == "host" or (pipeline == "auto" and not auto):
            if cuda_graphs:
                raise InvalidInputError("cuda_graphs needs pipeline='device' (or 'auto' on a GPU)")
            return None
        assert spec is not None and spec.device_pipeline is not None  # checked above for "device", "auto" needs it
        if cuda_graphs and not spec.cuda_graphs:
            with_graphs = tuple(s.name for s in BACKENDS.values() if s.cuda_graphs)
            raise InvalidInputError(f"cuda_graphs is for the device pipeline of the {choices(with_graphs)} backend")
        pipe: DevicePipeline | OrtDevicePipeline = spec.device_pipeline(self, cuda_graphs)
        return pipe

    @property
    def pipeline(self) -> str:
        """``device`` when frames go through the device-resident path, else ``host``."""
        return "host" if self._device_path is None else "device"

    # properties --------------------------------------------------------------------------
    @property
    def names(self) -> dict[int, str]:
        """Class id to name, from the model's metadata (the COCO names of an alias's mapped classes)."""
        return self.class_map.names if self.class_map is not None else self.backend.info.names

    @property
    def provider(self) -> str:
        """The execution provider or device really in use (``torch-device:...`` on the device-resident path)."""
        device_path = getattr(self, "_device_path", None)  # unset while __init__ chooses the pipeline
        return self.backend.provider if device_path is None else str(device_path.provider)

    @property
    def info(self) -> ModelInfo:
        return self.backend.info

    @property
    def random_weights(self) -> bool:
        return self.backend.info.random_weights

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        """The network input (height, width) used for a frame of ``frame_hw``."""
        if self.backend.info.input_hw is not None:
            return self.backend.info.input_hw
        if self.rect:
            return fit_shape(frame_hw, self.imgsz_hw, self.backend.info.stride)
        return self.imgsz_hw

    # inference ---------------------------------------------------------------------------
    def __call__(self, image: np.ndarray) -> Detections:
        """Detect objects in one ``(H, W, 3) uint8`` BGR frame (grayscale, RGBA, 16-bit converted)."""
        return self.predict_batch([image])[0]

    def warm_up(self, frame_hw: tuple[int, int]) -> None:
        """Run one blank ``frame_hw`` frame through the detector as it will run (compiles and allocates for that
        input shape: OpenVINO compiles per shape and path, ONNX Runtime sizes its buffers on the first call), so
        a service's first camera frame does not pay for it."""
        self.predict_batch([np.zeros((*frame_hw, 3), np.uint8)])

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        """Detect objects in several frames; frames of one input shape share one backend call."""
        return self.collect(self.submit(images))

    def submit(self, images: list[np.ndarray]) -> PendingDetections:
        """Letterbox ``images`` and start the network on them; `collect` waits and post-processes.

        On a backend that runs asynchronously (`campusguard.backends.base.AsyncBackend`: OpenVINO's streams)
        this returns while the network runs, so a caller can prepare the next frames meanwhile (the
        service's detection stage keeps one batch in flight); elsewhere the network has run when it returns.
        Collect each submission once, in the order submitted.
        """
        t0 = time.perf_counter()
        pending = PendingDetections(count=len(images), timings=StageTimings(images=len(images)))
        if not images:
            return pending
        frames = [to_bgr_uint8(im) for im in images]
        if self._device_path is not None:
            pending.done = self._predict_on_device(frames, t0)
            pending.timings = self.timings
            return pending
        shapes = [self.input_hw(f.shape[:2]) for f in frames]
        pending.timings.preprocess_ms += (time.perf_counter() - t0) * 1000
        for hw in dict.fromkeys(shapes):
            idx = [i for i, s in enumerate(shapes) if s == hw]
            for chunk in self._chunks(idx):
                pending.chunks.append(self._start(chunk, frames, hw, pending.timings))
        return pending

    def collect(self, pending: PendingDetections) -> list[Detections]:
        """The detections of a `submit`, in its images' order (waits for the network)."""
        if pending.done is not None:
            self.timings = pending.timings
            return pending.done
        results: dict[int, Detections] = {}
        timings = pending.timings
        for chunk, metas, started in pending.chunks:
            t1 = time.perf_counter()
            raw = started.wait()
            t2 = time.perf_counter()
            dets = postprocess(raw[: len(chunk)], metas, self.conf, self.iou, self.max_det, self.classes, self.agnostic)
            if self.class_map is not None:
                dets = [self.class_map.apply(d) for d in dets]
            timings.inference_ms += (t2 - t1) * 1000
            timings.postprocess_ms += (time.perf_counter() - t2) * 1000
            for i, det in zip(chunk, dets, strict=False):
                results[i] = det
        self.timings = timings
        pending.done = [results[i] for i in range(pending.count)]
        pending.chunks.clear()
        return pending.done

    def _predict_on_device(self, frames: list[np.ndarray], t0: float) -> list[Detections]:
        """The device path: one submission per frame shape, then one collection each (boxes to the host)."""
        path = self._device_path
        assert path is not None
        timings = StageTimings(images=len(frames))
        results: dict[int, Detections] = {}
        groups = [
            chunk
            for shape in dict.fromkeys(f.shape for f in frames)
            for chunk in self._chunks([i for i, f in enumerate(frames) if f.shape == shape])
        ]
        batches = [[frames[i] for i in idx] for idx in groups]
        # one call per pipeline class: each collects the pending batches of its own type
        if isinstance(path, DevicePipeline):
            collected, t1 = _submit_then_collect(path, batches)
        else:
            collected, t1 = _submit_then_collect(path, batches)
        t2 = time.perf_counter()
        for idx, dets in zip(groups, collected, strict=True):
            for i, det in zip(idx, dets, strict=True):
                results[i] = self.class_map.apply(det) if self.class_map is not None else det
        # the device works asynchronously: "pre" is the host's staging and kernel launches,
        # "inference" waits for the device (network and NMS) and the copy of the kept boxes
        timings.preprocess_ms = (t1 - t0) * 1000
        timings.inference_ms = (t2 - t1) * 1000
        timings.postprocess_ms = (time.perf_counter() - t2) * 1000
        self.timings = timings
        return [results[i] for i in range(len(frames))]

    def _chunks(self, idx: list[int]) -> Iterator[list[int]]:
        fixed = self.backend.info.batch
        step = fixed or len(idx)
        for k in range(0, len(idx), step):
            yield idx[k : k + step]

    def _start(
        self, chunk: list[int], frames: list[np.ndarray], hw: tuple[int, int], timings: StageTimings
    ) -> tuple[list[int], list[LetterboxMeta], Started[np.ndarray]]:
        t0 = time.perf_counter()
        boxed: list[np.ndarray] = []
        metas: list[LetterboxMeta] = []
        for i in chunk:
            img, meta = letterbox(frames[i], hw)
            boxed.append(img)
            metas.append(meta)
        fixed = self.backend.info.batch
        while fixed and len(boxed) < fixed:  # a static-batch model needs a full batch; pad with copies
            boxed.append(boxed[-1])
        if takes_bgr_uint8(self.backend):  # its graph converts them (OpenVINO's pre-processing)
            batch = np.stack(boxed)
        else:
            batch = self._buffer = make_batch(boxed, self._buffer)  # reusable at once: `start_inference` says so
        t1 = time.perf_counter()
        started = start_inference(self.backend, batch)
        timings.preprocess_ms += (t1 - t0) * 1000
        timings.inference_ms += (time.perf_counter() - t1) * 1000
        return chunk, metas, started

    def stream(
        self,
        source: str | Path | Iterable[np.ndarray],
        *,
        batch: int = 1,
        on_batch: Callable[[StageTimings], None] | None = None,
    ) -> Iterator[tuple[object, Detections]]:
        """Detect over an image, folder, glob, video file or iterable of frames, ``batch`` frames per call.

        Yields ``(item, detections)`` in source order, where ``item`` is a
        `campusguard.io.sources.MediaItem` for paths (an unreadable file comes with its
        ``error`` set and empty detections), or the frame index for iterables. At most
        ``batch`` frames are held at a time. ``on_batch`` gets the `StageTimings` of each call.
        """
        if batch < 1:
            raise InvalidInputError(f"batch={batch} must be at least 1")
        items: Iterable[tuple[object, np.ndarray | None]]
        if isinstance(source, (str, Path)):
            from campusguard.io.sources import iter_media

            items = ((item, item.frame) for item in iter_media(source))
        else:
            items = enumerate(source)
        for chunk in _chunked(items, batch):
            frames = [frame for _, frame in chunk if frame is not None]
            results = iter(self.predict_batch(frames))
            if frames and on_batch is not None:
                on_batch(self.timings)
            for item, frame in chunk:
                yield item, (Detections.empty() if frame is None else next(results))


def _chunked(
    items: Iterable[tuple[object, np.ndarray | None]], size: int
) -> Iterator[list[tuple[object, np.ndarray | None]]]:
    chunk: list[tuple[object, np.ndarray | None]] = []
    for entry in items:
        chunk.append(entry)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
