"""Export: PyTorch (``.pt`` or architecture) to ONNX, ONNX FP32 to FP16, and ONNX FP32 to INT8.

Which file formats each engine runs, and where they pay, is the backend registry's table
(`campusguard.backends.registry.FORMATS`); this module makes the files.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.errors import InvalidInputError, ModelLoadError, require
from campusguard.models.aliases import ALIAS_METADATA_KEY, ModelAlias
from campusguard.models.resolve import ModelRef
from campusguard.models.ultralytics_env import offline_ultralytics

__all__ = [
    "stamp_alias",
    "export_onnx",
    "convert_fp16",
    "quantize_int8",
    "set_metadata",
    "head_float_nodes",
    "pick_images",
    "ultralytics_onnx",
]

log = logging.getLogger(__name__)

def set_metadata(path: Path, **values: str) -> None:
    """Add or replace custom metadata entries of an ONNX file in place."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    existing = {p.key: p for p in model.metadata_props}
    for key, value in values.items():
        if key in existing:
            existing[key].value = value
        else:
            model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))


def stamp_alias(path: Path, alias: ModelAlias | None) -> None:
    """Record on an ONNX export which alias it came from, so it keeps the alias's class mapping.

    Other files (an OpenVINO IR) are left as they are: they keep the model's own classes."""
    if alias is not None and Path(path).suffix == ".onnx":
        set_metadata(path, **{ALIAS_METADATA_KEY: alias.name})


def export_onnx(
    ref: ModelRef,
    out: Path,
    imgsz_hw: tuple[int, int] = (640, 640),
    batch: int = 1,
    dynamic: bool = False,
    half: bool = False,
    simplify: bool = True,
    opset: int | None = 17,
    end_to_end: bool | None = None,
) -> Path:
    """Export a ``.pt`` checkpoint or architecture model to ONNX with Ultralytics' exporter.

    Architecture models get random weights (seeded) and the metadata flag
    ``campusguard_random_weights=true``. ``half`` converts the FP32 export afterwards.
    ``end_to_end`` picks the head (`select_head`): ``None`` keeps the model's own, so YOLO26
    exports its NMS-free head, output ``(B, max_det, 6)``; ``False`` the classic
    ``(B, 4+nc, N)`` head, which CampusGuard's NMS post-processes.
    """
    offline_ultralytics()
    require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics import YOLO

    from campusguard.models.ultralytics_net import build_architecture

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cg-export-") as tmp:
        if ref.kind == "arch":
            import torch

            net = build_architecture(str(ref.name))
            pt = Path(tmp) / f"{ref.name}.pt"
            torch.save({"model": net, "train_args": {}, "date": None, "version": "campusguard"}, pt)
        else:
            assert ref.path is not None
            pt = Path(tmp) / ref.path.name
            shutil.copy(ref.path, pt)
        try:
            model = YOLO(str(pt), task="detect")
        except Exception as exc:
            raise ModelLoadError(f"{ref}: not an Ultralytics YOLO checkpoint ({type(exc).__name__})") from exc
        produced = ultralytics_onnx(
            model, imgsz=list(imgsz_hw), batch=batch, dynamic=dynamic, simplify=simplify, opset=opset, end_to_end=end_to_end
        )
        fp32 = Path(tmp) / "fp32.onnx"
        shutil.move(str(produced), fp32)
        set_metadata(
            fp32,
            campusguard_random_weights="true" if ref.kind == "arch" else "false",
            campusguard_source=str(ref),
            campusguard_precision="fp32",
        )
        if half:
            convert_fp16(fp32, out)
        else:
            shutil.move(str(fp32), out)
    return out


def ultralytics_onnx(
    yolo: Any,
    *,
    imgsz: int | list[int],
    batch: int = 1,
    dynamic: bool = False,
    simplify: bool = True,
    opset: int | None = 17,
    end_to_end: bool | None = None,
) -> Path:
    """Ultralytics' ONNX export (on the CPU) of a loaded ``ultralytics.YOLO``, with the head
    `campusguard.backends.torch_backend.select_head` picks: ``None`` keeps the model's own, so a
    YOLO26 checkpoint exports its NMS-free head, ``(B, max_det, 6)``; ``False`` the classic head.

    Ultralytics' own default (``nms=None``) exports YOLO26's classic head, which is why every
    CampusGuard export goes through here. Returns the file Ultralytics wrote (beside the weights).
    """
    from campusguard.models.ultralytics_net import select_head

    in_model_nms = select_head(yolo.model, end_to_end)
    produced = yolo.export(
        format="onnx",
        imgsz=imgsz,
        batch=batch,
        dynamic=dynamic,
        simplify=simplify,
        opset=opset,
        nms=False if in_model_nms else None,  # Ultralytics: False = the NMS-free head, None = its classic head
        device="cpu",
        verbose=False,
    )
    return Path(produced)


def convert_fp16(src: Path, out: Path) -> Path:
    """Convert an FP32 ONNX model to FP16 weights and compute, keeping float32 inputs and outputs."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    model16 = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
    onnx.save(model16, str(out))
    set_metadata(Path(out), campusguard_precision="fp16")
    return Path(out)


def head_float_nodes(model_path: Path) -> list[str]:
    """Names of the detection-head nodes that must stay in float under INT8 quantisation.

    The head's decode turns logits into pixel coordinates and probabilities: one INT8 scale
    cannot cover both (pixels up to 640, probabilities 0..1), so everything in the last
    module except its two convolution branches (``cv2`` box, ``cv3`` class) stays float.

    An end-to-end head (YOLO26) keeps its one-to-one branches (``one2one_cv2`` / ``one2one_cv3``)
    and its top-k in float too: its top-k picks 300 (box, class) pairs out of N x 80 scores, and
    INT8 class logits reorder them. Measured on the random-weight yolo26n of
    ``tests/models/test_models_end_to_end.py``: 91% of FP32's boxes kept with these branches in
    float, 41% with them quantised (no trained YOLO26 was available to check real weights).
    """
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    modules = [n.name.split("/")[1] for n in graph.node if n.name.startswith("/model.")]
    if not modules:
        return []
    head = max(modules, key=lambda m: int(m.split(".")[1]) if m.split(".")[1].isdigit() else -1)
    prefix = f"/{head}/"
    branches = ("/cv2.", "/cv3.")  # quantised; "/one2one_cv2." and "/one2one_cv3." do not match: float
    return [
        n.name for n in graph.node if n.name.startswith(prefix) and not any(b in n.name for b in branches)
    ] + [n.name for n in graph.node if not n.name.startswith("/model.")]


def pick_images(data: Path, limit: int, on_skip: Callable[[str], None] | None = None) -> list[Path]:
    """The images `campusguard export` calibrates INT8 on and checks parity with.

    Up to ``limit`` readable images, evenly spaced over the sorted image files under ``data``:
    a folder (searched recursively) or a data.yaml (its ``val`` split, else ``train``).
    ``on_skip`` gets the one-line reason of each unreadable file.

    Raises:
        InvalidInputError: the folder is missing, or holds no (readable) images.
    """
    from campusguard.errors import ImageReadError
    from campusguard.io.images import IMAGE_SUFFIXES, read_image

    root = Path(data)
    if root.suffix in (".yaml", ".yml"):
        import yaml

        cfg = yaml.safe_load(root.read_text())
        root = Path(cfg.get("path", root.parent)) / cfg.get("val", cfg.get("train", ""))
    if not root.exists():
        raise InvalidInputError(f"--data {data}: no such folder")
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise InvalidInputError(f"--data {data}: no images found")
    good = []
    for f in files[:: max(1, len(files) // limit)][:limit]:
        try:
            read_image(f)
            good.append(f)
        except ImageReadError as exc:
            if on_skip is not None:
                on_skip(str(exc))
    if not good:
        raise InvalidInputError(f"--data {data}: no readable images")
    return good


class _ImageCalibrationReader:
    """Feeds letterboxed calibration images to ONNX Runtime's static quantiser."""

    def __init__(self, input_name: str, images: Sequence[Path], input_hw: tuple[int, int], batch: int) -> None:
        self.input_name = input_name
        self.images = list(images)
        self.input_hw = input_hw
        self.batch = batch
        self._it: Iterator[dict[str, np.ndarray]] | None = None

    def _gen(self) -> Iterator[dict[str, np.ndarray]]:
        from campusguard.io.images import read_image
        from campusguard.ops.preprocess import letterbox, make_batch

        for i in range(0, len(self.images) - self.batch + 1, self.batch):
            frames = [letterbox(read_image(p), self.input_hw)[0] for p in self.images[i : i + self.batch]]
            yield {self.input_name: make_batch(frames)}

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self._it is None:
            self._it = self._gen()
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = None


def quantize_int8(
    src: Path,
    out: Path,
    calibration_images: Sequence[Path],
    per_channel: bool = False,
    reduce_range: bool = True,
    method: str = "minmax",
    calib_hw: tuple[int, int] | None = None,
) -> Path:
    """Static post-training INT8 quantisation with ONNX Runtime (QOperator, U8 activations, S8 weights).

    The detection head's decode stays float (`head_float_nodes`). ``reduce_range`` uses 7-bit
    weights, which avoids saturation in the AVX2/VNNI-less u8s8 kernels.

    "Static" is ONNX Runtime's name for activation scales fixed at calibration, not for the
    image size: a model with a dynamic input stays dynamic. It is calibrated on images
    letterboxed to ``calib_hw`` (its own static size when it has one) and then runs at any
    size, e.g. an aspect-matched 192x320 for 16:9 cameras; the scales are per tensor, so they
    carry over to another size of the same scenes (the export's parity check measures it).

    Raises:
        InvalidInputError: when there are no calibration images, or a dynamic model comes
            without ``calib_hw``.
    """
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if not calibration_images:
        raise InvalidInputError("INT8 quantisation needs calibration images: pass --data DIR with images")
    sess = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    h, w = inp.shape[2], inp.shape[3]
    if not (isinstance(h, int) and isinstance(w, int)):
        if calib_hw is None:
            raise InvalidInputError(f"{src}: its input size is dynamic; give the calibration size (--imgsz)")
        h, w = calib_hw
    batch = inp.shape[0] if isinstance(inp.shape[0], int) else 1
    meta = dict(sess.get_modelmeta().custom_metadata_map)
    del sess
    methods = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }
    with tempfile.TemporaryDirectory(prefix="cg-int8-") as tmp:
        pre = Path(tmp) / "pre.onnx"
        try:
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
        except Exception as exc:  # pre-processing is an optimisation; quantise the original if it fails
            log.warning("quantisation pre-processing skipped: %s", exc)
            shutil.copy(src, pre)
        quantize_static(
            str(pre),
            str(out),
            _ImageCalibrationReader(inp.name, calibration_images, (h, w), batch),
            quant_format=QuantFormat.QOperator,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            reduce_range=reduce_range,
            nodes_to_exclude=head_float_nodes(pre),
            calibrate_method=methods[method],
        )
    set_metadata(Path(out), **{**meta, "campusguard_precision": "int8"})
    return Path(out)
