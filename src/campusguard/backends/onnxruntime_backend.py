"""ONNX Runtime backend: the production engine on every accelerator.

Provider choice by device:

=========  ==========================================================================
device     providers, in order
=========  ==========================================================================
cuda:N     TensorRT (only when ``tensorrt=True``), CUDA, CPU
rocm:N     MIGraphX (ONNX Runtime >= 1.23 has no ROCm provider); ROCm only where an
           older build still ships it; CPU
cpu        OpenVINO (CPU) when installed, else CPU
auto       the first GPU found, else cpu
=========  ==========================================================================

A requested GPU whose provider is missing, or a session that silently falls back to the
CPU, raises `DeviceError` unless ``allow_cpu_fallback=True`` (then a loud warning).

MIGraphX compiles a model when the session opens (minutes for a large one). The compiled program is
kept in one directory per model file, input shape and precision (`migraphx_cache_dir`, under
``$ORT_MIGRAPHX_CACHE_DIR`` or ``<cache>/migraphx``), passed as the built-in provider's
``migraphx_model_cache_dir`` option (the plugin provider reads ``ORT_MIGRAPHX_CACHE_DIR``, set per
model), so a restart does not recompile and two models never share a cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.backends.base import LoadOptions
from campusguard.backends.devices import DeviceSpec, resolve_device
from campusguard.backends.spec import BackendSpec, VerdictLine
from campusguard.cache import cache_dir
from campusguard.errors import DeviceError, InvalidInputError, ModelLoadError
from campusguard.models.export import quantize_int8
from campusguard.models.info import ModelInfo, info_from_onnx

__all__ = [
    "OnnxRuntimeBackend",
    "build",
    "providers_for",
    "read_metadata",
    "migraphx_cache_dir",
    "migraphx_cache_root",
    "migraphx_provider_options",
    "model_signature",
]

log = logging.getLogger(__name__)

GPU_PROVIDERS = {
    "cuda": ["CUDAExecutionProvider"],
    "rocm": ["MIGraphXExecutionProvider", "ROCMExecutionProvider"],
}


def register_migraphx_plugin(ort: Any) -> str | None:
    """Register the MIGraphX plugin execution provider (``onnxruntime-ep-migraphx``) if installed.

    ONNX Runtime >= 1.23 loads hardware providers as plugin libraries; the AMD one ships as the
    ``onnxruntime_ep_migraphx`` package. Returns the provider name, or ``None`` when absent.
    """
    try:
        import onnxruntime_ep_migraphx as plugin
    except ImportError:
        return None
    name = str(plugin.get_ep_name())
    if name not in ort.get_available_providers():
        try:
            import ctypes
            import glob

            import migraphx_libs

            for pattern in (
                str(Path(ort.__file__).parent / "capi" / "libonnxruntime.so.1*"),
                str(Path(migraphx_libs.__file__).parent / "libmigraphx_c.so.3*"),
            ):
                if hits := sorted(glob.glob(pattern)):
                    ctypes.CDLL(hits[0], mode=ctypes.RTLD_GLOBAL)
            ort.register_execution_provider_library(name, plugin.get_library_path())
        except Exception as exc:  # a broken plugin install is reported as "not available"
            log.warning("MIGraphX plugin provider could not be registered: %s", exc)
            return None
    return name


def providers_for(spec: DeviceSpec, available: list[str], tensorrt: bool = False) -> list[Any]:
    """The provider list to hand to ``InferenceSession`` for a resolved device.

    Raises:
        DeviceError: when the device needs a provider this ONNX Runtime build lacks.
    """
    if spec.kind in ("cpu", "auto"):
        if "OpenVINOExecutionProvider" in available:
            return [("OpenVINOExecutionProvider", {"device_type": "CPU"}), "CPUExecutionProvider"]
        return ["CPUExecutionProvider"]
    wanted = GPU_PROVIDERS[spec.kind]
    found = [p for p in wanted if p in available]
    if not found:
        package = "onnxruntime-gpu" if spec.kind == "cuda" else "onnxruntime-migraphx"
        raise DeviceError(
            f"{spec} requested but this ONNX Runtime build has no {' or '.join(wanted)} "
            f"(available: {', '.join(available)}); install {package}"
        )
    providers: list[Any] = []
    if spec.kind == "cuda" and tensorrt:
        if "TensorrtExecutionProvider" not in available:
            raise DeviceError("TensorRT requested but this ONNX Runtime build has no TensorrtExecutionProvider")
        providers.append(("TensorrtExecutionProvider", {"device_id": spec.index, "trt_fp16_enable": True}))
    providers.append((found[0], {"device_id": spec.index}))
    providers.append("CPUExecutionProvider")
    return providers


def read_metadata(session: Any) -> dict[str, str]:
    """The model's custom metadata (Ultralytics writes names, imgsz, stride, batch)."""
    return dict(session.get_modelmeta().custom_metadata_map)


def _provider_name(provider: Any) -> str:
    return str(provider[0] if isinstance(provider, tuple) else provider)


# read once: per-model caches set ORT_MIGRAPHX_CACHE_DIR for the plugin provider, and must stay
# siblings under the user's root rather than nest one inside the last
_MIGRAPHX_ROOT = os.environ.get("ORT_MIGRAPHX_CACHE_DIR")


def migraphx_cache_root() -> Path:
    """Where MIGraphX compiled programs are kept: ``$ORT_MIGRAPHX_CACHE_DIR`` as set at start, else ``<cache>/migraphx``."""
    if _MIGRAPHX_ROOT:
        return Path(_MIGRAPHX_ROOT)
    return cache_dir() / "migraphx"


def model_signature(model: Path | bytes) -> tuple[list[int | str], str]:
    """The first input's shape (``"dyn"`` for a dynamic axis) and precision (``fp16``/``fp32``) of an ONNX model."""
    import onnx

    proto = (
        onnx.load_model_from_string(model)
        if isinstance(model, bytes)
        else onnx.load(str(model), load_external_data=False)
    )
    tensor = proto.graph.input[0].type.tensor_type
    shape: list[int | str] = [d.dim_value if d.HasField("dim_value") else "dyn" for d in tensor.shape.dim]
    return shape, "fp16" if tensor.elem_type == onnx.TensorProto.FLOAT16 else "fp32"


def migraphx_cache_dir(
    model: Path | bytes, input_shape: list[int | str], precision: str, root: Path | None = None
) -> Path:
    """The compiled-program cache directory of one model: ``<root>/<name>-<sha256[:16]>-<shape>-<precision>``.

    Keyed by the model's bytes (a re-export gets a new directory, a restart finds the old one), its
    input shape (MIGraphX compiles a program per static shape) and precision, so two models never
    share a cache. Not created here: MIGraphX writes it on the first compile.
    """
    digest = hashlib.sha256()
    if isinstance(model, bytes):
        digest.update(model)
        name = "graph"
    else:
        with open(model, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        name = Path(model).stem
    shape = "x".join(str(d) for d in input_shape) or "scalar"
    return (root or migraphx_cache_root()) / f"{name}-{digest.hexdigest()[:16]}-{shape}-{precision}"


def migraphx_provider_options(device_index: int, cache: Path) -> dict[str, str]:
    """Options of ONNX Runtime's built-in MIGraphX provider: the GPU and its compiled-program cache directory."""
    return {"device_id": str(device_index), "migraphx_model_cache_dir": str(cache)}


class OnnxRuntimeBackend:
    """Run an ONNX detector with ONNX Runtime.

    Args:
        path: ``.onnx`` file.
        device: ``auto``, ``cpu``, ``cuda:N`` or ``rocm:N``.
        allow_cpu_fallback: run on the CPU (with a warning) when the GPU is unusable.
        tensorrt: put TensorRT before CUDA.
        intra_op_threads: ONNX Runtime intra-op threads (0: one per physical core).
        allow_spinning: let idle pool threads spin-wait (faster on a quiet machine, wasteful
            and noisy when other processes share the cores).
    """

    name = "onnxruntime"

    def __init__(
        self,
        path: str | Path,
        device: str = "auto",
        allow_cpu_fallback: bool = False,
        tensorrt: bool = False,
        intra_op_threads: int = 0,
        allow_spinning: bool = True,
    ) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        self._allow_cpu_fallback = allow_cpu_fallback
        self._intra_op_threads, self._allow_spinning = intra_op_threads, allow_spinning
        available = ort.get_available_providers()
        self._plugin = None
        if str(device).startswith("rocm") and "MIGraphXExecutionProvider" not in available:
            self._plugin = register_migraphx_plugin(ort)
            available = [*available, "MIGraphXExecutionProvider"] if self._plugin else available
        try:
            spec = resolve_device(device)
            providers = providers_for(spec, available, tensorrt)
        except DeviceError as exc:
            if not allow_cpu_fallback:
                raise
            log.warning("FALLING BACK TO CPU: %s", exc)
            spec, providers = DeviceSpec("cpu"), ["CPUExecutionProvider"]
        self.device = spec
        self._requested = providers
        self.migraphx_cache: Path | None = None  # set when MIGraphX opens a session: its compiled-program directory
        self.session = self.open_session(self.path)
        used = self.session.get_providers()
        self._providers = used
        self._input = self.session.get_inputs()[0]
        self._output = self.session.get_outputs()[0]
        self.info = self._model_info()
        self._input_dtype = np.float16 if self._input.type == "tensor(float16)" else np.float32
        self._use_io_binding = used[0] in (
            "CUDAExecutionProvider",
            "TensorrtExecutionProvider",
            "MIGraphXExecutionProvider",
            "ROCMExecutionProvider",
        )

    def open_session(self, model: Path | bytes) -> Any:
        """An ``InferenceSession`` for ``model`` (a file or serialised ONNX) with this backend's providers and options.

        The device pipeline opens its fused graph (pre-processing, the network, NMS) through here, so
        both sessions get the same providers, threads and fallback checks. On MIGraphX the compiled
        program is cached in a directory of its own per model file, input shape and precision
        (`migraphx_cache_dir`).

        Raises:
            ModelLoadError: when ONNX Runtime cannot load the model.
            DeviceError: when the session silently fell back from the requested GPU provider.
        """
        import onnxruntime as ort

        spec, providers = self.device, list(self._requested)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = self._intra_op_threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if self._allow_spinning else "0")
        opts.log_severity_level = 3
        session_providers: list[Any] | None = providers
        if _provider_name(providers[0]) == "MIGraphXExecutionProvider" or (self._plugin and spec.kind == "rocm"):
            shape, precision = model_signature(model)
            cache = migraphx_cache_dir(model, shape, precision)
            log.info("MIGraphX compiled-program cache for %s: %s", self.path.name, cache)
            if "dyn" in shape:
                log.warning(
                    "%s has a dynamic input %s: MIGraphX compiles a program per shape met; export a static "
                    "shape (dynamic=False, the default) so the cache is used from the first frame",
                    self.path.name,
                    shape,
                )
            self.migraphx_cache = cache
            if self._plugin:  # the plugin provider reads only the environment variable
                os.environ["ORT_MIGRAPHX_CACHE_DIR"] = str(cache)
            else:
                providers[0] = ("MIGraphXExecutionProvider", migraphx_provider_options(spec.index, cache))
                session_providers = providers
        if self._plugin and spec.kind == "rocm":
            # plugin providers are attached to devices, not named in the providers list
            ep_devices = [d for d in ort.get_ep_devices() if d.ep_name == self._plugin]
            if spec.index >= len(ep_devices):
                raise DeviceError(f"invalid device ordinal: {spec} requested, MIGraphX sees {len(ep_devices)} GPU(s)")
            opts.add_provider_for_devices(ep_devices[spec.index : spec.index + 1], {})
            session_providers = None
        source = model if isinstance(model, bytes) else str(model)
        try:
            session = ort.InferenceSession(source, sess_options=opts, providers=session_providers)
        except Exception as exc:  # onnxruntime raises its own, untyped, exception classes
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelLoadError(f"{self.path}: cannot load ONNX model ({first[:200]})") from exc
        used = session.get_providers()
        wanted = self._plugin if session_providers is None and self._plugin else _provider_name(providers[0])
        if used[0] != wanted and spec.kind not in ("cpu", "auto"):
            msg = f"ONNX Runtime silently fell back from {wanted} to {used[0]} for {spec}"
            if not self._allow_cpu_fallback:
                raise DeviceError(msg + " (pass allow_cpu_fallback=True to accept)")
            log.warning("FALLING BACK TO CPU: %s", msg)
        return session

    def _model_info(self) -> ModelInfo:
        return info_from_onnx(
            read_metadata(self.session),
            self._input.shape,
            self._output.shape,
            input_fp16=self._input.type == "tensor(float16)",
            source=str(self.path),
        )

    @property
    def provider(self) -> str:
        p = self._providers[0]
        return p if p == "CPUExecutionProvider" or p.startswith("OpenVINO") else f"{p}:{self.device.index}"

    @property
    def providers(self) -> list[str]:
        """All providers of the session, in priority order."""
        return list(self._providers)

    def infer(self, batch: np.ndarray) -> np.ndarray:
        x = batch if batch.dtype == self._input_dtype else batch.astype(self._input_dtype)
        if self._use_io_binding:
            binding = self.session.io_binding()
            binding.bind_cpu_input(self._input.name, x)
            binding.bind_output(
                self._output.name,
                "cuda" if "CUDA" in self._providers[0] or "Tensorrt" in self._providers[0] else "cpu",
                self.device.index,
            )
            self.session.run_with_iobinding(binding)
            out = binding.copy_outputs_to_cpu()[0]
        else:
            out = self.session.run([self._output.name], {self._input.name: x})[0]
        return out if out.dtype == np.float32 else out.astype(np.float32)


os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def build(path: Path, options: LoadOptions) -> OnnxRuntimeBackend:
    """The registry's builder (`campusguard.backends.registry`): an ONNX file on ONNX Runtime."""
    return OnnxRuntimeBackend(
        path,
        device=options.device,
        allow_cpu_fallback=options.allow_cpu_fallback,
        tensorrt=options.tensorrt,
        intra_op_threads=options.intra_op_threads,
        allow_spinning=options.allow_spinning,
    )


def device_pipeline(detector: Any, cuda_graphs: bool = False) -> Any:
    """The device-resident path (`campusguard.backends.onnxruntime_device.OrtDevicePipeline`) of a `Detector`."""
    if cuda_graphs:
        raise InvalidInputError("cuda_graphs is for the PyTorch device pipeline (backend='torch')")
    from campusguard.backends.onnxruntime_device import OrtDevicePipeline

    return OrtDevicePipeline.from_detector(detector)


def aggregate_ort_events(
    events: Sequence[dict[str, Any]], skip_runs: int = 0
) -> tuple[dict[str, tuple[str, float, int]], int]:
    """Sum ONNX Runtime profiler node events per node: ``{node: (op_type, total_us, calls)}`` and the run count.

    Args:
        events: the profiler's JSON events.
        skip_runs: leading ``model_run`` events (warm-up) whose node events are ignored.
    """
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e["ts"]
    )
    start = runs[skip_runs]["ts"] if len(runs) > skip_runs else 0
    counted = len(runs) - min(skip_runs, len(runs))
    nodes: dict[str, tuple[str, float, int]] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time") or e.get("ts", 0) < start:
            continue
        name = str(e["name"]).removesuffix("_kernel_time")
        op = str((e.get("args") or {}).get("op_name", "?"))
        prev = nodes.get(name, (op, 0.0, 0))
        nodes[name] = (op, prev[1] + float(e.get("dur", 0)), prev[2] + 1)
    return nodes, counted


def profile_operators(
    detector: Any, batch: np.ndarray, runs: int, warmup: int
) -> tuple[dict[str, tuple[str, float, int]], int]:
    """ONNX Runtime's profiler on a session like the detector's: per-node kernel times (``bench profile``)."""
    import onnxruntime as ort

    backend = detector.backend
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    with tempfile.TemporaryDirectory(prefix="cg-prof-") as tmp:
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(tmp) / "ort")
        sess = ort.InferenceSession(str(backend.path), sess_options=opts, providers=backend.session.get_providers())
        name = sess.get_inputs()[0].name
        x = batch.astype(np.float16) if sess.get_inputs()[0].type == "tensor(float16)" else batch
        for _ in range(warmup + runs):
            sess.run(None, {name: x})
        trace = sess.end_profiling()
        events = json.loads(Path(trace).read_text(encoding="utf-8"))
    return aggregate_ort_events(events, skip_runs=warmup)


def verdicts(context: dict[str, Any]) -> list[VerdictLine]:
    """``campusguard doctor``'s verdicts on ONNX Runtime: one per GPU vendor's provider, and the CPU."""
    providers: list[str] = context["providers"]
    vendors = {g["vendor"] for g in context["gpus"]}
    out: list[VerdictLine] = []
    if "amd" in vendors:
        if "MIGraphXExecutionProvider" in providers:
            out.append(("ONNX Runtime on MIGraphX", "ready", ""))
        elif "ROCMExecutionProvider" in providers:
            out.append(
                (
                    "ONNX Runtime on ROCm",
                    "ready",
                    "legacy provider, removed from ONNX Runtime 1.23; prefer onnxruntime-migraphx",
                )
            )
        else:
            out.append(("ONNX Runtime on MIGraphX", "cpu-only", "onnxruntime-migraphx is not installed"))
    if "nvidia" in vendors:
        if "CUDAExecutionProvider" in providers:
            trt = "TensorRT available" if "TensorrtExecutionProvider" in providers else ""
            out.append(("ONNX Runtime on CUDA", "ready", trt))
        else:
            out.append(("ONNX Runtime on CUDA", "cpu-only", "onnxruntime-gpu is not installed"))
    if not vendors:
        if "OpenVINOExecutionProvider" in providers:
            out.append(("ONNX Runtime on OpenVINO", "ready", "CPU"))
        out.append(("ONNX Runtime on CPU", "ready", "no GPU found"))
    else:
        out.append(("ONNX Runtime on CPU", "ready", ""))
    return out


SPEC = BackendSpec(
    name="onnxruntime",
    label="ONNX Runtime",
    summary="ONNX Runtime: the default for every model (CPU, CUDA/TensorRT, MIGraphX)",
    build=build,
    reads=("onnx",),
    suffixes=(".onnx",),
    devices=("auto", "cpu", "cuda", "rocm"),
    precisions=("fp32", "fp16", "int8"),
    requires=("onnxruntime",),
    bench=(("onnxruntime", "host", False), ("onnxruntime-device", "device", False)),
    cpu_trial=("fp32", "int8"),
    int8_export=quantize_int8,
    int8_tag="int8",
    profiler=profile_operators,
    verdicts=verdicts,
    device_pipeline=device_pipeline,
    formats=(
        ("fp32", "cpu,cuda,rocm", ""),
        ("fp16", "cuda,rocm", "a GPU provider for speed (runs on CPU but slower)"),
        ("int8", "cpu", "calibration images (--data); QOperator, ONNX Runtime's CPU kernels"),
    ),
    order=10,
)
"""This engine's entry in the backend registry (`campusguard.backends.registry`, found by discovery)."""
