"""Still images: random campus scenes seen by a fixed camera, with tight YOLO labels.

`render_image(seed, index)` is a pure function of its arguments (a per-image random generator
seeded from ``(seed, index)``), so images can be generated in any order and in parallel.
Backgrounds (a few layouts x four lightings) are rendered once per ``(seed, imgsz)`` and reused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from campusguard.data.synth.camera import PERSON_HEIGHT_M, Camera
from campusguard.data.synth.campus import campus_layout
from campusguard.data.synth.classes import BICYCLE, BUS, CAR, MOTORCYCLE, PERSON, TRUCK
from campusguard.data.synth.lighting import LIGHTINGS, Lighting
from campusguard.data.synth.render import NoiseBank, Placed, RenderedObject, apply_effects, compose
from campusguard.data.synth.scene import Layout, random_layout, render_background
from campusguard.data.synth.sprites import (
    PROP_KINDS,
    draw_object,
    draw_prop,
    draw_rider,
    lying,
    object_size_m,
    random_look,
)
from campusguard.errors import InvalidInputError

__all__ = ["SynthImage", "ImageParams", "render_image", "encode_jpeg", "yolo_label_text"]

DEFAULT_LIGHTING_WEIGHTS: tuple[float, ...] = (0.4, 0.25, 0.15, 0.2)  # day, overcast, dusk, night
_CLASS_WEIGHTS: dict[int, float] = {PERSON: 0.42, BICYCLE: 0.09, CAR: 0.2, MOTORCYCLE: 0.09, BUS: 0.08, TRUCK: 0.12}
_MIN_DEPTH_M: dict[int, float] = {PERSON: 0.0, BICYCLE: 0.0, CAR: 7.5, MOTORCYCLE: 0.0, BUS: 13.0, TRUCK: 11.0}


@dataclass(frozen=True)
class ImageParams:
    """Knobs of the still-image generator (sizes in pixels for a 640-pixel-wide frame).

    Attributes:
        layouts: number of random scene layouts per seed (each rendered under every lighting).
        campus_fraction: share of images showing the video camera's campus (`campus.campus_layout`).
        rider_fraction: share of side-view bicycles and motorcycles with a rider (labelled person).
        min_objects, max_objects: objects placed per image (groups count member by member).
        min_person_px: smallest person height drawn.
        min_size_px: smallest box height drawn; the smallest width is half of it (see `render.compose`).
        min_visible: smallest visible fraction of an object's pixels (see `render.compose`).
        jpeg_quality: inclusive range of JPEG quality.
        lying_fraction: share of people drawn lying on the ground (labelled person, as in the videos'
            scripted falls), so a detector trained on these images keeps finding a person who is down.
        lighting_weights: relative weight of each lighting of `lighting.LIGHTINGS` (day, overcast,
            dusk, night), normalised; e.g. more night images to fine-tune for dark scenes.
    """

    layouts: int = 12
    campus_fraction: float = 0.2
    rider_fraction: float = 0.5
    min_objects: int = 3
    max_objects: int = 14
    min_person_px: float = 30.0
    min_size_px: float = 12.0
    min_visible: float = 0.4
    jpeg_quality: tuple[int, int] = (50, 95)
    lying_fraction: float = 0.08
    lighting_weights: tuple[float, ...] = DEFAULT_LIGHTING_WEIGHTS

    def __post_init__(self) -> None:
        w = self.lighting_weights
        if len(w) != len(LIGHTINGS) or not all(np.isfinite(x) and x >= 0 for x in w) or sum(w) <= 0:
            names = ", ".join(li.name for li in LIGHTINGS)
            raise InvalidInputError(
                f"lighting weights must be {len(LIGHTINGS)} numbers >= 0 ({names}) with a positive sum, got {w}"
            )

    def lighting_p(self) -> np.ndarray:
        """The lighting weights as probabilities."""
        w = np.asarray(self.lighting_weights, np.float64)
        return w / w.sum()  # the default sums to exactly 1.0, so its draws are the same as before


@dataclass(frozen=True)
class SynthImage:
    """One rendered image: ``(H, W, 3) uint8`` BGR, its labels, and how it was made."""

    image: np.ndarray
    objects: list[RenderedObject]
    lighting: str
    jpeg_quality: int


@dataclass(frozen=True)
class _Scene:
    layout: Layout
    camera: Camera


class _SceneBank:
    """Layouts, cameras and lazily rendered backgrounds for one ``(seed, imgsz)``."""

    def __init__(self, seed: int, imgsz: int, params: ImageParams) -> None:
        self.scenes: list[_Scene] = []
        for k in range(params.layouts):
            rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CE7E, k]))
            cam = Camera.for_frame(
                imgsz,
                imgsz,
                near_person_px=float(rng.uniform(110, 135)),
                height_m=float(rng.uniform(3.5, 4.8)),
                focal_per_width=float(rng.uniform(0.68, 0.82)),
            )
            self.scenes.append(_Scene(random_layout(rng), cam))
        # the campus the video camera watches, through the same camera model (last scene)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0xCA3F05]))
        self.scenes.append(_Scene(campus_layout(rng), Camera.for_frame(imgsz, imgsz)))
        self.seed = seed
        self.backgrounds: dict[tuple[int, int], np.ndarray] = {}
        self.noise = NoiseBank(seed, (imgsz, imgsz))

    def background(self, k: int, li: int) -> np.ndarray:
        key = (k, li)
        if key not in self.backgrounds:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xB6, k, li]))
            sc = self.scenes[k]
            self.backgrounds[key] = render_background(sc.layout, sc.camera, LIGHTINGS[li], rng)
        return self.backgrounds[key]


@lru_cache(maxsize=2)  # about 60 MB of backgrounds per (seed, imgsz) at 640
def _bank(seed: int, imgsz: int, params: ImageParams) -> _SceneBank:
    return _SceneBank(seed, imgsz, params)


def _max_depth(class_id: int, cam: Camera, params: ImageParams, far_z: float) -> float:
    k = cam.width / 640.0
    if class_id == PERSON:
        return min(far_z, PERSON_HEIGHT_M * cam.focal_px / (params.min_person_px * k))
    w, h = object_size_m(class_id, "front")
    return min(far_z, min(w, h) * cam.focal_px / (params.min_size_px * k * 1.25))


def _sample_ground(
    rng: np.random.Generator, cam: Camera, z_lo: float, z_hi: float, w_m: float, far_bias: float = 0.0
) -> tuple[float, float]:
    """Random ground point ``(x, z)``: uniform in image row between depths, uniform across the view.

    With probability ``far_bias`` the row is drawn from the farthest third of the range instead
    (more small objects: the fixed video camera sees most people far away on the sidewalks).
    """
    v_lo, v_hi = float(cam.row_of_depth(z_hi)), float(cam.row_of_depth(z_lo))
    if rng.random() < far_bias:
        v_hi = v_lo + (v_hi - v_lo) / 3.0
    z = cam.depth_of_row(float(rng.uniform(v_lo, v_hi)))
    hw = cam.half_width_m(z) + 0.3 * w_m
    return float(rng.uniform(-hw, hw)), z


def _place_objects(rng: np.random.Generator, sc: _Scene, light: Lighting, params: ImageParams) -> list[Placed]:
    cam, layout = sc.camera, sc.layout
    near = cam.near_depth_m * 0.93
    items: list[Placed] = []
    n_target = int(rng.integers(params.min_objects, params.max_objects + 1))
    classes = list(_CLASS_WEIGHTS)
    weights = np.array(list(_CLASS_WEIGHTS.values()))
    while len([p for p in items if p.class_id >= 0]) < n_target:
        cls = int(rng.choice(classes, p=weights / weights.sum()))
        side = cls != PERSON and rng.random() < 0.65
        view = (
            str(rng.choice(["left", "right"] if side else ["front", "back"]))
            if cls != PERSON
            else str(rng.choice(["left", "right", "front", "back"]))
        )
        w_m, _ = object_size_m(cls, view)
        z_lo, z_hi = max(near, _MIN_DEPTH_M[cls]), _max_depth(cls, cam, params, layout.far_z)
        if z_hi <= z_lo:
            continue
        x, z = _sample_ground(rng, cam, z_lo, z_hi, w_m, far_bias=0.35)
        if cls != PERSON and layout.roads and rng.random() < 0.5:
            zr0, zr1 = layout.roads[int(rng.integers(0, len(layout.roads)))]
            zr = float(rng.uniform(zr0 + 0.5, zr1 - 0.5))
            if z_lo <= zr <= z_hi:
                z = zr
                view = str(rng.choice(["left", "right"])) if rng.random() < 0.85 else view
        members = [(x, z)]
        if cls == PERSON and rng.random() < 0.3:  # a group of people close together
            for _ in range(int(rng.integers(1, 5))):
                members.append(
                    (x + float(rng.uniform(-1.6, 1.6)), max(z_lo, min(z_hi, z + float(rng.uniform(-1.2, 1.2)))))
                )
        for mx, mz in members:
            look = random_look(rng, cls)
            mview = view if len(members) == 1 else str(rng.choice(["left", "right", "front", "back"]))
            down = cls == PERSON and params.lying_fraction > 0 and rng.random() < params.lying_fraction
            phase = 0.0 if down else float(rng.uniform(0, 2 * np.pi))
            sprite = draw_object(cls, cam.px_per_m(mz), mview, look, light, phase=phase)
            if down:
                sprite = lying(sprite)
            u, v = cam.project(np.array([[mx, mz]]))[0]
            items.append(Placed(sprite, float(u), float(v), mz, cls, len(items)))
            if cls in (BICYCLE, MOTORCYCLE) and mview in ("left", "right") and rng.random() < params.rider_fraction:
                rider = draw_rider(cls, cam.px_per_m(mz), mview, random_look(rng, PERSON), light, look.size)
                items.append(Placed(rider, float(u), float(v), mz - 0.05, PERSON, len(items)))
    for _ in range(int(rng.integers(0, 4))):  # unlabelled occluders and distractors
        kind = str(rng.choice(PROP_KINDS))
        x, z = _sample_ground(rng, cam, near, layout.far_z, 1.0)
        sprite = draw_prop(kind, cam.px_per_m(z), rng, light)
        u, v = cam.project(np.array([[x, z]]))[0]
        items.append(Placed(sprite, float(u), float(v), z, -1, len(items)))
    return items


def render_image(
    seed: int,
    index: int,
    imgsz: int = 640,
    params: ImageParams | None = None,
    *,
    instance_map: np.ndarray | None = None,
) -> SynthImage:
    """Render image ``index`` of the data set made with ``seed``.

    Args:
        seed: data set seed.
        index: image index (any non-negative integer).
        imgsz: square image side in pixels.
        params: generator knobs (`ImageParams` defaults when ``None``).
        instance_map: optional ``(imgsz, imgsz) int32`` array receiving per-pixel sprite ids.
    Returns:
        the image (BGR ``uint8``, before JPEG encoding), its labels and metadata.
    """
    params = params or ImageParams()
    bank = _bank(seed, imgsz, params)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1A6E, index]))
    n_random = len(bank.scenes) - 1
    k = n_random if rng.random() < params.campus_fraction else int(rng.integers(0, n_random))
    li = int(rng.choice(len(LIGHTINGS), p=params.lighting_p()))
    sc = bank.scenes[k]
    bg = bank.background(k, li)
    frame = cv2.flip(bg, 1) if rng.random() < 0.5 else bg.copy()
    items = _place_objects(rng, sc, LIGHTINGS[li], params)
    s = imgsz / 640.0
    objects = compose(
        frame, items, min_visible=params.min_visible, min_size_px=params.min_size_px * s, instance_map=instance_map
    )
    frame = apply_effects(frame, rng, bank.noise)
    quality = int(rng.integers(params.jpeg_quality[0], params.jpeg_quality[1] + 1))
    return SynthImage(frame, objects, LIGHTINGS[li].name, quality)


def encode_jpeg(image: np.ndarray, quality: int) -> bytes:
    """JPEG bytes of a BGR image at a fixed ``quality`` (deterministic for a given libjpeg)."""
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 BGR
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes()


def yolo_label_text(objects: list[RenderedObject], width: int, height: int) -> str:
    """YOLO txt: one ``class cx cy w h`` line per object, normalised to 0..1, 6 decimals."""
    lines = []
    for o in objects:
        x1, y1, x2, y2 = o.xyxy
        lines.append(
            f"{o.class_id} {(x1 + x2) / 2 / width:.6f} {(y1 + y2) / 2 / height:.6f} "
            f"{(x2 - x1) / width:.6f} {(y2 - y1) / height:.6f}"
        )
    return "\n".join(lines) + ("\n" if lines else "")
