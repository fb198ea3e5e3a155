"""Procedural object sprites drawn with OpenCV primitives on small BGRA canvases.

Each sprite is a ``(h, w, 4) uint8`` BGRA patch whose alpha channel is exactly the set of drawn
pixels (no anti-aliasing), plus the anchor pixel that stands on the ground point. Labels are
computed from that alpha channel, so boxes are tight around what is drawn. Sizes are given in
pixels per metre (`px_per_m`); vehicles are drawn facing right and mirrored for ``"left"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from campusguard.data.synth.classes import BICYCLE, BUS, CAR, MOTORCYCLE, PERSON, TRUCK
from campusguard.data.synth.lighting import Color, Lighting, shade

__all__ = [
    "Sprite",
    "Look",
    "random_look",
    "draw_object",
    "draw_prop",
    "draw_rider",
    "lying",
    "object_size_m",
    "PROP_KINDS",
    "VIEWS",
]

VIEWS = ("left", "right", "front", "back")
PROP_KINDS = ("tree", "lamp", "bush", "bench", "bollard", "bin", "cone")

_LINE = cv2.LINE_8  # exact masks: alpha is the drawn set, nothing half-transparent


@dataclass(frozen=True)
class Sprite:
    """A drawn object.

    Attributes:
        bgra: ``(h, w, 4) uint8`` patch; alpha 255 where drawn, 0 elsewhere.
        anchor_xy: pixel of the patch (column, row) that stands on the ground point.
    """

    bgra: np.ndarray
    anchor_xy: tuple[int, int]


@dataclass(frozen=True)
class Look:
    """Colours and shape variation of one object instance (BGR, before lighting)."""

    main: Color
    second: Color
    third: Color
    skin: Color
    glass: Color
    size: float  # multiplier on the nominal size
    extra: bool  # backpack for people, roof sign / stripe for vehicles


_SKINS: tuple[Color, ...] = ((170, 200, 240), (130, 170, 220), (90, 130, 190), (60, 90, 140), (45, 65, 100))
_HAIR: tuple[Color, ...] = ((20, 20, 25), (30, 45, 70), (40, 80, 140), (150, 170, 190), (60, 60, 60))
_PANTS: tuple[Color, ...] = ((90, 50, 30), (40, 40, 40), (110, 110, 110), (120, 160, 190), (60, 40, 30), (140, 90, 60))
_CAR_PAINT: tuple[Color, ...] = (
    (235, 235, 235),
    (30, 30, 30),
    (160, 160, 165),
    (40, 40, 180),
    (150, 80, 30),
    (60, 110, 40),
    (90, 200, 230),
    (120, 120, 120),
    (30, 30, 110),
    (200, 160, 120),
)
_BUS_PAINT: tuple[Color, ...] = ((20, 190, 240), (230, 230, 230), (160, 90, 30), (40, 40, 190), (60, 140, 60))
_GLASS_DAY: Color = (90, 75, 60)


def _random_color(rng: np.random.Generator, lo: int = 30, hi: int = 230) -> Color:
    hsv = np.array([[[int(rng.integers(0, 180)), int(rng.integers(60, 230)), int(rng.integers(lo, hi))]]], np.uint8)
    b, g, r = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0]
    return (int(b), int(g), int(r))


def _pick(rng: np.random.Generator, palette: Sequence[Color]) -> Color:
    return palette[int(rng.integers(0, len(palette)))]


def random_look(rng: np.random.Generator, class_id: int) -> Look:
    """Random colours and size variation for an object of COCO class ``class_id``."""
    if class_id == PERSON:
        main = _random_color(rng)
        return Look(
            main,
            _pick(rng, _PANTS),
            _pick(rng, _HAIR),
            _pick(rng, _SKINS),
            _GLASS_DAY,
            float(rng.uniform(0.9, 1.1)),
            bool(rng.random() < 0.35),
        )
    if class_id == BUS:
        main = _pick(rng, _BUS_PAINT)
    elif class_id in (BICYCLE, MOTORCYCLE):
        main = _random_color(rng, 60, 230)
    else:
        main = _pick(rng, _CAR_PAINT) if rng.random() < 0.8 else _random_color(rng)
    second = _pick(rng, _CAR_PAINT) if class_id == TRUCK else (40, 40, 40)
    gb, gg, gr = np.clip(np.array(_GLASS_DAY) + rng.integers(-20, 30, 3), 0, 255)
    glass: Color = (int(gb), int(gg), int(gr))
    return Look(
        main,
        second,
        (25, 25, 25),
        (200, 200, 200),
        glass,
        float(rng.uniform(0.92, 1.08)),
        bool(rng.random() < 0.5),
    )


def object_size_m(class_id: int, view: str) -> tuple[float, float]:
    """Nominal ``(width, height)`` in metres of an object of ``class_id`` seen from ``view``."""
    side = view in ("left", "right")
    sizes = {
        PERSON: ((0.55, 1.72), (0.5, 1.72)),
        BICYCLE: ((1.75, 1.05), (0.6, 1.05)),
        CAR: ((4.4, 1.45), (1.8, 1.45)),
        MOTORCYCLE: ((2.1, 1.15), (0.8, 1.15)),
        BUS: ((12.0, 3.2), (2.55, 3.2)),
        TRUCK: ((7.5, 3.3), (2.5, 3.3)),
    }
    return sizes[class_id][0 if side else 1]


class _Canvas:
    """BGRA canvas addressed in fractions of its width and height."""

    def __init__(self, w: int, h: int, light: Lighting) -> None:
        self.w, self.h = max(w, 2), max(h, 2)
        self.img = np.zeros((self.h, self.w, 4), np.uint8)
        self.light = light

    def c(self, color: Color, emissive: bool = False) -> tuple[int, int, int, int]:
        b, g, r = color if emissive else shade(color, self.light)
        return (b, g, r, 255)

    def p(self, fx: float, fy: float) -> tuple[int, int]:
        return (int(round(fx * (self.w - 1))), int(round(fy * (self.h - 1))))

    def poly(self, pts: Sequence[tuple[float, float]], color: Color, emissive: bool = False) -> None:
        arr = np.array([self.p(x, y) for x, y in pts], np.int32)
        cv2.fillPoly(self.img, [arr], self.c(color, emissive), _LINE)

    def rect(self, x1: float, y1: float, x2: float, y2: float, color: Color, emissive: bool = False) -> None:
        cv2.rectangle(self.img, self.p(x1, y1), self.p(x2, y2), self.c(color, emissive), -1, _LINE)

    def line(self, a: tuple[float, float], b: tuple[float, float], color: Color, thick_px: float) -> None:
        cv2.line(self.img, self.p(*a), self.p(*b), self.c(color), max(1, int(round(thick_px))), _LINE)

    def circle(
        self, fx: float, fy: float, r_px: float, color: Color, thick_px: float = -1, emissive: bool = False
    ) -> None:
        t = -1 if thick_px < 0 else max(1, int(round(thick_px)))
        cv2.circle(self.img, self.p(fx, fy), max(1, int(round(r_px))), self.c(color, emissive), t, _LINE)

    def ellipse(self, fx: float, fy: float, ax_px: float, ay_px: float, color: Color, emissive: bool = False) -> None:
        cv2.ellipse(
            self.img,
            self.p(fx, fy),
            (max(1, int(round(ax_px))), max(1, int(round(ay_px)))),
            0,
            0,
            360,
            self.c(color, emissive),
            -1,
            _LINE,
        )


def _darker(c: Color, k: float = 0.6) -> Color:
    return (int(c[0] * k), int(c[1] * k), int(c[2] * k))


def _person(cv: _Canvas, look: Look, view: str, phase: float) -> None:
    h = cv.h
    side = view in ("left", "right")
    sw, hw = (0.075, 0.06) if side else (0.115, 0.09)
    sw, hw = sw * h / cv.w, hw * h / cv.w  # fractions of width
    leg_t, arm_t = 0.075 * h, 0.055 * h
    hip_y, sh_y = 0.52, 0.18
    swing = np.sin(phase)
    if side:
        stride = 0.15 * h / cv.w * swing
        arm = 0.12 * h / cv.w * swing
        if look.extra:
            cv.rect(0.5 - sw - 0.1 * h / cv.w, 0.2, 0.5 - sw + 0.02, 0.45, _darker(look.third, 1.5))
        cv.line((0.5, hip_y), (0.5 - stride, 0.97), _darker(look.second, 0.75), leg_t)
        cv.line((0.5, sh_y + 0.02), (0.5 + arm, 0.5), _darker(look.main, 0.7), arm_t)
        cv.poly([(0.5 - sw, sh_y), (0.5 + sw, sh_y), (0.5 + hw, hip_y + 0.02), (0.5 - hw, hip_y + 0.02)], look.main)
        cv.line((0.5, hip_y), (0.5 + stride, 0.97), look.second, leg_t)
        cv.line((0.5 + stride - 0.02, 0.985), (0.5 + stride + 0.06 * h / cv.w, 0.985), (30, 30, 30), 0.03 * h)
        cv.line((0.5, sh_y + 0.02), (0.5 - arm, 0.5), look.main, arm_t)
        cv.circle(0.5 - arm, 0.51, 0.03 * h, look.skin)
    else:
        lift = 0.03 * swing
        lx, rx = 0.5 - 0.045 * h / cv.w, 0.5 + 0.045 * h / cv.w
        cv.line((lx, hip_y), (lx - 0.01, 0.975 - max(lift, 0)), look.second, leg_t)
        cv.line((rx, hip_y), (rx + 0.01, 0.975 - max(-lift, 0)), look.second, leg_t)
        cv.line((lx - 0.01, 0.985 - max(lift, 0)), (lx - 0.02, 0.985 - max(lift, 0)), (30, 30, 30), 0.03 * h)
        cv.line((rx + 0.01, 0.985 - max(-lift, 0)), (rx + 0.02, 0.985 - max(-lift, 0)), (30, 30, 30), 0.03 * h)
        if look.extra and view == "back":
            pass
        cv.poly([(0.5 - sw, sh_y), (0.5 + sw, sh_y), (0.5 + hw, hip_y + 0.02), (0.5 - hw, hip_y + 0.02)], look.main)
        if look.extra and view == "back":
            cv.rect(0.5 - sw * 0.7, 0.21, 0.5 + sw * 0.7, 0.42, _darker(look.third, 1.5))
        ax = sw + 0.02 * h / cv.w
        cv.line((0.5 - ax, sh_y + 0.02), (0.5 - ax - 0.01, 0.5), _darker(look.main, 0.85), arm_t)
        cv.line((0.5 + ax, sh_y + 0.02), (0.5 + ax + 0.01, 0.5), _darker(look.main, 0.85), arm_t)
        cv.circle(0.5 - ax - 0.01, 0.51, 0.028 * h, look.skin)
        cv.circle(0.5 + ax + 0.01, 0.51, 0.028 * h, look.skin)
    cv.rect(0.5 - 0.025 * h / cv.w, 0.12, 0.5 + 0.025 * h / cv.w, 0.19, look.skin)
    cv.circle(0.5, 0.075, 0.068 * h, look.third if view == "back" else look.skin)
    if view != "back":
        cv.ellipse(0.5, 0.05, 0.066 * h, 0.035 * h, look.third)


def _wheel(cv: _Canvas, fx: float, fy: float, r_px: float, hub: Color = (150, 150, 150)) -> None:
    cv.circle(fx, fy, r_px, (25, 25, 25))
    cv.circle(fx, fy, r_px * 0.45, hub)


def _lamp(night: bool, base: Color) -> tuple[Color, bool]:
    return ((210, 250, 255), True) if night else (base, False)


def _car_side(cv: _Canvas, look: Look, night: bool) -> None:
    body = [
        (0.0, 0.45),
        (0.03, 0.36),
        (0.22, 0.33),
        (0.34, 0.05),
        (0.70, 0.05),
        (0.84, 0.34),
        (0.98, 0.40),
        (1.0, 0.55),
        (0.99, 0.78),
        (0.0, 0.78),
    ]
    cv.poly(body, look.main)
    cv.poly([(0.37, 0.12), (0.52, 0.12), (0.52, 0.33), (0.29, 0.33)], look.glass)
    cv.poly([(0.55, 0.12), (0.68, 0.12), (0.78, 0.33), (0.55, 0.33)], look.glass)
    cv.rect(0.0, 0.70, 1.0, 0.78, (40, 40, 40))
    cv.line((0.535, 0.36), (0.535, 0.68), _darker(look.main), 1)
    col, em = _lamp(night, (200, 230, 240))
    cv.rect(0.95, 0.42, 0.995, 0.5, col, em)
    cv.rect(0.0, 0.4, 0.03, 0.5, (30, 30, 200), night)
    _wheel(cv, 0.2, 0.78, 0.21 * cv.h)
    _wheel(cv, 0.8, 0.78, 0.21 * cv.h)


def _car_end(cv: _Canvas, look: Look, front: bool, night: bool) -> None:
    cv.poly([(0.15, 0.05), (0.85, 0.05), (0.97, 0.4), (0.03, 0.4)], look.main)
    cv.poly([(0.2, 0.1), (0.8, 0.1), (0.9, 0.38), (0.1, 0.38)], look.glass)
    cv.rect(0.0, 0.38, 1.0, 0.85, look.main)
    cv.rect(0.05, 0.8, 0.2, 1.0, (25, 25, 25))
    cv.rect(0.8, 0.8, 0.95, 1.0, (25, 25, 25))
    cv.rect(0.0, 0.72, 1.0, 0.8, (40, 40, 40))
    cv.rect(0.4, 0.64, 0.6, 0.72, (230, 230, 230))
    if front:
        col, em = _lamp(night, (210, 230, 240))
        cv.ellipse(0.15, 0.5, 0.08 * cv.w, 0.05 * cv.h, col, em)
        cv.ellipse(0.85, 0.5, 0.08 * cv.w, 0.05 * cv.h, col, em)
        cv.rect(0.33, 0.47, 0.67, 0.6, (35, 35, 35))
    else:
        cv.rect(0.04, 0.45, 0.22, 0.55, (30, 30, 210), night)
        cv.rect(0.78, 0.45, 0.96, 0.55, (30, 30, 210), night)


def _bus_side(cv: _Canvas, look: Look, night: bool) -> None:
    cv.rect(0.0, 0.02, 1.0, 0.88, look.main)
    cv.rect(0.0, 0.6, 1.0, 0.66, _darker(look.main, 0.7) if look.extra else (230, 230, 230))
    n = 7
    glass = (90, 200, 230) if night else look.glass
    for i in range(n):
        x0 = 0.05 + i * (0.8 / n)
        cv.rect(x0, 0.15, x0 + 0.8 / n - 0.015, 0.5, glass, night)
    cv.rect(0.87, 0.15, 0.93, 0.84, look.glass)
    cv.rect(0.955, 0.1, 1.0, 0.55, look.glass)
    cv.rect(0.86, 0.04, 0.99, 0.1, (20, 20, 20))
    cv.rect(0.88, 0.05, 0.97, 0.09, (0, 170, 255), True)
    col, em = _lamp(night, (210, 230, 240))
    cv.rect(0.985, 0.7, 1.0, 0.78, col, em)
    _wheel(cv, 0.17, 0.87, 0.13 * cv.h, (120, 120, 120))
    _wheel(cv, 0.82, 0.87, 0.13 * cv.h, (120, 120, 120))


def _bus_end(cv: _Canvas, look: Look, front: bool, night: bool) -> None:
    cv.rect(0.0, 0.02, 1.0, 0.92, look.main)
    cv.rect(0.06, 0.03, 0.94, 0.1, (20, 20, 20))
    if front:
        cv.rect(0.2, 0.045, 0.8, 0.085, (0, 170, 255), True)
        cv.rect(0.06, 0.13, 0.94, 0.55, look.glass)
        col, em = _lamp(night, (210, 230, 240))
        cv.rect(0.06, 0.74, 0.2, 0.8, col, em)
        cv.rect(0.8, 0.74, 0.94, 0.8, col, em)
    else:
        cv.rect(0.15, 0.15, 0.85, 0.4, look.glass)
        cv.rect(0.2, 0.5, 0.8, 0.7, _darker(look.main, 0.5))
        cv.rect(0.05, 0.72, 0.15, 0.82, (30, 30, 210), night)
        cv.rect(0.85, 0.72, 0.95, 0.82, (30, 30, 210), night)
    cv.rect(0.0, 0.84, 1.0, 0.9, (40, 40, 40))
    cv.rect(0.05, 0.88, 0.18, 1.0, (25, 25, 25))
    cv.rect(0.82, 0.88, 0.95, 1.0, (25, 25, 25))


def _truck_side(cv: _Canvas, look: Look, night: bool) -> None:
    cv.rect(0.0, 0.0, 0.74, 0.8, look.second)
    if look.extra:
        cv.rect(0.05, 0.25, 0.69, 0.45, _darker(look.second, 0.6))
    cv.poly([(0.76, 0.3), (0.93, 0.3), (1.0, 0.5), (1.0, 0.85), (0.76, 0.85)], look.main)
    cv.poly([(0.8, 0.35), (0.92, 0.35), (0.97, 0.52), (0.8, 0.52)], look.glass)
    cv.rect(0.0, 0.8, 1.0, 0.86, (35, 35, 35))
    col, em = _lamp(night, (210, 230, 240))
    cv.rect(0.985, 0.66, 1.0, 0.74, col, em)
    for fx in (0.12, 0.25, 0.87):
        _wheel(cv, fx, 0.87, 0.13 * cv.h, (130, 130, 130))


def _truck_end(cv: _Canvas, look: Look, front: bool, night: bool) -> None:
    cv.rect(0.0, 0.0, 1.0, 0.55, look.second)
    if front:
        cv.rect(0.05, 0.3, 0.95, 0.9, look.main)
        cv.rect(0.12, 0.36, 0.88, 0.58, look.glass)
        cv.rect(0.3, 0.64, 0.7, 0.8, (35, 35, 35))
        col, em = _lamp(night, (210, 230, 240))
        cv.rect(0.07, 0.7, 0.22, 0.78, col, em)
        cv.rect(0.78, 0.7, 0.93, 0.78, col, em)
    else:
        cv.rect(0.0, 0.0, 1.0, 0.85, look.second)
        cv.line((0.5, 0.03), (0.5, 0.82), _darker(look.second), max(1, 0.01 * cv.w))
        cv.rect(0.03, 0.72, 0.13, 0.8, (30, 30, 210), night)
        cv.rect(0.87, 0.72, 0.97, 0.8, (30, 30, 210), night)
    cv.rect(0.0, 0.85, 1.0, 0.9, (35, 35, 35))
    cv.rect(0.06, 0.88, 0.2, 1.0, (25, 25, 25))
    cv.rect(0.8, 0.88, 0.94, 1.0, (25, 25, 25))


def _motorcycle_side(cv: _Canvas, look: Look, night: bool) -> None:
    r = 0.24 * cv.h
    for fx in (0.17, 0.83):
        cv.circle(fx, 0.75, r, (25, 25, 25))
        cv.circle(fx, 0.75, r * 0.55, (110, 110, 110))
        cv.circle(fx, 0.75, r * 0.2, (40, 40, 40))
    cv.line((0.83, 0.75), (0.72, 0.2), (150, 150, 150), 0.05 * cv.h)
    cv.rect(0.38, 0.5, 0.6, 0.74, (55, 55, 55))
    cv.line((0.2, 0.72), (0.55, 0.7), (170, 170, 170), 0.05 * cv.h)
    cv.poly([(0.3, 0.45), (0.45, 0.33), (0.62, 0.36), (0.68, 0.47), (0.3, 0.52)], look.main)
    cv.poly([(0.1, 0.42), (0.32, 0.4), (0.32, 0.48), (0.12, 0.5)], (30, 30, 30))
    cv.poly([(0.05, 0.5), (0.2, 0.45), (0.25, 0.55)], look.main)
    cv.line((0.66, 0.16), (0.8, 0.14), (40, 40, 40), 0.05 * cv.h)
    col, em = _lamp(night, (200, 220, 230))
    cv.circle(0.82, 0.32, 0.07 * cv.h, col, emissive=em)


def _motorcycle_end(cv: _Canvas, look: Look, front: bool, night: bool) -> None:
    cv.ellipse(0.5, 0.76, 0.1 * cv.w, 0.24 * cv.h, (25, 25, 25))
    cv.poly([(0.3, 0.3), (0.7, 0.3), (0.62, 0.6), (0.38, 0.6)], look.main)
    cv.line((0.02, 0.22), (0.98, 0.22), (40, 40, 40), 0.04 * cv.h)
    cv.line((0.08, 0.22), (0.06, 0.08), (40, 40, 40), 0.03 * cv.h)
    cv.line((0.92, 0.22), (0.94, 0.08), (40, 40, 40), 0.03 * cv.h)
    if front:
        col, em = _lamp(night, (200, 220, 230))
        cv.circle(0.5, 0.38, 0.07 * cv.h, col, emissive=em)
        cv.poly([(0.35, 0.1), (0.65, 0.1), (0.62, 0.3), (0.38, 0.3)], look.glass)
    else:
        cv.rect(0.4, 0.4, 0.6, 0.48, (30, 30, 210), night)
        cv.rect(0.32, 0.2, 0.68, 0.3, (30, 30, 30))


def _bicycle_side(cv: _Canvas, look: Look) -> None:
    r = 0.33 * cv.h
    t = max(1.0, 0.035 * cv.h)
    for fx in (0.2, 0.8):
        cv.circle(fx, 0.66, r, (25, 25, 25), t)
        cv.circle(fx, 0.66, max(1.0, 0.04 * cv.h), (120, 120, 120))
    ft = max(1.0, 0.045 * cv.h)
    rear, bb, seat, head = (0.2, 0.66), (0.46, 0.68), (0.38, 0.26), (0.72, 0.28)
    for a, b in ((rear, bb), (bb, seat), (seat, rear), (seat, head), (bb, head), (head, (0.8, 0.66))):
        cv.line(a, b, look.main, ft)
    cv.line((0.72, 0.28), (0.7, 0.12), (60, 60, 60), ft)
    cv.line((0.66, 0.12), (0.8, 0.12), (30, 30, 30), ft)
    cv.line((0.31, 0.2), (0.44, 0.2), (30, 30, 30), 1.5 * ft)
    cv.line((0.38, 0.26), (0.38, 0.2), (60, 60, 60), ft)


def _bicycle_end(cv: _Canvas, look: Look) -> None:
    t = max(1.0, 0.04 * cv.h)
    cv.line((0.5, 0.35), (0.5, 1.0), (25, 25, 25), 2 * t)
    cv.line((0.5, 0.15), (0.5, 0.7), look.main, 2 * t)
    cv.line((0.05, 0.14), (0.95, 0.14), (40, 40, 40), t)
    cv.line((0.4, 0.3), (0.6, 0.3), (30, 30, 30), 2 * t)


def draw_object(class_id: int, px_per_m: float, view: str, look: Look, light: Lighting, phase: float = 0.0) -> Sprite:
    """Draw one object of COCO class ``class_id`` at ``px_per_m`` pixels per metre.

    Args:
        class_id: one of `SYNTH_CLASS_IDS`.
        px_per_m: scale at the object's depth (`Camera.px_per_m`).
        view: ``"left"``/``"right"`` (side view, facing that way), ``"front"`` or ``"back"``.
        look: colours and size variation (`random_look`).
        light: lighting the diffuse colours are shaded with.
        phase: walking phase in radians (people only).
    Returns:
        the sprite; its anchor is the bottom-centre of the canvas (the ground contact point).
    """
    w_m, h_m = object_size_m(class_id, view)
    s = px_per_m * look.size
    cw = int(round((w_m + (0.35 if class_id == PERSON else 0.0)) * s)) + 2
    cv = _Canvas(cw, int(round(h_m * s)) + 1, light)
    night = light.night
    side = view in ("left", "right")
    front = view == "front"
    draw: dict[int, Callable[[], None]] = {
        PERSON: lambda: _person(cv, look, view, phase),
        CAR: lambda: _car_side(cv, look, night) if side else _car_end(cv, look, front, night),
        BUS: lambda: _bus_side(cv, look, night) if side else _bus_end(cv, look, front, night),
        TRUCK: lambda: _truck_side(cv, look, night) if side else _truck_end(cv, look, front, night),
        MOTORCYCLE: lambda: _motorcycle_side(cv, look, night) if side else _motorcycle_end(cv, look, front, night),
        BICYCLE: lambda: _bicycle_side(cv, look) if side else _bicycle_end(cv, look),
    }
    draw[class_id]()
    img: np.ndarray = cv.img
    if view == "left":
        img = cv2.flip(img, 1)
    return Sprite(img, (img.shape[1] // 2, img.shape[0] - 1))


def lying(sprite: Sprite) -> Sprite:
    """The sprite turned a quarter (head to the right): a person lying on the ground, anchored
    at the bottom-centre of the turned patch."""
    img = np.ascontiguousarray(cv2.rotate(sprite.bgra, cv2.ROTATE_90_CLOCKWISE))
    return Sprite(img, (img.shape[1] // 2, img.shape[0] - 1))


def prop_height_m(kind: str) -> float:
    """Nominal height in metres of a prop of ``kind``."""
    return {"tree": 5.5, "lamp": 4.5, "bush": 1.0, "bench": 0.9, "bollard": 0.9, "bin": 1.0, "cone": 0.7}[kind]


def draw_prop(kind: str, px_per_m: float, rng: np.random.Generator, light: Lighting) -> Sprite:
    """Draw an unlabelled scene prop (tree, lamp post, bush, bench, bollard, bin, cone).

    Props occlude objects like any other sprite but are never labelled; lamp posts and bollards
    are deliberately person-like thin verticals so the detector learns to reject them.
    """
    h_m = prop_height_m(kind) * float(rng.uniform(0.8, 1.25))
    s = px_per_m
    h = int(round(h_m * s)) + 1
    widths = {"tree": 3.2, "lamp": 0.9, "bush": 1.8, "bench": 1.8, "bollard": 0.3, "bin": 0.6, "cone": 0.45}
    cv = _Canvas(int(round(widths[kind] * s)) + 2, h, light)
    green = (int(rng.integers(30, 70)), int(rng.integers(110, 160)), int(rng.integers(40, 90)))
    if kind == "tree":
        cv.rect(0.45, 0.5, 0.55, 1.0, (40, 70, 100))
        for fx, fy, fr in ((0.5, 0.3, 0.28), (0.3, 0.42, 0.2), (0.7, 0.42, 0.2), (0.5, 0.15, 0.18)):
            cv.circle(fx, fy, fr * cv.h * 0.6, _darker(green, float(rng.uniform(0.7, 1.0))))
    elif kind == "lamp":
        cv.line((0.5, 0.05), (0.5, 1.0), (90, 90, 90), max(1.0, 0.12 * s))
        cv.line((0.5, 0.05), (0.85, 0.05), (90, 90, 90), max(1.0, 0.08 * s))
        col, em = ((180, 240, 255), True) if light.night else ((200, 200, 200), False)
        cv.ellipse(0.85, 0.07, 0.12 * cv.w, 0.02 * cv.h, col, em)
    elif kind == "bush":
        for fx, fy, fr in ((0.3, 0.6, 0.45), (0.7, 0.6, 0.45), (0.5, 0.45, 0.5)):
            cv.ellipse(fx, fy, fr * cv.w * 0.5, fr * cv.h, _darker(green, float(rng.uniform(0.6, 1.0))))
    elif kind == "bench":
        cv.rect(0.0, 0.2, 1.0, 0.4, (40, 80, 120))
        cv.rect(0.0, 0.5, 1.0, 0.6, (40, 80, 120))
        cv.rect(0.08, 0.6, 0.13, 1.0, (50, 50, 50))
        cv.rect(0.87, 0.6, 0.92, 1.0, (50, 50, 50))
    elif kind == "bollard":
        cv.rect(0.1, 0.05, 0.9, 1.0, (70, 70, 75))
        cv.rect(0.1, 0.15, 0.9, 0.25, (30, 200, 230))
    elif kind == "bin":
        cv.rect(0.05, 0.1, 0.95, 1.0, (40, 90, 40))
        cv.rect(0.0, 0.0, 1.0, 0.12, (30, 60, 30))
    else:  # cone
        cv.poly([(0.5, 0.0), (0.95, 0.95), (0.05, 0.95)], (0, 120, 250))
        cv.rect(0.0, 0.9, 1.0, 1.0, (0, 100, 220))
        cv.rect(0.3, 0.4, 0.7, 0.55, (240, 240, 240))
    return Sprite(cv.img, (cv.w // 2, cv.h - 1))


# rider joints in metres, x forward from the vehicle's rear end, y up from the ground
_RIDER_POSE: dict[int, dict[str, tuple[float, float]]] = {
    BICYCLE: {
        "hip": (0.67, 0.95),
        "knee": (1.0, 0.66),
        "foot": (0.86, 0.28),
        "shoulder": (0.92, 1.45),
        "head": (1.02, 1.63),
        "hand": (1.28, 1.0),
    },
    MOTORCYCLE: {
        "hip": (0.55, 0.88),
        "knee": (0.98, 0.78),
        "foot": (0.9, 0.36),
        "shoulder": (0.86, 1.36),
        "head": (0.96, 1.54),
        "hand": (1.45, 1.02),
    },
}


def draw_rider(
    vehicle_class: int, px_per_m: float, view: str, look: Look, light: Lighting, vehicle_size: float = 1.0
) -> Sprite:
    """Draw a person riding a bicycle or motorcycle seen from the side (``view`` left or right).

    The sprite's anchor is the ground point under the vehicle's centre (it lies below the
    canvas), so the rider is placed with the same ground point as its vehicle.

    Args:
        vehicle_class: `BICYCLE` or `MOTORCYCLE`.
        px_per_m: scale at the vehicle's depth.
        view: ``"left"`` or ``"right"``: the direction the vehicle faces.
        look: the rider's colours (a person `Look`).
        light: lighting.
        vehicle_size: the vehicle's ``Look.size``, so the rider sits on it.
    """
    pose = _RIDER_POSE[vehicle_class]
    length_m = object_size_m(vehicle_class, "right")[0] * vehicle_size
    s = px_per_m * vehicle_size
    head_r = 0.12
    x0, x1 = 0.4, 1.62 if vehicle_class == MOTORCYCLE else 1.42
    top = pose["head"][1] + head_r + 0.02
    bottom = pose["foot"][1] - 0.08
    w, h = int(round((x1 - x0) * s)) + 2, int(round((top - bottom) * s)) + 2
    cv = _Canvas(w, h, light)

    def p(name: str) -> tuple[float, float]:
        x, y = pose[name]
        return ((x - x0) / (x1 - x0), (top - y) / (top - bottom))

    helmet = look.main if vehicle_class == MOTORCYCLE else look.third
    cv.line(p("hip"), p("knee"), look.second, 0.15 * s)
    cv.line(p("knee"), p("foot"), look.second, 0.12 * s)
    cv.line(p("hip"), p("shoulder"), look.main, 0.3 * s)
    cv.line(p("shoulder"), p("hand"), _darker(look.main, 0.8), 0.09 * s)
    hx, hy = p("hand")
    cv.circle(hx, hy, 0.05 * s, look.skin)
    fx, fy = p("foot")
    cv.line((fx - 0.02, fy), (fx + 0.12 * s / w, fy), (30, 30, 30), 0.05 * s)
    cx, cy = p("head")
    cv.circle(cx, cy, head_r * s, look.skin)
    cv.ellipse(cx - 0.02, cy - 0.35 * head_r * s / h, head_r * s, 0.7 * head_r * s, helmet)
    img: np.ndarray = cv.img
    ax = int(round((length_m / 2 - x0) * s))
    ay = int(round(top * s))
    if view == "left":
        img = cv2.flip(img, 1)
        ax = img.shape[1] - 1 - ax
    return Sprite(img, (ax, ay))
