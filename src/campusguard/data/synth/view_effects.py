"""What can happen to a camera's view, scripted on a synthetic video, with its ground truth.

Problems a camera-health check must raise (each one's ``problem`` in the truth):
    ``cover`` -> ``covered`` (a dark, flat object over most of the lens), ``defocus`` -> ``blurred``
    (Gaussian blur of ``sigma`` pixels; the sensor noise is added after it, as a real sensor's
    would be), ``turn`` -> ``moved`` (rotated ``angle_deg``, shifted ``shift_px`` and zoomed
    ``zoom`` times), ``freeze`` -> ``frozen`` (the encoder repeats one frame, noise included).
Things that are not problems and must raise nothing:
    ``dusk`` (brightness ramps down linearly to ``level`` from ``start_s`` to ``end_s``, then stays
    there), ``flash`` (frames washed towards white), ``shade`` (a dark shape over ``area`` of the
    view, e.g. a person close to the lens), ``shake`` (wind: the view jitters by up to ``shift_px``).

Effects apply to the rendered picture before the sensor noise, in the order given. Object labels
are not moved by ``turn`` or ``shake`` and not hidden by ``cover`` or ``shade``: scenes with view
effects are for scoring camera health.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast, get_args

import cv2
import numpy as np

from campusguard.errors import InvalidInputError

__all__ = [
    "EFFECT_PROBLEMS",
    "EffectKind",
    "ViewEffect",
    "apply_view_effects",
    "frozen_source_index",
    "health_truth",
    "parse_view_effect",
]

EffectKind = Literal["cover", "defocus", "turn", "freeze", "dusk", "flash", "shade", "shake"]

EFFECT_PROBLEMS: dict[str, str] = {"cover": "covered", "defocus": "blurred", "turn": "moved", "freeze": "frozen"}
"""The camera-health problem each problem effect is (the others are nuisances)."""


@dataclass(frozen=True)
class ViewEffect:
    """One scripted effect on the view, from ``start_s`` to ``end_s`` (stream seconds).

    Attributes:
        kind: what happens (see the module docstring).
        start_s: first moment it applies.
        end_s: first moment it no longer applies (``dusk`` holds its ``level`` after it).
        sigma: ``defocus``'s Gaussian sigma, pixels.
        angle_deg: ``turn``'s rotation, degrees.
        zoom: ``turn``'s zoom factor.
        shift_px: ``turn``'s shift (x and y), or ``shake``'s largest jitter, pixels.
        level: ``dusk``'s final brightness (fraction of the original), ``flash``'s whiteness (0..1).
        area: ``cover``'s or ``shade``'s share of the frame width covered (from the left).
    """

    kind: EffectKind
    start_s: float
    end_s: float
    sigma: float = 5.0
    angle_deg: float = 10.0
    zoom: float = 1.2
    shift_px: float = 30.0
    level: float = 0.45
    area: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("cover", "defocus", "turn", "freeze", "dusk", "flash", "shade", "shake"):
            raise InvalidInputError(f"unknown view effect {self.kind!r}")
        if not self.end_s > self.start_s >= 0:
            raise InvalidInputError(f"view effect {self.kind}: needs 0 <= start_s < end_s, got {self.start_s}, {self.end_s}")
        if not (0.0 < self.area <= 1.0 and 0.0 < self.level <= 1.0 and self.sigma > 0 and self.zoom > 0):
            raise InvalidInputError(f"view effect {self.kind}: area and level in (0, 1], sigma and zoom > 0")

    def active(self, t: float) -> bool:
        """Whether the effect applies at ``t`` (``dusk`` from its start on)."""
        if self.kind == "dusk":
            return t >= self.start_s
        return self.start_s <= t < self.end_s


def frozen_source_index(effects: Sequence[ViewEffect], index: int, fps: float) -> int:
    """The frame a frozen encoder shows at ``index``: the freeze's first frame while one is active."""
    t = index / fps
    for e in effects:
        if e.kind == "freeze" and e.active(t):
            return int(np.ceil(e.start_s * fps - 1e-9))
    return index


def _cover(img: np.ndarray, area: float, seed: int) -> np.ndarray:
    h, w = img.shape[:2]
    x1 = int(round(w * area))
    rng = np.random.default_rng(seed)
    base = rng.uniform(18, 40)
    # a dark cloth: flat, a faint shading across it, no texture
    ramp = np.linspace(0.0, 6.0, h, dtype=np.float32)[:, None]
    patch = np.clip(base + ramp + np.zeros((h, x1), np.float32), 0, 255).astype(np.uint8)
    img[:, :x1] = patch[:, :, None]
    return img


def _shade(img: np.ndarray, area: float) -> np.ndarray:
    h, w = img.shape[:2]
    x1 = int(round(w * area))
    region = img[:, :x1].astype(np.float32) * 0.12 + 10.0
    img[:, :x1] = np.clip(region, 0, 255).astype(np.uint8)
    return img


def _turn(img: np.ndarray, e: ViewEffect) -> np.ndarray:
    h, w = img.shape[:2]
    m = np.asarray(cv2.getRotationMatrix2D((w / 2.0, h / 2.0), e.angle_deg, e.zoom), np.float64)
    m[:, 2] += np.array([e.shift_px, e.shift_px * 0.5])
    return np.asarray(cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT))


def _shake(img: np.ndarray, e: ViewEffect, seed: int, index: int) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A4E, index]))
    dx, dy = (rng.uniform(-e.shift_px, e.shift_px, 2)).tolist()
    m = np.array([[1.0, 0.0, dx], [0.0, 1.0, dy]], np.float32)
    h, w = img.shape[:2]
    return np.asarray(cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT))


def apply_view_effects(img: np.ndarray, effects: Sequence[ViewEffect], t: float, seed: int, index: int) -> np.ndarray:
    """``img`` (``(H, W, 3) uint8`` BGR, before noise) with the effects active at ``t``; may be a new array."""
    for e in effects:
        if not e.active(t) or e.kind == "freeze":
            continue
        if e.kind == "cover":
            img = _cover(img, e.area, seed)
        elif e.kind == "defocus":
            img = cv2.GaussianBlur(img, (0, 0), e.sigma)
        elif e.kind == "turn":
            img = _turn(img, e)
        elif e.kind == "dusk":
            f = min(1.0, (t - e.start_s) / (e.end_s - e.start_s))
            img = cv2.convertScaleAbs(img, alpha=1.0 - f * (1.0 - e.level))
        elif e.kind == "flash":
            img = cv2.addWeighted(img, 1.0 - e.level, np.full_like(img, 255), e.level, 0.0)
        elif e.kind == "shade":
            img = _shade(img, e.area)
        elif e.kind == "shake":
            img = _shake(img, e, seed, index)
    return img


def health_truth(effects: Sequence[ViewEffect], camera_id: str = "cam0") -> list[dict]:
    """The camera-health incidents the effects are: ``{"kind": "camera_health", "zone": problem, ...}``
    (``zone`` holds the problem, as the incidents' own ``zone`` does)."""
    return [
        {"kind": "camera_health", "zone": EFFECT_PROBLEMS[e.kind], "start_s": e.start_s, "end_s": e.end_s, "track_ids": []}
        for e in effects
        if e.kind in EFFECT_PROBLEMS
    ]


_KNOBS = ("sigma", "angle_deg", "zoom", "shift_px", "level", "area")


def parse_view_effect(text: str) -> ViewEffect:
    """``KIND:START-END[:knob=value,...]`` (``cover:40-80``, ``defocus:110-170:sigma=5``) as a `ViewEffect`.

    Raises:
        InvalidInputError: the text does not have that form, naming what is wrong.
    """
    kind, _, rest = text.partition(":")
    span, _, knobs = rest.partition(":")
    start, sep, end = span.partition("-")
    try:
        values: dict[str, float] = {}
        for part in filter(None, knobs.split(",")):
            name, eq, value = part.partition("=")
            if not eq or name.strip() not in _KNOBS:
                raise InvalidInputError(f"view effect {text!r}: knob {part!r} is not one of {', '.join(_KNOBS)}=NUMBER")
            values[name.strip()] = float(value)
        if not sep:
            raise ValueError("no END")
        if kind not in get_args(EffectKind):
            raise ValueError(f"KIND must be one of {', '.join(get_args(EffectKind))}")
        return ViewEffect(cast(EffectKind, kind), float(start), float(end), **values)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"view effect {text!r} must look like KIND:START-END[:knob=value,...] (e.g. cover:40-80): {exc}"
        ) from None
