"""Fine-tune an exported detector: rebuild trainable PyTorch weights from an Ultralytics ONNX export.

An Ultralytics export fuses each convolution with its batch norm, and the ONNX file keeps the fused
weights under the module paths of the PyTorch model (``model.0.conv.weight``,
``model.0.conv.bias``). This module finds the architecture of the `families` table whose fused
graph has exactly those tensors, loads them, and turns each fused convolution ``W x + b`` back
into a convolution followed by a batch norm that computes the same thing:

- first an identity batch norm (scale 1, shift ``b``, mean 0, variance ``1 - eps``): the model
  then computes exactly what the ONNX file computes (checked against ONNX Runtime in the tests);
- then, given calibration images, each batch norm's statistics are re-estimated from the
  activations it sees (mean ``mu``, variance ``var`` of ``W x`` per channel) and its scale and
  shift set to ``sqrt(var + eps)`` and ``mu + b``: still the same function in eval mode, and in
  train mode, where a batch norm normalises by the batch's own statistics, close to it (with the
  identity form alone the first training step would normalise every layer afresh and wreck the
  weights).

The result is a ``.pt`` that ``campusguard train --model`` fine-tunes (``--model default`` or any
``.onnx`` goes through here). The optimiser state of the original run is not in the file and
starts fresh.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.errors import InvalidInputError, ModelLoadError, require
from campusguard.models.families import ARCHITECTURES, Architecture

__all__ = ["checkpoint_from_onnx", "detection_model_from_onnx", "recalibrate_batch_norms"]


def _onnx_tensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The named initializers and the metadata of an ONNX file."""
    import onnx
    from onnx import numpy_helper

    try:
        proto = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001  (protobuf raises several kinds)
        raise ModelLoadError(f"{path}: not a readable ONNX file ({exc})") from exc
    tensors = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    # an exporter that merges identical constants (a fresh model's zero biases) leaves a
    # convolution's bias under another name: name it after its weight, read from the graph
    for node in proto.graph.node:
        if node.op_type == "Conv" and len(node.input) == 3 and node.input[1].endswith(".weight"):
            bias = node.input[1].removesuffix(".weight") + ".bias"
            if bias not in tensors and node.input[2] in tensors:
                tensors[bias] = tensors[node.input[2]]
    meta = {p.key: p.value for p in proto.metadata_props}
    return tensors, meta


def _names(meta: dict[str, str], path: Path) -> dict[int, str]:
    import ast

    try:
        names = ast.literal_eval(meta["names"])
    except (KeyError, ValueError, SyntaxError) as exc:
        raise ModelLoadError(
            f"{path}: no Ultralytics class names in the ONNX metadata; cannot rebuild the model"
        ) from exc
    return {int(k): str(v) for k, v in names.items()}


def _fused_shapes(arch: Architecture, nc: int) -> tuple[Any, dict[str, tuple[int, ...]]]:
    """A fresh model of ``arch`` and the tensor shapes of its fused form (what an export holds)."""
    import copy

    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel(cfg=arch.yaml, nc=nc, verbose=False)
    fused = copy.deepcopy(model).fuse(verbose=False)
    return model, {k: tuple(v.shape) for k, v in fused.state_dict().items() if not k.endswith("num_batches_tracked")}


def detection_model_from_onnx(path: str | os.PathLike[str]) -> tuple[Any, Architecture, dict[int, str]]:
    """Rebuild the trainable Ultralytics ``DetectionModel`` of an Ultralytics ONNX export.

    Returns:
        ``(model, architecture, names)``: the model in float32 and train mode, unfused, with
        identity batch norms carrying the fused biases.

    Raises:
        ModelLoadError: the file is unreadable, has no Ultralytics metadata, or matches no
            non-end-to-end architecture of the families table (tensor names and shapes).
    """
    require("torch", "torch")
    require("ultralytics", "torch")
    import torch

    from campusguard.models.ultralytics_env import offline_ultralytics

    offline_ultralytics()
    path = Path(path)
    tensors, meta = _onnx_tensors(path)
    names = _names(meta, path)
    wanted = {k: tuple(v.shape) for k, v in tensors.items() if k.startswith("model.")}
    for arch in ARCHITECTURES.values():
        if arch.end_to_end:  # an export keeps one of YOLO26's two heads: not trainable from the file
            continue
        model, fused = _fused_shapes(arch, len(names))
        if fused != wanted:
            continue
        state = model.state_dict()
        new: dict[str, Any] = {}
        for key, value in tensors.items():
            if not key.startswith("model."):
                continue
            t = torch.from_numpy(np.array(value, dtype=np.float32))
            if key in state and tuple(state[key].shape) == tuple(t.shape):
                new[key] = t  # a plain convolution (the head's last layers) or the DFL weights
                continue
            prefix, _, leaf = key.rpartition(".")  # model.0.conv + weight|bias of a fused Conv+BN
            bn = prefix.removesuffix(".conv") + ".bn"
            if leaf == "weight":
                new[key] = t
            elif leaf == "bias" and f"{bn}.weight" in state:
                eps = float(model.get_submodule(bn).eps)
                new[f"{bn}.weight"] = torch.ones_like(t)
                new[f"{bn}.bias"] = t
                new[f"{bn}.running_mean"] = torch.zeros_like(t)
                new[f"{bn}.running_var"] = torch.full_like(t, 1.0 - eps)
            else:
                raise ModelLoadError(f"{path}: tensor {key} has no place in {arch.name}")
        missing = [k for k in state if k not in new and not k.endswith("num_batches_tracked")]
        if missing:
            raise ModelLoadError(
                f"{path}: {len(missing)} tensors of {arch.name} are not in the file (e.g. {missing[0]})"
            )
        model.load_state_dict(new, strict=False)
        model.names = names
        return model.float(), arch, names
    raise ModelLoadError(
        f"{path}: its weights match no YOLOv8/YOLO11 architecture (n..x); only those Ultralytics exports "
        "can be rebuilt for fine-tuning (a YOLO26 export lacks half of its two-headed training graph: "
        "fine-tune its .pt)"
    )


def recalibrate_batch_norms(model: Any, images: np.ndarray) -> int:
    """Re-estimate every batch norm's statistics from ``images`` without changing what ``model``
    computes in eval mode (module docstring). ``images``: ``(N, 3, H, W) float32`` in 0..1, RGB.

    Returns:
        the number of batch norms recalibrated.
    """
    import torch

    norms = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    sums: dict[str, list[Any]] = {}

    def hook(name: str) -> Any:
        def collect(_module: Any, inputs: tuple[Any, ...], _output: Any) -> None:
            x = inputs[0].double()
            s = sums.setdefault(name, [0.0, 0.0, 0])
            s[0] = s[0] + x.sum(dim=(0, 2, 3))
            s[1] = s[1] + (x * x).sum(dim=(0, 2, 3))
            s[2] += x.shape[0] * x.shape[2] * x.shape[3]

        return collect

    handles = [m.register_forward_hook(hook(name)) for name, m in norms.items()]
    model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(images), 8):
                model(torch.from_numpy(np.ascontiguousarray(images[i : i + 8], np.float32)))
    finally:
        for h in handles:
            h.remove()
    with torch.no_grad():
        for name, m in norms.items():
            assert m.running_mean is not None and m.running_var is not None  # BatchNorm2d tracks statistics
            total, squares, count = sums[name]
            mean = total / count  # of the norm's input x, per channel
            var = (squares / count - mean * mean).clamp_min(0)
            # the norm now computes x * scale + shift; keep that with the new statistics
            w, b, rm, rv = (t.double() for t in (m.weight, m.bias, m.running_mean, m.running_var))
            scale = w / torch.sqrt(rv + m.eps)
            shift = b - rm * scale
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
            m.weight.copy_(scale * torch.sqrt(var + m.eps))
            m.bias.copy_(shift + scale * mean)
    return len(norms)


def _calibration_images(files: list[Path], imgsz: int) -> np.ndarray:
    """``(N, 3, imgsz, imgsz)`` float32 RGB in 0..1 from image files (plain resize).

    Raises:
        ImageReadError: an unreadable file (`campusguard.io.images.read_image`).
    """
    import cv2

    from campusguard.io.images import read_image
    from campusguard.ops.preprocess import make_batch

    return make_batch([cv2.resize(read_image(f), (imgsz, imgsz), interpolation=cv2.INTER_LINEAR) for f in files])


def checkpoint_from_onnx(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    calibration: list[Path] | None = None,
    imgsz: int = 640,
) -> Path:
    """Write an Ultralytics checkpoint (``.pt``) rebuilt from an ONNX export, for ``campusguard train --model``.

    Args:
        calibration: image files whose activations re-estimate the batch norms (see
            `recalibrate_batch_norms`; a few dozen training images); none leaves them in identity form.
        imgsz: side the calibration images are resized to.

    Raises:
        InvalidInputError: ``out`` is not a ``.pt`` path (`ImageReadError`, one of them: a
        calibration image cannot be read); ModelLoadError: see `detection_model_from_onnx`.
    """
    import torch

    out = Path(out)
    if out.suffix != ".pt":
        raise InvalidInputError(f"checkpoint path {out} must end in .pt")
    model, arch, _names_ = detection_model_from_onnx(path)
    if calibration:
        recalibrate_batch_norms(model, _calibration_images(calibration, imgsz))
    model.args = {"imgsz": 640, "task": "detect"}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"model": model, "train_args": {"model": arch.yaml}, "source_onnx": str(Path(path).resolve()), "epoch": -1},
        out,
    )
    return out
