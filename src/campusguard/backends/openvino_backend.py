"""OpenVINO backend: the ``openvino`` package itself (not ONNX Runtime's provider), reading our ONNX directly.

Devices as OpenVINO names them: ``cpu``, ``gpu`` (``gpu:N`` for ``GPU.N``), ``npu`` and ``auto`` (the
CPU alone where it is the only device, else OpenVINO's ``AUTO`` plugin). A requested device OpenVINO
does not see is a `DeviceError` (``allow_cpu_fallback``: the CPU with a warning).

Precisions: ``fp32`` (``INFERENCE_PRECISION_HINT=f32``), ``bf16`` (CPUs with AVX-512 BF16 or AMX), or
``None``: the plugin's own default, which is BF16 on CPUs that have BF16 instructions. What really runs
is read back from the compiled model (`OpenVinoBackend.inference_precision`, in `provider`:
``OpenVINO:CPU:bf16``). INT8 is an OpenVINO IR (``NAME.int8ov.xml``) quantised by NNCF from the ONNX
model (`quantize_int8_nncf`, ``campusguard export --int8 --backend openvino``).

Compiled models are cached by OpenVINO (``CACHE_DIR``) in one directory per model file (its SHA-256),
input shape and precision under ``<cache>/openvino`` (`compiled_cache_dir`), so a restart loads the
compiled blob instead of compiling again and two models never share a cache. A model with a dynamic
input is compiled once per input shape met (the detector letterboxes to one shape per camera).
Processes compiling into one cache directory (two camera groups of one node, two trials) take turns
on ``<cache>.lock`` (`fcntl.flock`), so the second loads the blob the first wrote. A compile or read
error carries OpenVINO's whole reason on one line (`openvino_reason`), not its first line, which is a
source location (``core.cpp:117:``).

OpenVINO is imported inside this module's functions: without the ``openvino`` extra the kit still
imports, and loading this backend says which extra to install.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.backends.base import LoadOptions, Started
from campusguard.backends.spec import BackendSpec, VerdictLine
from campusguard.cache import cache_dir
from campusguard.errors import DeviceError, InvalidInputError, ModelLoadError, require
from campusguard.models.info import ModelInfo, info_from_onnx
from campusguard.models.resolve import parse_model_ref, read_model_info

__all__ = [
    "OpenVinoBackend",
    "build",
    "compiled_cache_dir",
    "import_nncf_quietly",
    "ir_metadata",
    "openvino_device",
    "openvino_reason",
    "quantize_int8_nncf",
    "verdicts",
]

log = logging.getLogger(__name__)

_HINTS = {"fp32": "f32", "bf16": "bf16"}
_PRECISION_NAMES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "i8": "int8"}


def openvino_device(device: str, available: Sequence[str]) -> str:
    """OpenVINO's name for ``device`` (``cpu``, ``gpu``, ``gpu:N``, ``npu``, ``auto``), checked against ``available``.

    Raises:
        DeviceError: a device OpenVINO does not see, or one it has no name for (``cuda:0``).
    """
    d = device.strip().lower()
    if d == "auto":
        return "CPU" if list(available) == ["CPU"] else "AUTO"
    kind, _, index = d.partition(":")
    if kind not in ("cpu", "gpu", "npu") or (index and not (index.isdigit() and kind == "gpu")):
        raise DeviceError(f"OpenVINO runs on cpu, gpu, gpu:N, npu or auto, not {device!r}")
    name = kind.upper() + (f".{index}" if index else "")
    present = name in available or (name == "GPU" and any(a.startswith("GPU") for a in available))
    if not present:
        raise DeviceError(f"{device} requested but OpenVINO sees only {', '.join(available) or 'no device'}")
    return name


def compiled_cache_dir(
    digest: str, stem: str, input_shape: Sequence[int], precision: str, root: Path | None = None
) -> Path:
    """OpenVINO's compiled-model cache of one model: ``<root>/<stem>-<sha256[:16]>-<shape>-<precision>``."""
    shape = "x".join(str(d) for d in input_shape)
    return (root or cache_dir() / "openvino") / f"{stem}-{digest[:16]}-{shape}-{precision}"


_LOCATION = re.compile(r"^(Exception from )?\S+\.(cpp|hpp|h|cc):\d+:?$")


def openvino_reason(exc: BaseException) -> str:
    """OpenVINO's whole reason for ``exc`` on one line.

    OpenVINO's texts start with the source locations the exception passed through, one a line
    (``Exception from src/inference/src/cpp/core.cpp:117:``), then the reason, often on several lines
    (``[ GENERAL_ERROR ] ...``). The locations say nothing to an operator and the first line alone is one
    of them, so they are dropped and every other line is kept, joined with ``" | "``; a text of locations
    only is kept whole.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = [line for line in lines if not _LOCATION.match(line)]
    return " | ".join(reason or lines) or type(exc).__name__


@contextlib.contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    """Hold an exclusive `fcntl.flock` on ``<cache>.lock`` while compiling into ``cache``: two processes loading
    one model (two camera groups on one node, two trials) take turns, so the second reads the blob the first
    wrote instead of compiling and writing beside it."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.with_name(cache.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OpenVinoBackend:
    """Run an ONNX detector with OpenVINO.

    Args:
        path: ``.onnx`` file, or the INT8 IR ``.xml`` `quantize_int8_nncf` writes.
        device: ``auto``, ``cpu``, ``gpu``, ``gpu:N`` or ``npu``.
        precision: ``fp32``, ``bf16`` or ``None`` (the plugin's default; read back after compiling).
        threads: inference threads on the CPU (0: OpenVINO's default, every core).
        allow_cpu_fallback: run on the CPU (with a warning) when the requested device is missing.
        cache_root: where the compiled-model caches go (default ``<cache>/openvino``).
        streams_for_one: on the CPU, a single frame too goes to one of the ``THROUGHPUT`` streams (one
            thread: less CPU per frame, a longer wait for it) rather than to every thread; what a service
            wants, where a camera's frame rate leaves time to spare and the cores serve other work.
    """

    name = "openvino"
    # `campusguard.backends.base.takes_bgr_uint8`: the detector sends letterboxed uint8 BGR frames and the
    # compiled graph converts them (`_with_uint8_input`)
    bgr_uint8_input = True

    def __init__(
        self,
        path: str | Path,
        device: str = "auto",
        precision: str | None = None,
        threads: int = 0,
        allow_cpu_fallback: bool = False,
        cache_root: Path | None = None,
        streams_for_one: bool = False,
    ) -> None:
        ov = require("openvino", "openvino")
        self.path = Path(path)
        if precision is not None and precision not in _HINTS:
            raise InvalidInputError(f"OpenVINO precision {precision!r}: choose fp32 or bf16 (INT8 is the IR file)")
        self._core = ov.Core()
        available = list(self._core.available_devices)
        try:
            self.ov_device = openvino_device(device, available)
        except DeviceError as exc:
            if not allow_cpu_fallback:
                raise
            log.warning("FALLING BACK TO CPU: %s", exc)
            self.ov_device = "CPU"
        if precision == "bf16":
            caps = self._core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") if "CPU" in available else []
            if self.ov_device != "CPU" or "BF16" not in caps:
                raise DeviceError(
                    f"BF16 needs OpenVINO's CPU plugin on a CPU with BF16 instructions ({self.ov_device})"
                )
        self.requested_precision = precision
        self._threads = threads
        self._streams_for_one = streams_for_one
        try:
            self._model = self._core.read_model(str(self.path))
        except Exception as exc:  # OpenVINO raises RuntimeError subclasses with multi-line texts
            raise ModelLoadError(f"{self.path}: OpenVINO cannot read this model ({openvino_reason(exc)})") from exc
        self.info: ModelInfo = self._model_info()
        self._model_u8: Any = None  # built at first use (`_with_uint8_input`)
        self._digest = _file_digest(self.path)
        self._cache_root = cache_root
        self._compiled: dict[tuple[int, ...], tuple[Any, Any]] = {}
        self._streams: dict[tuple[int, ...], tuple[Any, list[Any]]] = {}  # THROUGHPUT models: (compiled, idle requests)
        # what the compiled model reports, set on each compile; until then the plugin's default for the device
        self.inference_precision = precision or self._default_precision()
        self.execution_devices: list[str] = []
        self.cache: Path | None = None
        shape = self._model.inputs[0].get_partial_shape()
        if shape.is_static:  # compile now, as the detector sends it: load time is load time, not the first frame's
            n, _, h, w = (int(d) for d in shape.to_shape())
            self._latency_request((n, h, w, 3))

    def _default_precision(self) -> str:
        try:
            hint = str(self._core.get_property(self.ov_device, "INFERENCE_PRECISION_HINT"))
        except Exception:  # AUTO and some plugins do not report it
            return "unknown"
        return _PRECISION_NAMES.get(_type_name(hint), _type_name(hint))

    def _model_info(self) -> ModelInfo:
        """What the model says about itself: from the ONNX file, or an IR's ``rt_info`` (`quantize_int8_nncf`)."""
        if self.path.suffix != ".xml":
            return read_model_info(parse_model_ref(self.path))

        def dims(shape: Any) -> list[int | str | None]:
            return [int(d.get_length()) if d.is_static else None for d in shape]

        return info_from_onnx(
            ir_metadata(self._model),
            dims(self._model.inputs[0].get_partial_shape()),
            dims(self._model.outputs[0].get_partial_shape()),
            input_fp16=False,
            source=str(self.path),
        )

    def _config(self, cache: Path, hint: str = "LATENCY") -> dict[str, Any]:
        config: dict[str, Any] = {"CACHE_DIR": str(cache), "PERFORMANCE_HINT": hint}
        if self.ov_device == "CPU":
            if self._threads > 0:
                config["INFERENCE_NUM_THREADS"] = self._threads
            if self.requested_precision is not None:
                config["INFERENCE_PRECISION_HINT"] = _HINTS[self.requested_precision]
        elif self.requested_precision == "fp32":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        return config

    def _with_uint8_input(self) -> Any:
        """The model taking ``(B, H, W, 3) uint8`` BGR letterboxed frames: OpenVINO's pre-processing does the
        colour swap, the cast and the 1/255 scale inside the compiled graph (`make_batch`'s work, fused with the
        first convolution's input), and each request copies a quarter of the bytes. Measured on a 2-vCPU Xeon
        with AMX, bundled model at 288x480 on the streams, with the host's conversion included: 8.91 against
        9.67 CPU ms a frame."""
        if self._model_u8 is None:
            ov = require("openvino", "openvino")
            from openvino.preprocess import ColorFormat, PrePostProcessor

            ppp = PrePostProcessor(self._model.clone())
            tensor = ppp.input().tensor()
            tensor.set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")).set_color_format(ColorFormat.BGR)
            ppp.input().model().set_layout(ov.Layout("NCHW"))
            ppp.input().preprocess().convert_element_type(ov.Type.f32).convert_color(ColorFormat.RGB).scale(255.0)
            self._model_u8 = ppp.build()
        return self._model_u8

    def _compile(self, shape: tuple[int, ...], hint: str = "LATENCY") -> Any:
        """The model compiled for ``shape`` with ``PERFORMANCE_HINT`` ``hint``: ``LATENCY`` (one request using
        every thread, `_latency_request`) or ``THROUGHPUT`` (the plugin's streams, `_stream_requests`). A
        ``(B, H, W, 3)`` shape is the uint8 BGR model (`_with_uint8_input`), ``(B, 3, H, W)`` the float one."""
        source = self._with_uint8_input() if _nhwc(shape) else self._model
        model = source
        if not source.inputs[0].get_partial_shape().is_static:
            model = source.clone()
            model.reshape({model.inputs[0]: list(shape)})
        tag = (self.requested_precision or "default") + ("-streams" if hint == "THROUGHPUT" else "")
        tag += "-u8" if _nhwc(shape) else ""
        cache = compiled_cache_dir(
            self._digest, self.path.stem, shape, f"{self.ov_device.lower()}-{tag}", self._cache_root
        )
        try:
            with _cache_lock(cache):  # one compiler per cache directory, across processes (camera groups, trials)
                compiled = self._core.compile_model(model, self.ov_device, self._config(cache, hint))
        except Exception as exc:
            raise ModelLoadError(
                f"{self.path}: OpenVINO cannot compile this model for {self.ov_device} ({openvino_reason(exc)})"
            ) from exc
        self.cache = cache
        self.execution_devices = [str(d) for d in compiled.get_property("EXECUTION_DEVICES")]
        try:
            runs = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        except Exception:  # AUTO and some plugins do not report it
            runs = "unknown"
        self.inference_precision = _PRECISION_NAMES.get(_type_name(runs), _type_name(runs))
        log.info(
            "OpenVINO compiled %s for %s at %s (%s): %s (cache %s)",
            self.path.name,
            ",".join(self.execution_devices),
            "x".join(map(str, shape)),
            hint.lower(),
            self.inference_precision,
            cache,
        )
        return compiled

    def _latency_request(self, shape: tuple[int, ...]) -> Any:
        """The request of the model compiled for latency at ``shape`` (compiled at first use)."""
        if shape not in self._compiled:
            compiled = self._compile(shape)
            self._compiled[shape] = (compiled, compiled.create_infer_request())
        return self._compiled[shape][1]

    def _stream_requests(self, shape: tuple[int, ...], n: int) -> list[Any]:
        """``n`` idle requests of the model compiled for throughput at ``shape`` (compiled at first use, with
        one request per stream); more are made when batches started earlier still hold those. Give them
        back with `_release`."""
        if shape not in self._streams:
            compiled = self._compile(shape, "THROUGHPUT")
            streams = max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
            self._streams[shape] = (compiled, [compiled.create_infer_request() for _ in range(streams)])
        compiled, idle = self._streams[shape]
        while len(idle) < n:
            idle.append(compiled.create_infer_request())
        taken, idle[:] = idle[:n], idle[n:]
        return taken

    def _release(self, shape: tuple[int, ...], requests: list[Any]) -> None:
        self._streams[shape][1].extend(requests)

    def profiling_request(self, shape: tuple[int, ...]) -> Any:
        """An infer request for ``shape`` compiled like the detector's but with per-node counters (``PERF_COUNT``)."""
        model = self._model
        if not model.inputs[0].get_partial_shape().is_static:
            model = model.clone()
            model.reshape({model.inputs[0]: list(shape)})
        config = {k: v for k, v in self._config(Path()).items() if k != "CACHE_DIR"}
        compiled = self._core.compile_model(model, self.ov_device, {**config, "PERF_COUNT": True})
        return compiled.create_infer_request()

    @property
    def provider(self) -> str:
        """``OpenVINO:<device>:<precision it really runs>``, e.g. ``OpenVINO:CPU:bf16``."""
        device = ",".join(self.execution_devices) or self.ov_device
        return f"OpenVINO:{device}:{self.inference_precision}"

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """One image: one request compiled for latency (every thread on it), unless ``streams_for_one``.
        Several on the CPU: `start`'s streams. ``batch``: ``(B, 3, H, W) float32`` RGB 0..1, or the
        ``(B, H, W, 3) uint8`` BGR letterboxed frames it is made from (`bgr_uint8_input`)."""
        return self.start(batch).wait()

    def _on_streams(self, x: np.ndarray) -> bool:
        return self.ov_device == "CPU" and (x.shape[0] > 1 or self._streams_for_one)

    def _infer_for_latency(self, x: np.ndarray) -> np.ndarray:
        request = self._latency_request(tuple(x.shape))
        request.infer({0: x})
        return np.array(request.get_output_tensor(0).data, dtype=np.float32, copy=True)

    def start(self, batch: np.ndarray) -> Started[np.ndarray]:
        """Start ``batch`` and return at once; call the result to wait for the head output.

        On the CPU a batch (or, with ``streams_for_one``, one frame) goes one image per request on the
        plugin's ``THROUGHPUT`` streams (one per core or two, each with its own threads), run side by side:
        what OpenVINO advises for throughput. Each request copies its image, so the caller may reuse
        ``batch`` at once, and a batch started before the last one is waited for simply queues behind it
        on the streams (the service overlaps one batch's pre- and post-processing with the next one's
        network this way). Measured on a 2-core AMD EPYC with AVX-512 VNNI, bundled INT8 IR at 288x480, 4
        images: 0.77x to 0.80x the CPU time of one latency request per image; against one 4-image latency
        request from 0.84x to 1.09x the wall over three runs, so about even
        (``python benchmarks/openvino_streams.py --batch 4 --rounds 9``). Elsewhere (another device, a single
        frame for latency) the batch runs now."""
        x = _as_input(batch)
        if not self._on_streams(x):
            return Started.finished(self._infer_for_latency(x))
        shape = (1, *x.shape[1:])
        requests = self._stream_requests(shape, len(x))
        try:
            for request, image in zip(requests, x, strict=True):
                request.start_async({0: image[None]})
        except Exception:
            for request in requests:
                request.wait()
            self._release(shape, requests)
            raise

        done: list[np.ndarray] = []

        def wait() -> np.ndarray:
            if not done:  # once: the requests go back to the pool
                try:
                    for request in requests:
                        request.wait()
                    done.append(
                        np.stack([np.array(r.get_output_tensor(0).data[0], dtype=np.float32) for r in requests])
                    )
                finally:
                    self._release(shape, requests)
            return done[0]

        return Started(wait, running=True)


def _nhwc(shape: tuple[int, ...]) -> bool:
    """A ``(B, H, W, 3)`` frame batch rather than a ``(B, 3, H, W)`` tensor (H and W are multiples of 32)."""
    return len(shape) == 4 and shape[-1] == 3 and shape[1] != 3


def _as_input(batch: np.ndarray) -> np.ndarray:
    """``(B, H, W, 3) uint8`` frames as they are, anything else as a contiguous ``float32`` tensor."""
    if batch.dtype == np.uint8 and _nhwc(batch.shape):
        return np.ascontiguousarray(batch)
    return np.ascontiguousarray(batch, dtype=np.float32)


def _type_name(hint: str) -> str:
    """``<Type: 'bfloat16'>`` / ``bf16`` -> ``bf16``; ``float32`` -> ``f32``."""
    text = hint.lower()
    for long, short in (("bfloat16", "bf16"), ("float32", "f32"), ("float16", "f16"), ("int8", "i8")):
        if long in text:
            return short
    return text.strip("<>' ")


def verdicts(context: dict[str, Any]) -> list[VerdictLine]:
    """``campusguard doctor``'s verdict: the devices OpenVINO sees and the precision its CPU plugin runs."""
    import importlib.util

    if importlib.util.find_spec("openvino") is None:
        return [("OpenVINO", "unavailable", "not installed: pip install 'campusguard[openvino]'")]
    try:
        import openvino as ov

        core = ov.Core()
        devices = list(core.available_devices)
        detail = f"{ov.__version__.split('-')[0]}, devices {', '.join(devices)}"
        if "CPU" in devices:
            caps = list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
            default = _PRECISION_NAMES.get(_type_name(str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))), "?")
            detail += f"; CPU default precision {default}, BF16 {'yes' if 'BF16' in caps else 'no'}"
        if importlib.util.find_spec("nncf") is None:
            detail += "; NNCF missing: no INT8 export"
        return [("OpenVINO", "ready", detail)]
    except Exception as exc:  # a broken install is itself a diagnosis
        return [("OpenVINO", "unavailable", f"{type(exc).__name__}: {str(exc)[:160]}")]


def build(path: Path, options: LoadOptions) -> OpenVinoBackend:
    """The registry's builder (`campusguard.backends.registry`): an ONNX file on OpenVINO."""
    return OpenVinoBackend(
        path,
        device=options.device,
        precision=None if options.precision == "int8" else options.precision,  # INT8 is the file (IR)
        threads=options.intra_op_threads,
        streams_for_one=options.throughput,
        allow_cpu_fallback=options.allow_cpu_fallback,
    )


def quantize_int8_nncf(
    src: Path,
    out: Path,
    calibration_images: Sequence[Path],
    calib_hw: tuple[int, int] | None = None,
    **_: Any,
) -> Path:
    """Post-training INT8 quantisation of an FP32 ONNX model with NNCF on the OpenVINO model: an OpenVINO IR
    (``out`` ``.xml`` with its ``.bin``) whose FakeQuantize layers the CPU plugin runs in INT8.

    Calibrated on ``calibration_images`` letterboxed to the model's static size, else ``calib_hw``, with NNCF's
    ``MIXED`` preset (asymmetric activations: SiLU outputs are mostly positive). The detection head's decode
    stays float (`campusguard.models.export.head_float_nodes`, NNCF's ignored scope), as in ONNX Runtime's INT8.
    The ONNX metadata (class names, stride, image size) rides in the IR's ``rt_info`` (``campusguard``), with
    ``campusguard_precision=int8``.

    The ONNX file is converted (``ov.convert_model``: constant folding, Swish fusion) before NNCF sees it, not
    only read: read as it is, each convolution's bias is an Add of a ShapeOf and Broadcast chain and each SiLU a
    Sigmoid and Multiply, so NNCF put FakeQuantize between them and the CPU plugin could not fuse the activation
    into the INT8 convolution. Those 57 SiLUs then ran as BF16 subgraphs, 38% of the IR's time on the AMD EPYC
    with VNNI; converted first, one 288x480 frame costs 10.3 CPU-ms on its two streams instead of 12.6.

    Why not one QDQ ONNX file for both engines: measured on the bundled model (7 synthetic frames, 8 calibration
    frames), NNCF's QDQ ONNX kept 96.7% of FP32's boxes on ONNX Runtime but 75% (mean IoU 0.87) on OpenVINO
    2026.4, while this IR keeps 100% (mean IoU 0.97) on OpenVINO.

    Raises:
        InvalidInputError: no calibration images, a dynamic model without ``calib_hw``, or ``out`` not ``.xml``.
        MissingDependencyError: NNCF or OpenVINO is not installed (the ``openvino`` extra).
    """
    ov = require("openvino", "openvino")
    nncf = import_nncf_quietly()
    import onnx

    from campusguard.io.images import read_image
    from campusguard.models.export import head_float_nodes
    from campusguard.ops.preprocess import letterbox, make_batch

    out = Path(out)
    if out.suffix != ".xml":
        raise InvalidInputError(f"{out}: OpenVINO's INT8 model is an IR; name it NAME.int8ov.xml")
    if not calibration_images:
        raise InvalidInputError("INT8 quantisation needs calibration images: pass --data DIR with images")
    proto = onnx.load(str(src), load_external_data=False)
    dims = [d.dim_value if d.HasField("dim_value") else None for d in proto.graph.input[0].type.tensor_type.shape.dim]
    hw = (dims[2], dims[3]) if len(dims) == 4 and dims[2] and dims[3] else calib_hw
    if hw is None:
        raise InvalidInputError(f"{src}: its input size is dynamic; give the calibration size (--imgsz)")
    meta = {p.key: p.value for p in proto.metadata_props}
    model = ov.convert_model(str(src))
    head = set(head_float_nodes(Path(src)))
    ignored = [op.get_friendly_name() for op in model.get_ops() if op.get_friendly_name() in head]

    def transform(path: Path) -> np.ndarray:
        return make_batch([letterbox(read_image(path), hw)[0]])

    quantized = nncf.quantize(
        model,
        nncf.Dataset(list(calibration_images), transform),
        subset_size=len(calibration_images),
        preset=nncf.QuantizationPreset.MIXED,
        ignored_scope=nncf.IgnoredScope(names=ignored, validate=False),
    )
    for key, value in {**meta, "campusguard_precision": "int8", "campusguard_quantiser": "nncf"}.items():
        quantized.set_rt_info(value, ["campusguard", key])
    out.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(quantized, str(out), compress_to_fp16=False)
    return out


def import_nncf_quietly() -> Any:
    """NNCF with its telemetry off. NNCF sends usage events to Google Analytics unless a consent file says
    no (``enable_opt_in_dialog=False``: no file counts as yes); a campus security tool sends nothing
    anywhere unasked, so its switch (``NNCF_CI``, read once at import: it only swaps the telemetry for a
    stub) is set before the first import.

    Raises:
        MissingDependencyError: NNCF is not installed (the ``openvino`` extra).
    """
    import os

    os.environ.setdefault("NNCF_CI", "1")
    return require("nncf", "openvino")


def ir_metadata(model: Any) -> dict[str, str]:
    """The ONNX metadata `quantize_int8_nncf` stored in an IR's ``rt_info`` (empty for another IR)."""
    info = model.get_rt_info()
    if "campusguard" not in info:
        return {}
    section = info["campusguard"]
    keys = list(section.astype(dict) if hasattr(section, "astype") else section)
    return {str(k): str(model.get_rt_info(["campusguard", str(k)]).astype(str)) for k in keys}


def profile_operators(
    detector: Any, batch: np.ndarray, runs: int, warmup: int
) -> tuple[dict[str, tuple[str, float, int]], int]:
    """OpenVINO's per-node performance counters (``PERF_COUNT``) of a request compiled like the detector's."""
    request = detector.backend.profiling_request(tuple(batch.shape))
    for _ in range(warmup):
        request.infer({0: batch})
    nodes: dict[str, tuple[str, float, int]] = {}
    for _ in range(runs):
        request.infer({0: batch})
        for info in request.get_profiling_info():
            us = info.real_time.total_seconds() * 1e6
            if us <= 0:
                continue
            kind, total, count = nodes.get(info.node_name, (str(info.node_type), 0.0, 0))
            nodes[info.node_name] = (kind, total + us, count + 1)
    return nodes, runs


SPEC = BackendSpec(
    name="openvino",
    label="OpenVINO",
    summary="OpenVINO: Intel CPUs, iGPUs and NPUs; FP32, BF16 and NNCF INT8 (the openvino extra)",
    build=build,
    reads=("onnx", "xml"),
    suffixes=(".xml",),
    devices=("auto", "cpu", "gpu", "npu"),
    precisions=("fp32", "bf16", "int8"),
    requires=("openvino",),
    extra="openvino",
    bench=(("openvino", "host", False),),
    cpu_trial=("fp32", "bf16", "int8ov"),
    int8_export=quantize_int8_nncf,
    int8_tag="int8ov",
    int8_suffix=".xml",
    profiler=profile_operators,
    verdicts=verdicts,
    formats=(
        ("fp32", "cpu,gpu,npu", ""),
        ("int8ov", "cpu,gpu,npu", "calibration images (--data); NNCF, an OpenVINO IR (.xml and .bin)"),
    ),
    order=30,
)
"""This engine's entry in the backend registry (`campusguard.backends.registry`, found by discovery)."""
