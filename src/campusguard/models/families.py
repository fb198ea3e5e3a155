"""The one table of model families CampusGuard knows: YOLOv8, YOLO11 and the NMS-free YOLO26.

Every architecture name (``yolov8n`` ... ``yolo26x``) and its Ultralytics ``.yaml`` name
(``yolo26n.yaml``) resolve here; model resolution, both backends, training, export and bench
read this table, so a family is added in one place. Architecture names build the real graph
with RANDOM weights (speed and memory work only).

An end-to-end family (YOLO26) has a one-to-one head that emits final boxes,
``(B, max_det, 6)`` as ``x1, y1, x2, y2, score, class``: no NMS runs outside the model.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ARCHITECTURES", "FAMILIES", "SIZES", "Architecture", "ModelFamily", "find_architecture"]

SIZES = ("n", "s", "m", "l", "x")


@dataclass(frozen=True)
class ModelFamily:
    """One Ultralytics detection family.

    Attributes:
        key: name prefix of its architectures (``"yolo26"``).
        title: how people write it (``"YOLO26"``).
        end_to_end: its head emits final boxes (one-to-one, NMS-free) by default.
        sizes: the scales Ultralytics' yaml defines.
    """

    key: str
    title: str
    end_to_end: bool
    sizes: tuple[str, ...] = SIZES


@dataclass(frozen=True)
class Architecture:
    """One family at one size: ``yolo26n``."""

    family: ModelFamily
    size: str

    @property
    def name(self) -> str:
        return f"{self.family.key}{self.size}"

    @property
    def yaml(self) -> str:
        """The Ultralytics model config that builds it (``yolo26n.yaml`` selects scale ``n`` of ``yolo26.yaml``)."""
        return f"{self.name}.yaml"

    @property
    def end_to_end(self) -> bool:
        return self.family.end_to_end


FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily("yolov8", "YOLOv8", end_to_end=False),
    ModelFamily("yolo11", "YOLO11", end_to_end=False),
    ModelFamily("yolo26", "YOLO26", end_to_end=True),
)

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (Architecture(f, s) for f in FAMILIES for s in f.sizes)}
"""Architecture name to `Architecture`, in family then size order."""


def find_architecture(ref: object) -> Architecture | None:
    """The architecture a reference names (``yolo26n``, ``YOLO26n.yaml``), or ``None`` when it names none.

    A path to a real file (``configs/yolo26n.yaml``) is not an architecture name.
    """
    text = str(ref).strip().lower()
    return ARCHITECTURES.get(text.removesuffix(".yaml")) if "/" not in text else None
