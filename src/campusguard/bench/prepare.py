"""What each combination needs before it can be timed: the skip rules and the model file.

`skip_reason` decides, before anything is loaded, whether a combination can run on this
machine (FP16 on a CPU, INT8 on a GPU provider, a backend that is not installed). `prepare_onnx`
produces the ONNX file of a precision (export, FP16 conversion, INT8 quantisation), cached so
that a second run does not pay for it; preparation time is reported apart from load time.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from campusguard.backends.registry import BACKENDS as ENGINES
from campusguard.backends.registry import BENCH_VARIANTS, FORMATS, PRECISIONS, backend_spec
from campusguard.errors import InvalidInputError
from campusguard.models.registry import cache_dir, exported_onnx_path
from campusguard.models.resolve import ModelRef, parse_model_ref

__all__ = [
    "PRECISIONS",
    "BACKENDS",
    "TORCH_VARIANTS",
    "ORT_VARIANTS",
    "VARIANTS",
    "EXPORT_MODES",
    "skip_reason",
    "prepare_onnx",
    "int8_path",
    "fix_input_shape",
]

# every precision and bench variant comes from the backend registry (campusguard.backends.registry)
BACKENDS = tuple(BENCH_VARIANTS)
# bench backend -> (Detector backend, Detector pipeline, CUDA graphs): the variants compared in one run
VARIANTS: dict[str, tuple[str, str, bool]] = dict(BENCH_VARIANTS)
# the variants of engines that run checkpoints (no ONNX file to prepare) and of those that run ONNX files
TORCH_VARIANTS = {k: v for k, v in VARIANTS.items() if "onnx" not in ENGINES[v[0]].reads}
ORT_VARIANTS = {k: v for k, v in VARIANTS.items() if "onnx" in ENGINES[v[0]].reads}
EXPORT_MODES = ("static", "dynamic")


def skip_reason(ref: ModelRef, backend: str, precision: str, device_kind: str) -> str | None:
    """Why ``backend``/``precision`` cannot run ``ref`` on a ``device_kind`` (cpu, cuda, rocm); ``None`` if it can.

    Args:
        ref: the parsed model reference.
        backend: ``onnxruntime``, ``torch`` (host pre/post-processing), ``onnxruntime-device`` and
            ``torch-device`` (the device-resident paths) or ``torch-graphs`` (the same with CUDA graphs).
        precision: ``fp32``, ``fp16`` or ``int8``.
        device_kind: the resolved device kind.
    """
    if backend not in BACKENDS:
        raise InvalidInputError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise InvalidInputError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    gpu = device_kind in ("cuda", "rocm")
    engine = backend_spec(VARIANTS[backend][0])
    if (missing := engine.missing()) is not None:
        return missing
    if precision not in engine.precisions:
        return f"the {engine.name} backend runs {', '.join(engine.precisions)}, not {precision}"
    if device_kind not in engine.devices:
        return f"the {engine.name} backend runs on {', '.join(engine.devices)}, not {device_kind}"
    if backend in TORCH_VARIANTS:
        if backend == "torch-graphs" and not gpu:
            return "CUDA graphs need a CUDA or ROCm GPU"
        if ref.kind not in engine.reads:
            return f"the {engine.name} backend needs a .pt checkpoint or an architecture name, not an .onnx file"
        if precision == "fp16" and not gpu:
            return "FP16 needs a GPU; PyTorch on the CPU has no fast FP16 convolutions"
        return None
    if gpu:
        import onnxruntime as ort

        from campusguard.backends.onnxruntime_backend import GPU_PROVIDERS

        available = ort.get_available_providers()
        plugin = device_kind == "rocm" and importlib.util.find_spec("onnxruntime_ep_migraphx") is not None
        if not plugin and not any(p in available for p in GPU_PROVIDERS[device_kind]):
            package = "onnxruntime-gpu" if device_kind == "cuda" else "onnxruntime-migraphx"
            return (
                f"this ONNX Runtime build has no {' or '.join(GPU_PROVIDERS[device_kind])} "
                f"(available: {', '.join(available)}); install {package}"
            )
    if precision == "fp16" and not gpu:
        return f"FP16 needs a GPU provider; the {engine.name} backend's CPU kernels have no fast FP16"
    if precision == "int8" and gpu:
        return (
            "the INT8 model is QOperator U8S8 for ONNX Runtime's CPU kernels; CUDA/MIGraphX INT8 needs a "
            "QDQ model and TensorRT or MIGraphX calibration, which this build does not make"
        )
    if ref.kind in ("pt", "arch") and importlib.util.find_spec("ultralytics") is None:
        return "exporting .pt/architecture models to ONNX needs Ultralytics (pip install 'campusguard[torch]')"
    return None


def int8_path(
    fp32: Path, calibration: Sequence[Path], per_channel: bool, reduce_range: bool, calib_hw: tuple[int, int]
) -> Path:
    """Cache path of the INT8 model made from ``fp32`` with these calibration images, size and options."""
    key = hashlib.sha1(
        "|".join(
            [str(fp32.resolve()), str(fp32.stat().st_size), str(per_channel), str(reduce_range), str(calib_hw)]
            + [str(p) for p in calibration]
        ).encode()
    ).hexdigest()[:10]
    return cache_dir() / f"{fp32.stem}.int8-{key}.onnx"


def fix_input_shape(path: Path, batch: int, imgsz_hw: tuple[int, int]) -> Path:
    """A copy of an ONNX model whose dynamic input is fixed to ``(batch, 3, H, W)`` (cached); static models as they are.

    Bench fixes a dynamic export (like the bundled default model) to the shape it measures, so
    every precision runs the same static graph; output shapes are re-inferred.
    """
    import onnx
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_input_shape_fixed

    model = onnx.load(str(path))
    inp = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if len(dims) == 4 and all(d is not None for d in dims):
        return path
    h, w = imgsz_hw
    key = hashlib.sha1(f"{path.resolve()}|{path.stat().st_size}".encode()).hexdigest()[:8]
    out = cache_dir() / f"{path.stem}-{key}.{h}x{w}-b{batch}-static-fp32.onnx"
    if out.is_file():
        return out
    make_input_shape_fixed(model.graph, inp.name, [batch, 3, h, w])
    fix_output_shapes(model)
    onnx.save(model, str(out))
    return out


def prepare_onnx(
    model: str | Path,
    precision: str,
    batch: int,
    imgsz_hw: tuple[int, int],
    dynamic: bool = False,
    calibration: Sequence[Path] | None = None,
    per_channel: bool = False,
    reduce_range: bool = True,
    end_to_end: bool | None = None,
    backend: str = "onnxruntime",
) -> Path:
    """The ONNX file to time for ``model`` at ``precision``: exported, converted or quantised once, then cached.

    Args:
        model: ``.onnx``/``.pt`` path or architecture name.
        precision: ``fp32``, ``fp16`` or ``int8``.
        batch: batch size of a static export.
        imgsz_hw: network input (height, width) of the export.
        dynamic: export with dynamic batch and shape instead of static.
        calibration: images for INT8 (required for ``int8``).
        per_channel: INT8 per-channel weight scales.
        reduce_range: INT8 7-bit weights (avoids u8s8 saturation on AVX2 kernels).
        end_to_end: the head a ``.pt`` or architecture is exported with (``None``: its own,
            ``False``: the classic head, cached apart); an ``.onnx`` keeps its own.
        backend: the engine it is for: its INT8 quantiser and file tag (`BackendSpec.int8_export`).
    """
    from campusguard.models.aliases import alias_for
    from campusguard.models.export import convert_fp16, export_onnx, quantize_int8, stamp_alias

    ref = parse_model_ref(model)
    alias = alias_for(model)
    if ref.kind == "onnx":
        assert ref.path is not None
        fp32 = ref.path
        if precision == "int8" and not dynamic:
            fp32 = fix_input_shape(fp32, batch, imgsz_hw)  # the shape the other precisions are benched at
    else:
        fp32 = exported_onnx_path(ref, imgsz_hw, batch, dynamic, "fp32", end_to_end)
        if not fp32.is_file():
            export_onnx(ref, fp32, imgsz_hw=imgsz_hw, batch=batch, dynamic=dynamic, end_to_end=end_to_end)
    if precision not in PRECISIONS:
        raise InvalidInputError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if precision == "fp32" or precision not in FORMATS:  # a compiled precision (BF16): the FP32 file, set at load
        return fp32
    if precision == "fp16":
        out = fp32.with_name(fp32.stem.replace("-fp32", "") + "-fp16.onnx")
        if ref.kind == "onnx":
            out = cache_dir() / f"{fp32.stem}-{hashlib.sha1(str(fp32.resolve()).encode()).hexdigest()[:8]}-fp16.onnx"
        if alias is not None:  # the alias's variant carries its class mapping; the same file by path does not
            out = out.with_name(f"{alias.name}.{out.name}")
        if not out.is_file():
            convert_fp16(fp32, out)
            stamp_alias(out, alias)
        return out
    if precision == "int8":
        if not calibration:
            raise InvalidInputError("INT8 needs calibration images: pass --calib DIR or --data DATASET_YAML")
        engine = backend_spec(backend)
        quantiser = engine.int8_quantiser() or quantize_int8
        out = int8_path(fp32, calibration, per_channel, reduce_range, imgsz_hw)
        out = out.with_name(out.name.replace(".int8-", f".{engine.int8_tag}-")).with_suffix(engine.int8_suffix)
        if alias is not None:
            out = out.with_name(f"{alias.name}.{out.name}")
        if not out.is_file():
            quantiser(fp32, out, calibration, per_channel=per_channel, reduce_range=reduce_range, calib_hw=imgsz_hw)
            stamp_alias(out, alias)
        return out
    raise InvalidInputError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
