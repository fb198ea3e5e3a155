"""Compositing sprites into a frame with exact occlusion, tight labels and image effects.

Placement rule (documented contract of the generator): sprites are composited far to near.
An object is drawn and labelled only if at least ``min_visible`` of its drawn pixels are
visible (inside the frame and not covered by nearer objects or props) and its in-frame box is
at least ``min_size_px`` tall and ``min_width_frac * min_size_px`` wide (upright people are
thin: a walker with closed legs is about a sixth as wide as tall, and must not flicker in and
out of the labels from one stride to the next); otherwise it is not drawn at all. So every drawn
object is labelled, and its label is the tight box of all its drawn in-frame pixels, including
the parts covered by nearer objects (an amodal box: a person behind a car keeps the box down to
the feet). Partially visible objects are therefore at least ``min_visible`` visible.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from campusguard.data.synth.sprites import Sprite

__all__ = ["Placed", "RenderedObject", "compose", "NoiseBank", "apply_effects"]


@dataclass(frozen=True)
class Placed:
    """A sprite standing on pixel ``(u, v)`` (its ground point) at ``depth_m``.

    ``class_id`` is a COCO id, or ``-1`` for unlabelled props; ``key`` identifies the object
    (a track id in videos).
    """

    sprite: Sprite
    u: float
    v: float
    depth_m: float
    class_id: int
    key: int


@dataclass(frozen=True)
class RenderedObject:
    """A drawn, labelled object.

    Attributes:
        key: object key (track id in videos).
        class_id: COCO class id.
        xyxy: tight box of the drawn in-frame pixels, pixel edges (x2, y2 exclusive), float.
        visible_fraction: drawn pixels not covered by nearer sprites and inside the frame, 0..1.
    """

    key: int
    class_id: int
    xyxy: tuple[float, float, float, float]
    visible_fraction: float


def _origin(p: Placed) -> tuple[int, int]:
    return int(round(p.u)) - p.sprite.anchor_xy[0], int(round(p.v)) - p.sprite.anchor_xy[1]


def compose(
    frame: np.ndarray,
    items: list[Placed],
    *,
    min_visible: float = 0.4,
    min_size_px: float = 12.0,
    min_width_frac: float = 0.5,
    shadows: bool = True,
    instance_map: np.ndarray | None = None,
) -> list[RenderedObject]:
    """Draw ``items`` into ``frame`` (in place) and return the labels of the drawn objects.

    Args:
        frame: ``(H, W, 3) uint8`` BGR background, modified in place.
        items: sprites to draw; props (``class_id == -1``) are always drawn.
        min_visible: objects with a smaller visible fraction of their pixels are not drawn.
        min_size_px: objects whose in-frame box is less tall than this are not drawn.
        min_width_frac: objects whose in-frame box is narrower than ``min_width_frac * min_size_px``
            are not drawn.
        shadows: draw a dark ellipse on the ground under each drawn object (never labelled).
        instance_map: optional ``(H, W) int32`` array filled with ``index in items + 1`` of the
            sprite visible at each pixel (0 for background); for tests.
    Returns:
        labels of the drawn objects, in the order of ``items``.
    """
    H, W = frame.shape[:2]
    occupied = np.zeros((H, W), bool)
    order = sorted(range(len(items)), key=lambda i: (items[i].depth_m, i))  # near first
    keep: dict[int, RenderedObject | None] = {}
    for i in order:
        p = items[i]
        alpha = p.sprite.bgra[..., 3] > 0
        x0, y0 = _origin(p)
        h, w = alpha.shape
        ax0, ay0, ax1, ay1 = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
        if ax0 >= ax1 or ay0 >= ay1:
            continue
        sub = alpha[ay0 - y0 : ay1 - y0, ax0 - x0 : ax1 - x0]
        occ = occupied[ay0:ay1, ax0:ax1]
        if p.class_id < 0:
            occ |= sub
            keep[i] = None
            continue
        total = int(np.count_nonzero(alpha))
        if total == 0:
            continue
        visible = int(np.count_nonzero(sub & ~occ))
        rows, cols = np.flatnonzero(sub.any(axis=1)), np.flatnonzero(sub.any(axis=0))
        if len(rows) == 0:
            continue
        bx1, bx2 = ax0 + cols[0], ax0 + cols[-1] + 1
        by1, by2 = ay0 + rows[0], ay0 + rows[-1] + 1
        frac = visible / total
        if frac < min_visible or (bx2 - bx1) < min_width_frac * min_size_px or (by2 - by1) < min_size_px:
            continue
        occ |= sub
        keep[i] = RenderedObject(p.key, p.class_id, (float(bx1), float(by1), float(bx2), float(by2)), frac)
    drawn = sorted(keep, key=lambda i: (-items[i].depth_m, -i))  # far first
    if shadows:
        for i in drawn:
            p = items[i]
            if p.class_id < 0:
                continue
            w = p.sprite.bgra.shape[1]
            u, v = int(round(p.u)), int(round(p.v))
            if 0 <= v < H and 0 <= u < W:
                col = tuple(int(c * 0.55) for c in frame[v, u])
                cv2.ellipse(frame, (u, v), (max(2, int(w * 0.45)), max(1, int(w * 0.06))), 0, 0, 360, col, -1)
    for i in drawn:
        p = items[i]
        x0, y0 = _origin(p)
        bgra = p.sprite.bgra
        h, w = bgra.shape[:2]
        ax0, ay0, ax1, ay1 = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
        sub = bgra[ay0 - y0 : ay1 - y0, ax0 - x0 : ax1 - x0]
        mask = sub[..., 3] > 0
        np.copyto(frame[ay0:ay1, ax0:ax1], sub[..., :3], where=mask[..., None])
        if instance_map is not None:
            instance_map[ay0:ay1, ax0:ax1][mask] = i + 1
    return [obj for i, obj in sorted(keep.items()) if obj is not None]


class NoiseBank:
    """Pre-computed Gaussian noise tiles (positive and negative parts as ``uint8``) for fast noise.

    Adding noise is two saturating ``uint8`` operations on a randomly offset window of a tile,
    instead of float arithmetic on the whole frame.
    """

    def __init__(self, seed: int, shape_hw: tuple[int, int], sigmas: tuple[float, ...] = (3.0, 6.0, 10.0)) -> None:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6E6F697365]))
        H, W = shape_hw
        self.pad = 64
        self.tiles: list[tuple[np.ndarray, np.ndarray]] = []
        for s in sigmas:
            n = rng.normal(0.0, s, (H + self.pad, W + self.pad, 3)).round()
            self.tiles.append((np.clip(n, 0, 255).astype(np.uint8), np.clip(-n, 0, 255).astype(np.uint8)))

    def add(self, img: np.ndarray, rng: np.random.Generator, level: int) -> None:
        """Add noise tile ``level`` to ``img`` in place at a random offset."""
        H, W = img.shape[:2]
        pos, neg = self.tiles[level]
        oy, ox = int(rng.integers(0, self.pad)), int(rng.integers(0, self.pad))
        cv2.add(img, pos[oy : oy + H, ox : ox + W], dst=img)
        cv2.subtract(img, neg[oy : oy + H, ox : ox + W], dst=img)


def apply_effects(
    img: np.ndarray,
    rng: np.random.Generator,
    noise: NoiseBank,
    *,
    p_blur: float = 0.3,
    p_noise: float = 0.5,
    p_tone: float = 0.5,
) -> np.ndarray:
    """Camera effects on a ``(H, W, 3) uint8`` frame: tone jitter, blur, sensor noise.

    Returns the processed frame (may be a new array). JPEG artefacts come from the encoder.
    """
    if rng.random() < p_tone:
        img = cv2.convertScaleAbs(img, alpha=float(rng.uniform(0.8, 1.2)), beta=float(rng.uniform(-20, 20)))
    if rng.random() < p_blur:
        if rng.random() < 0.5:
            k = int(rng.choice([3, 5]))
            img = cv2.GaussianBlur(img, (k, k), 0)
        else:
            k = int(rng.integers(3, 8))
            kernel = np.zeros((k, k), np.float32)
            kernel[k // 2, :] = 1.0 / k
            if rng.random() < 0.5:
                kernel = kernel.T.copy()
            img = cv2.filter2D(img, -1, kernel)
    if rng.random() < p_noise:
        noise.add(img, rng, int(rng.integers(0, len(noise.tiles))))
    return img
