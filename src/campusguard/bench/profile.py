"""Where the time goes: per operator type and per node, plus pre- and post-processing.

- ONNX Runtime: the session's built-in profiler (``SessionOptions.enable_profiling``); node
  events (``cat == "Node"``, ``*_kernel_time``) after the warm-up runs are summed per node and
  per operator type.
- PyTorch: ``torch.profiler`` self times per ATen operator (type) and per operator and input
  shapes ("node").

Operator types are grouped into categories (convolution / matrix, element-wise and memory,
quantise/dequantise, other) so the verdict can say whether a model is bound by convolutions,
by memory-bound element-wise work, or by the pre-/post-processing around the network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.backends.registry import BACKENDS, backend_spec, choices
from campusguard.errors import InvalidInputError, require

__all__ = [
    "OpTime",
    "ProfileResult",
    "categorise",
    "profile_model",
    "write_profile",
]

_CONV = ("conv", "gemm", "matmul", "mm", "addmm", "linear", "bmm")
_QUANT = ("quantize", "dequantize")
_ELEMENTWISE = (
    "add", "mul", "sub", "div", "sigmoid", "silu", "relu", "concat", "cat", "split", "slice", "reshape",
    "transpose", "resize", "upsample", "maxpool", "max_pool", "softmax", "copy", "clone", "view", "expand",
    "gather", "shape", "unsqueeze", "squeeze", "pow", "exp", "contiguous", "stack", "chunk", "to", "fill",
    "empty", "zeros", "cast", "where", "flatten", "permute", "sum", "mean", "qlinearadd", "qlinearmul",
    "qlinearconcat", "qlinearsigmoid", "qlinearleakyrelu", "quickgelu", "reorder", "max_pool2d",
)  # fmt: skip


def categorise(op_type: str) -> str:
    """``conv`` (convolutions and matrix products), ``quant``, ``elementwise`` (memory-bound) or ``other``."""
    name = op_type.lower().removeprefix("aten::").removeprefix("mkldnn_")
    if name.startswith("qlinear") and "conv" not in name and "matmul" not in name:
        return "elementwise"
    if any(k in name for k in _QUANT):
        return "quant"
    if any(name.startswith(k) or k in name for k in _CONV) and not name.startswith("conv_"):
        return "conv"
    if any(name.startswith(k) or name == k for k in _ELEMENTWISE) or "_" in name and name.split("_")[0] in _ELEMENTWISE:
        return "elementwise"
    return "other"


@dataclass(frozen=True)
class OpTime:
    """Mean time per run of one operator type or node, in milliseconds, and its share of inference."""

    name: str
    op_type: str
    ms: float
    share: float
    calls: float
    category: str


@dataclass
class ProfileResult:
    """A profile of one model on one backend; times are mean milliseconds per call of one batch."""

    model: str
    backend: str
    provider: str
    batch: int
    runs: int
    preprocess_ms: float
    inference_ms: float
    postprocess_ms: float
    op_types: list[OpTime] = field(default_factory=list)
    nodes: list[OpTime] = field(default_factory=list)
    categories: dict[str, float] = field(default_factory=dict)
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tables(
    per_node: dict[str, tuple[str, float, int]], runs: int
) -> tuple[list[OpTime], list[OpTime], dict[str, float]]:
    """Per-type and per-node tables (ms per run, share of the total) and category shares from node totals (us)."""
    runs = max(runs, 1)
    total_us = sum(v[1] for v in per_node.values()) or 1.0
    by_type: dict[str, list[float]] = {}
    for op, us, calls in per_node.values():
        acc = by_type.setdefault(op, [0.0, 0.0])
        acc[0] += us
        acc[1] += calls
    types = sorted(
        (
            OpTime(op, op, us / runs / 1000.0, us / total_us, calls / runs, categorise(op))
            for op, (us, calls) in by_type.items()
        ),
        key=lambda o: o.ms,
        reverse=True,
    )
    nodes = sorted(
        (
            OpTime(n, op, us / runs / 1000.0, us / total_us, calls / runs, categorise(op))
            for n, (op, us, calls) in per_node.items()
        ),
        key=lambda o: o.ms,
        reverse=True,
    )
    cats: dict[str, float] = {}
    for t in types:
        cats[t.category] = cats.get(t.category, 0.0) + t.share
    return types, nodes, cats


def _verdict(res: ProfileResult) -> str:
    total = res.preprocess_ms + res.inference_ms + res.postprocess_ms
    if total <= 0:
        return "no time measured"
    around = (res.preprocess_ms + res.postprocess_ms) / total
    if around > 0.5:
        return (
            f"bound by pre- and post-processing: {around:.0%} of the end-to-end time is outside the network "
            f"(pre {res.preprocess_ms:.1f} ms, post {res.postprocess_ms:.1f} ms, inference {res.inference_ms:.1f} ms)"
        )
    if not res.categories:
        return f"inference takes {1 - around:.0%} of the end-to-end time"
    top, share = max(res.categories.items(), key=lambda kv: kv[1])
    names = {
        "conv": "convolutions (compute-bound)",
        "elementwise": "element-wise and data-movement operators (memory-bound)",
        "quant": "quantise/dequantise conversions",
        "other": "other operators",
    }
    return (
        f"bound by {names[top]}: {share:.0%} of network time; the network is {1 - around:.0%} of the end-to-end "
        f"time (pre {res.preprocess_ms:.1f} ms, inference {res.inference_ms:.1f} ms, post {res.postprocess_ms:.1f} ms)"
    )


def profile_model(
    model: str | Path,
    backend: str = "onnxruntime",
    device: str = "auto",
    imgsz_hw: tuple[int, int] = (640, 640),
    batch: int = 1,
    precision: str = "fp32",
    runs: int = 10,
    warmup: int = 2,
    frames: Sequence[np.ndarray] | None = None,
    calibration: Sequence[Path] | None = None,
) -> ProfileResult:
    """Profile ``model``: end-to-end stages with `Detector`, network operators with the backend's profiler.

    Args:
        model: ``.onnx``/``.pt`` path or architecture name.
        backend: a registered backend with an operator profiler (`BackendSpec.profiler`).
        device: ``auto``, ``cpu``, ``cuda:N``, ``rocm:N``.
        imgsz_hw: network input (height, width).
        batch: images per call.
        precision: ``fp32``, ``fp16`` or ``int8`` (INT8 needs ``calibration`` images).
        runs: profiled calls (>= 1).
        warmup: calls before profiling.
        frames: BGR frames to use; default: Ultralytics' samples or synthetic frames.
    """
    from campusguard.bench.inputs import load_frames
    from campusguard.bench.prepare import prepare_onnx
    from campusguard.detector import Detector
    from campusguard.ops.preprocess import letterbox, make_batch

    if runs < 1:
        raise InvalidInputError(f"runs={runs} must be at least 1")
    if batch < 1:
        raise InvalidInputError(f"batch size {batch} must be at least 1")
    spec = backend_spec(backend)
    if spec.profiler is None:
        with_profiler = tuple(s.name for s in BACKENDS.values() if s.profiler)
        raise InvalidInputError(f"the {backend} backend has no operator profiler; choose {choices(with_profiler)}")
    profiler = spec.operator_profiler()
    pool = list(frames) if frames else load_frames()[0]
    model_arg: str | Path = model
    if "onnx" in spec.reads:
        model_arg = prepare_onnx(model, precision, batch, imgsz_hw, calibration=calibration, backend=backend)
    det = Detector(
        model_arg,
        device=device,
        imgsz=imgsz_hw,
        backend=backend,
        batch=batch,
        rect=False,
        half=precision == "fp16" and "fp16" in spec.precisions and "onnx" not in spec.reads,
        precision=precision,
    )
    images = [pool[i % len(pool)] for i in range(batch)]
    for _ in range(warmup):
        det.predict_batch(images)
    pre, inf, post = [], [], []
    for _ in range(runs):
        det.predict_batch(images)
        pre.append(det.timings.preprocess_ms)
        inf.append(det.timings.inference_ms)
        post.append(det.timings.postprocess_ms)
    hw = det.input_hw(images[0].shape[:2])
    x = make_batch([letterbox(im, hw)[0] for im in images])
    per_node, counted = profiler(det, x, runs, warmup)
    types, nodes, cats = _tables(per_node, counted)
    res = ProfileResult(
        model=str(model),
        backend=backend,
        provider=det.provider,
        batch=batch,
        runs=counted,
        preprocess_ms=float(np.median(pre)),
        inference_ms=float(np.median(inf)),
        postprocess_ms=float(np.median(post)),
        op_types=types,
        nodes=nodes,
        categories=cats,
    )
    res.verdict = _verdict(res)
    return res


def write_profile(res: ProfileResult, out_dir: str | Path, top: int = 15) -> dict[str, Path]:
    """Write ``profile.json``, ``op_types.csv``, ``nodes.csv`` and the ``profile.png`` bar chart of the top operators."""
    import csv

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "profile.json", "op_types": out / "op_types.csv", "nodes": out / "nodes.csv"}
    files["json"].write_text(json.dumps(res.to_dict(), indent=1) + "\n", encoding="utf-8")
    for key, rows in (("op_types", res.op_types), ("nodes", res.nodes)):
        with files[key].open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["name", "op_type", "category", "ms_per_run", "share", "calls_per_run"])
            for o in rows:
                w.writerow([o.name, o.op_type, o.category, f"{o.ms:.4f}", f"{o.share:.4f}", f"{o.calls:g}"])
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [(o.op_type, o.ms, o.category) for o in res.op_types[:top]]
    items += [
        ("(pre-processing)", res.preprocess_ms, "pre/post"),
        ("(post-processing)", res.postprocess_ms, "pre/post"),
    ]
    items.sort(key=lambda t: t[1])
    colours = {
        "conv": "tab:blue",
        "elementwise": "tab:orange",
        "quant": "tab:purple",
        "other": "tab:gray",
        "pre/post": "tab:green",
    }
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(items) + 1.5))
    ax.barh([t[0] for t in items], [t[1] for t in items], color=[colours[t[2]] for t in items])
    ax.set_xlabel("ms per call (mean)")
    ax.set_title(f"{res.model} {res.backend} batch {res.batch}: top operators", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, list(colours), fontsize=7, loc="lower right")
    fig.tight_layout()
    files["plot"] = out / "profile.png"
    fig.savefig(files["plot"], dpi=110)
    plt.close(fig)
    return files
