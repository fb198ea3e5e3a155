"""The one table of model families CampusGuard knows: YOLOv8, YOLO11 and the NMS-free YOLO26.

Names mean what they mean to Ultralytics: ``yolov8n`` and ``yolov8n.pt`` (`official_weights_name`)
are the official COCO-trained weights (fetched by `campusguard.models.hub`), and ``yolov8n.yaml``
(`architecture_config`) is the bare architecture with RANDOM weights, for speed and memory work only.
Model resolution, both backends, training, export and bench read this table, so a family is added
in one place.

An end-to-end family (YOLO26) has two heads. The one-to-one head emits final boxes,
``(B, max_det, 6)`` as ``x1, y1, x2, y2, score, class``, and no NMS runs outside the model
(``head="end2end"``, what CampusGuard runs by default); the classic one-to-many head gives
``(B, 4+nc, N)`` candidates for NMS (``head="classic"``, what Ultralytics 8.4's default
``predict`` runs on a ``.pt``). `head_end_to_end` turns the choice into the backends' flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from campusguard.errors import InvalidInputError

__all__ = [
    "ARCHITECTURES",
    "FAMILIES",
    "HEADS",
    "SIZES",
    "Architecture",
    "ModelFamily",
    "architecture_config",
    "find_architecture",
    "head_end_to_end",
    "official_weights_name",
]

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
    """The family and size a bare name or config names (``yolo26n``, ``YOLO26n.yaml``), or ``None``.

    A path (``configs/yolo26n.yaml``) names no architecture. What a name means (trained weights
    or random ones) is `official_weights_name` and `architecture_config`.
    """
    text = str(ref).strip().lower()
    if "/" in text or "\\" in text:
        return None
    return ARCHITECTURES.get(text.removesuffix(".yaml"))


def architecture_config(ref: object) -> Architecture | None:
    """The architecture a ``NAME.yaml`` reference builds with RANDOM weights (``yolo26n.yaml``), else ``None``."""
    text = str(ref).strip().lower()
    return find_architecture(text) if text.endswith(".yaml") else None


def official_weights_name(ref: object) -> str | None:
    """The official trained weights a reference names (``yolov8n`` or ``yolov8n.pt`` -> ``"yolov8n"``), else ``None``."""
    text = str(ref).strip().lower()
    arch = find_architecture(text.removesuffix(".pt")) if not text.endswith(".yaml") else None
    return None if arch is None else arch.name


HEADS = ("end2end", "classic")
"""The heads a model can run: ``end2end`` (one-to-one, NMS-free) and ``classic`` (one-to-many, then NMS)."""


def head_end_to_end(head: str | None) -> bool | None:
    """The backends' ``end_to_end`` flag for a head choice: ``None`` (the model's own head) stays ``None``.

    Raises:
        InvalidInputError: a head that is not one of `HEADS`.
    """
    if head is None:
        return None
    if head not in HEADS:
        raise InvalidInputError(f"head {head!r} must be one of {', '.join(HEADS)}")
    return head == "end2end"
