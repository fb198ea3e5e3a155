"""YOLO-format data sets: find the images of a split, read and validate their labels.

Everything is checked before anything runs: a missing ``data.yaml`` key, a missing image or
labels folder, a malformed label line, a class id out of range or an empty split each raise
`InvalidInputError` with a one-line message naming the file (and line).

The layout is Ultralytics': ``data.yaml`` names a root ``path`` (relative paths are taken
relative to the yaml file's folder) and per split a folder of images, a list of folders, or a
``.txt`` file listing image paths. The label of ``.../images/.../x.jpg`` is
``.../labels/.../x.txt`` with one ``class cx cy w h`` line per object, coordinates normalised
to 0..1 (segment polygons ``class x1 y1 x2 y2 ...`` are accepted and reduced to their box).
An image without a label file is a background image with no objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.io.images import IMAGE_SUFFIXES

__all__ = ["YoloDataset", "label_path_for", "load_yolo_dataset", "read_data_yaml", "read_label_file"]


# normalised coordinates slightly outside 0..1 come from rounding in label writers
_COORD_TOLERANCE = 0.01


@dataclass(frozen=True)
class YoloDataset:
    """One split of a YOLO-format data set, validated.

    Attributes:
        data_yaml: the ``data.yaml`` file it came from.
        split: split name, e.g. ``"val"``.
        names: class names by class id, ``{0: "person", ...}``.
        image_paths: one path per image, sorted.
        image_hw: ``(N, 2) int64`` image heights and widths in pixels.
        truths: ground truth per image, boxes ``xyxy`` in image pixels, confidence 1.
    """

    data_yaml: Path
    split: str
    names: dict[int, str]
    image_paths: list[Path]
    image_hw: np.ndarray
    truths: list[Detections]

    def __len__(self) -> int:
        return len(self.image_paths)

    @property
    def num_instances(self) -> int:
        """Number of labelled objects in the split."""
        return sum(len(t) for t in self.truths)


def _err(msg: str) -> InvalidInputError:
    return InvalidInputError(msg)


def read_data_yaml(data_yaml: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``data.yaml`` and resolve its paths.

    Returns:
        the yaml mapping with ``path`` made absolute (relative to the yaml's folder),
        ``names`` as ``{int: str}`` and ``nc`` set; split entries are left as written.

    Raises:
        InvalidInputError: the file is missing, not YAML, or lacks ``names``/``nc``.
    """
    import yaml

    path = Path(data_yaml)
    if not path.is_file():
        raise _err(f"data set file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise _err(f"data set file {path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise _err(f"data set file {path} must be a YAML mapping with keys path, train, val, names")
    data["names"] = _parse_names(data, path)
    data["nc"] = len(data["names"])
    root = Path(str(data.get("path") or "."))
    if not root.is_absolute():
        root = (path.parent / root).resolve()
    data["path"] = str(root)
    return data


def _parse_names(data: Mapping[str, Any], path: Path) -> dict[int, str]:
    names = data.get("names")
    nc = data.get("nc")
    if names is None:
        if isinstance(nc, int) and nc > 0:
            return {i: f"class{i}" for i in range(nc)}
        raise _err(f"data set file {path} has no 'names' key (class names by id)")
    if isinstance(names, Sequence) and not isinstance(names, str):
        parsed = {i: str(n) for i, n in enumerate(names)}
    elif isinstance(names, Mapping):
        try:
            parsed = {int(k): str(v) for k, v in names.items()}
        except (TypeError, ValueError) as exc:
            raise _err(f"data set file {path}: 'names' keys must be integer class ids") from exc
        if sorted(parsed) != list(range(len(parsed))):
            raise _err(
                f"data set file {path}: 'names' ids must be 0..{len(parsed) - 1} without gaps, got {sorted(parsed)}"
            )
    else:
        raise _err(f"data set file {path}: 'names' must be a list or an id-to-name mapping")
    if not parsed:
        raise _err(f"data set file {path}: 'names' is empty")
    if nc is not None and nc != len(parsed):
        raise _err(f"data set file {path}: nc is {nc} but 'names' lists {len(parsed)} classes")
    return parsed


def label_path_for(image_path: Path) -> Path:
    """Return the label file of an image: the last ``images`` folder becomes ``labels``, suffix ``.txt``."""
    parts = list(image_path.parts)
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            return Path(*parts).with_suffix(".txt")
    return image_path.with_suffix(".txt")


def _split_images(data: Mapping[str, Any], split: str, data_yaml: Path) -> list[Path]:
    entry = data.get(split)
    if entry is None or entry == "":
        raise _err(f"data set file {data_yaml} has no '{split}' key (the {split} images)")
    root = Path(data["path"])
    entries = entry if isinstance(entry, list) else [entry]
    images: list[Path] = []
    for item in entries:
        p = Path(str(item))
        p = p if p.is_absolute() else root / p
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.suffix.lower() in IMAGE_SUFFIXES and q.is_file())
            _check_labels_have_images(p, found)
            images += found
        elif p.is_file() and p.suffix == ".txt":
            images += _read_image_list(p, root)
        elif p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES:
            images.append(p)
        else:
            raise _err(f"{split} images {p} (from {data_yaml}) do not exist")
    if not images:
        raise _err(f"{split} split of {data_yaml} is empty: no images under {', '.join(map(str, entries))}")
    return images


def _check_labels_have_images(image_dir: Path, images: list[Path]) -> None:
    """A label file whose image is gone means a missing image, not a background image."""
    label_dir = label_path_for(image_dir / "x.jpg").parent
    if label_dir == image_dir or not label_dir.is_dir():
        return
    stems = {label_path_for(q) for q in images}
    for lp in sorted(label_dir.rglob("*.txt")):
        if lp not in stems:
            raise _err(f"label file {lp} has no image in {image_dir} (missing image?)")


def _read_image_list(list_file: Path, root: Path) -> list[Path]:
    out = []
    for lineno, line in enumerate(list_file.read_text(encoding="utf-8").splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        p = Path(s)
        if s.startswith("./"):
            p = list_file.parent / s[2:]
        elif not p.is_absolute():
            p = root / p
        if not p.is_file():
            raise _err(f"{list_file}:{lineno}: image {p} does not exist")
        out.append(p)
    return out


def read_label_file(label_path: Path, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """Read one YOLO label file.

    Args:
        label_path: the ``.txt`` file; a missing file means no objects.
        nc: number of classes; ids must be in ``0..nc-1``.

    Returns:
        ``(class_id (M,) int64, xyxy_norm (M, 4) float32)`` with boxes normalised to 0..1.

    Raises:
        InvalidInputError: naming file and line, for a malformed line, a class id out of
            range, coordinates outside 0..1 or a box without area.
    """
    if not label_path.is_file():
        return np.zeros(0, np.int64), np.zeros((0, 4), np.float32)
    classes: list[int] = []
    boxes: list[list[float]] = []
    for lineno, line in enumerate(label_path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"{label_path}:{lineno}"
        if len(fields) != 5 and (len(fields) < 7 or len(fields) % 2 == 0):
            raise _err(f"{where}: expected 'class cx cy w h' (5 numbers), got {len(fields)} fields: {line.strip()!r}")
        try:
            values = [float(v) for v in fields]
        except ValueError as exc:
            raise _err(f"{where}: not a number in {line.strip()!r}") from exc
        cls = values[0]
        if cls != int(cls) or not 0 <= cls < nc:
            raise _err(f"{where}: class id {fields[0]} out of range 0..{nc - 1}")
        coords = np.asarray(values[1:], np.float64)
        if not np.all(np.isfinite(coords)) or coords.min() < -_COORD_TOLERANCE or coords.max() > 1 + _COORD_TOLERANCE:
            raise _err(f"{where}: coordinates must be normalised to 0..1, got {line.strip()!r}")
        if len(fields) == 5:
            cx, cy, w, h = coords
            box = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
        else:
            xy = coords.reshape(-1, 2)
            box = [*xy.min(0), *xy.max(0)]
        box = list(np.clip(box, 0.0, 1.0))
        if box[2] <= box[0] or box[3] <= box[1]:
            raise _err(f"{where}: box has no area: {line.strip()!r}")
        classes.append(int(cls))
        boxes.append(box)
    return np.asarray(classes, np.int64), np.asarray(boxes, np.float32).reshape(-1, 4)


def _image_hw(path: Path) -> tuple[int, int]:
    """Height and width of an image in pixels, reading only the header where Pillow is present."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            w, h = im.size
            # EXIF orientations 5..8 rotate by 90 degrees; OpenCV's imread applies them
            if im.getexif().get(0x0112, 1) in (5, 6, 7, 8):
                w, h = h, w
            return int(h), int(w)
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib and Ultralytics
        pass
    except Exception as exc:
        raise _err(f"image {path} cannot be read: {exc}") from exc
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise _err(f"image {path} cannot be read")
    return int(img.shape[0]), int(img.shape[1])


def load_yolo_dataset(data_yaml: str | os.PathLike[str], split: str = "val") -> YoloDataset:
    """Load and validate one split of a YOLO-format data set.

    Args:
        data_yaml: path of the ``data.yaml``.
        split: ``"train"``, ``"val"`` or ``"test"``.

    Returns:
        the validated split, with ground-truth boxes in image pixels.

    Raises:
        InvalidInputError: anything wrong with the yaml, the images or the labels.
    """
    yaml_path = Path(data_yaml)
    data = read_data_yaml(yaml_path)
    names: dict[int, str] = data["names"]
    images = _split_images(data, split, yaml_path)
    label_paths = [label_path_for(p) for p in images]
    if not any(lp.parent.is_dir() for lp in label_paths):
        raise _err(f"{split} split of {yaml_path} has no labels folder (expected e.g. {label_paths[0].parent})")
    hws = np.zeros((len(images), 2), np.int64)
    truths = []
    for i, (img, lp) in enumerate(zip(images, label_paths, strict=True)):
        cls, xyxy_norm = read_label_file(lp, len(names))
        h, w = _image_hw(img)
        hws[i] = (h, w)
        xyxy = xyxy_norm * np.array([w, h, w, h], np.float32)
        truths.append(Detections(xyxy=xyxy, confidence=np.ones(len(cls), np.float32), class_id=cls))
    return YoloDataset(data_yaml=yaml_path, split=split, names=names, image_paths=images, image_hw=hws, truths=truths)
