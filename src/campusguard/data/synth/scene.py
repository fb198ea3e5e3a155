"""Static campus scenery: layouts in ground-plane metres and their pre-rendered backgrounds.

A `Layout` lists ground patches (lawn, roads, sidewalks, paths, parking, the marked fire lane,
a hazard area), building fronts, fences and far props in world metres. `render_background`
draws it through a `Camera` under one `Lighting`; backgrounds are rendered once and reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from campusguard.data.synth.camera import Camera
from campusguard.data.synth.lighting import Color, Lighting, shade
from campusguard.data.synth.sprites import draw_prop

__all__ = ["Patch", "Building", "Layout", "random_layout", "render_background", "clip_polygon_z", "paste_sprite_opaque"]

XZ = tuple[float, float]


@dataclass(frozen=True)
class Patch:
    """A flat ground polygon in world metres ``(x, z)`` with a fill colour and a marking style.

    ``style``: ``"plain"``, ``"dashed_center"`` (road centre line along x), ``"hatch_red"``
    (fire lane), ``"hazard"`` (yellow/black border), ``"parking"`` (bay lines along x).
    """

    polygon: tuple[XZ, ...]
    color: Color
    style: str = "plain"


@dataclass(frozen=True)
class Building:
    """A building front facing the camera: ``x0..x1`` metres wide at depth ``z`` metres."""

    x0: float
    x1: float
    z: float
    height_m: float
    color: Color
    window_color: Color
    floors: int
    lit: tuple[bool, ...]  # per window cell at night, row-major; cycled


@dataclass(frozen=True)
class Layout:
    """Everything static in a scene, in world metres."""

    lawn: Color
    patches: tuple[Patch, ...]
    buildings: tuple[Building, ...]
    fences: tuple[tuple[XZ, XZ], ...]
    props: tuple[tuple[str, float, float], ...]  # (kind, x, z) far props drawn into the background
    far_z: float  # no object stands beyond this depth
    roads: tuple[tuple[float, float], ...] = field(default=())  # (z_near, z_far) bands of cross roads


def clip_polygon_z(poly: np.ndarray, z_min: float) -> np.ndarray:
    """Clip a ``(N, 2)`` world polygon ``(x, z)`` to the half plane ``z >= z_min`` (Sutherland-Hodgman)."""
    out: list[np.ndarray] = []
    n = len(poly)
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        ina, inb = a[1] >= z_min, b[1] >= z_min
        if ina:
            out.append(a)
        if ina != inb:
            t = (z_min - a[1]) / (b[1] - a[1])
            out.append(a + t * (b - a))
    return np.array(out, np.float64).reshape(-1, 2)


def _fill_world(
    img: np.ndarray, cam: Camera, poly: tuple[XZ, ...] | np.ndarray, color: tuple[int, int, int]
) -> np.ndarray:
    clipped = clip_polygon_z(np.asarray(poly, np.float64), cam.near_depth_m * 0.7)
    if len(clipped) < 3:
        return np.zeros((0, 2))
    uv = cam.project(clipped)
    cv2.fillPoly(img, [np.round(uv).astype(np.int32)], color, cv2.LINE_AA)
    return uv


def _line_world(img: np.ndarray, cam: Camera, a: XZ, b: XZ, color: tuple[int, int, int], thick: int) -> None:
    seg = clip_polygon_z(np.array([a, b, b], np.float64), cam.near_depth_m * 0.7)
    if len(seg) < 2:
        return
    uv = np.round(cam.project(seg)).astype(np.int32)
    cv2.line(img, tuple(uv[0]), tuple(uv[1 if len(uv) == 2 else -1]), color, thick, cv2.LINE_AA)


def random_layout(rng: np.random.Generator) -> Layout:
    """A random campus layout for still images (roads, paths, buildings, fence, fire lane...)."""
    lawn = (int(rng.integers(40, 80)), int(rng.integers(120, 160)), int(rng.integers(60, 100)))
    patches: list[Patch] = []
    roads: list[tuple[float, float]] = []
    asphalt = (int(rng.integers(70, 100)),) * 3
    walk = (int(rng.integers(150, 190)), int(rng.integers(160, 195)), int(rng.integers(165, 200)))
    far_z = float(rng.uniform(38, 60))
    if rng.random() < 0.5:  # paved plaza instead of lawn in the middle distance
        z0 = float(rng.uniform(6, 20))
        patches.append(Patch(((-80, z0), (80, z0), (80, z0 + rng.uniform(5, 20)), (-80, z0 + 8)), walk))
    for _ in range(int(rng.integers(1, 3))):
        zr = float(rng.uniform(8, far_z - 10))
        width = float(rng.uniform(6, 9))
        patches.append(Patch(((-200, zr - 2), (200, zr - 2), (200, zr + width + 2), (-200, zr + width + 2)), walk))
        style = "dashed_center"
        patches.append(Patch(((-200, zr), (200, zr), (200, zr + width), (-200, zr + width)), asphalt, style))
        roads.append((zr, zr + width))
        if rng.random() < 0.5:
            x0 = float(rng.uniform(-12, 4))
            patches.append(
                Patch(
                    ((x0, zr + 0.2), (x0 + rng.uniform(6, 12), zr + 0.2), (x0 + 10, zr + 2.6), (x0, zr + 2.6)),
                    (60, 60, 200),
                    "hatch_red",
                )
            )
    if rng.random() < 0.6:  # road or path going into depth
        xr = float(rng.uniform(-10, 8))
        wr = float(rng.uniform(2.5, 7))
        color = asphalt if wr > 5 else walk
        patches.append(Patch(((xr, 3), (xr + wr, 3), (xr + wr + rng.uniform(-6, 6), far_z), (xr, far_z)), color))
    for _ in range(int(rng.integers(0, 3))):  # diagonal footpaths
        xa, xb = float(rng.uniform(-8, 8)), float(rng.uniform(-25, 25))
        patches.append(Patch(((xa, 3), (xa + 2.5, 3), (xb + 2.5, far_z), (xb, far_z)), walk))
    if rng.random() < 0.4:  # parking lot
        x0, z0 = float(rng.uniform(-20, 5)), float(rng.uniform(10, 30))
        patches.append(Patch(((x0, z0), (x0 + 18, z0), (x0 + 18, z0 + 6), (x0, z0 + 6)), asphalt, "parking"))
    if rng.random() < 0.4:  # construction / hazard area
        x0, z0 = float(rng.uniform(-10, 6)), float(rng.uniform(8, 25))
        patches.append(Patch(((x0, z0), (x0 + 4, z0), (x0 + 4, z0 + 3), (x0, z0 + 3)), (70, 110, 140), "hazard"))
    buildings = _random_buildings(rng, far_z)
    fences: list[tuple[XZ, XZ]] = []
    if rng.random() < 0.6:
        if rng.random() < 0.5:
            xf = float(rng.uniform(-10, 10))
            fences.append(((xf, float(rng.uniform(5, 10))), (xf, float(rng.uniform(15, far_z)))))
        else:
            zf = float(rng.uniform(10, far_z - 3))
            fences.append(((float(rng.uniform(-40, 0)), zf), (float(rng.uniform(2, 40)), zf)))
    props: list[tuple[str, float, float]] = []
    for _ in range(int(rng.integers(4, 12))):
        z = float(rng.uniform(far_z - 6, far_z - 1))
        props.append((str(rng.choice(["tree", "tree", "lamp", "bush"])), float(rng.uniform(-30, 30)), z))
    return Layout(lawn, tuple(patches), buildings, tuple(fences), tuple(props), far_z - 1.0, tuple(roads))


def _random_buildings(rng: np.random.Generator, far_z: float) -> tuple[Building, ...]:
    out: list[Building] = []
    x = float(rng.uniform(-70, -45))
    while x < 70:
        w = float(rng.uniform(12, 40))
        if rng.random() < 0.8:
            c = int(rng.integers(110, 220))
            color = (c - int(rng.integers(0, 40)), c - int(rng.integers(0, 30)), c)
            floors = int(rng.integers(2, 7))
            lit = tuple(bool(v) for v in rng.random(64) < 0.45)
            out.append(
                Building(
                    x,
                    x + w,
                    far_z + float(rng.uniform(0, 8)),
                    floors * 3.5 + 1.0,
                    color,
                    (int(rng.integers(90, 140)), int(rng.integers(80, 120)), 70),
                    floors,
                    lit,
                )
            )
        x += w + float(rng.uniform(0, 8))
    return tuple(out)


def paste_sprite_opaque(img: np.ndarray, bgra: np.ndarray, x0: int, y0: int) -> None:
    """Copy the drawn pixels of a BGRA patch into ``img`` with its top-left at ``(x0, y0)``."""
    h, w = bgra.shape[:2]
    H, W = img.shape[:2]
    ax0, ay0, ax1, ay1 = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
    if ax0 >= ax1 or ay0 >= ay1:
        return
    sub = bgra[ay0 - y0 : ay1 - y0, ax0 - x0 : ax1 - x0]
    np.copyto(img[ay0:ay1, ax0:ax1], sub[..., :3], where=sub[..., 3:4] > 0)


def render_background(layout: Layout, cam: Camera, light: Lighting, rng: np.random.Generator) -> np.ndarray:
    """Render the static scene: ``(H, W, 3) uint8`` BGR.

    Args:
        layout: scenery in world metres.
        cam: camera to draw through.
        light: lighting variant; diffuse colours are shaded, lamps and lit windows glow at night.
        rng: random generator for texture noise and prop variation.
    """
    H, W = cam.height, cam.width
    img = np.empty((H, W, 3), np.uint8)
    hz = int(np.clip(round(cam.horizon_y), 0, H))
    if hz > 0:
        t = np.linspace(0.0, 1.0, hz, dtype=np.float32)[:, None]
        sky = (1 - t) * np.array(light.sky_top, np.float32) + t * np.array(light.sky_horizon, np.float32)
        img[:hz] = sky[:, None, :].astype(np.uint8)
    img[hz:] = shade(layout.lawn, light)
    # haze toward the horizon and grass texture
    if hz < H:
        noise = rng.normal(0.0, 7.0, (H - hz, W, 1)).astype(np.float32)
        ground = img[hz:].astype(np.float32) + noise
        img[hz:] = np.clip(ground, 0, 255).astype(np.uint8)
    # distant tree line on the horizon
    for x in range(-10, W + 10, 14):
        r = int(rng.integers(6, 14)) * W // 640
        cv2.circle(
            img, (x + int(rng.integers(-4, 4)), hz - r // 3), max(r, 2), shade((40, 90, 50), light), -1, cv2.LINE_AA
        )
    for patch in layout.patches:
        _draw_patch(img, cam, patch, light)
    for fence in layout.fences:
        _draw_fence(img, cam, fence, light)
    for b in sorted(layout.buildings, key=lambda b: -b.z):
        _draw_building(img, cam, b, light)
    for kind, px, pz in sorted(layout.props, key=lambda p: -p[2]):
        sp = draw_prop(kind, cam.px_per_m(pz), rng, light)
        u, v = cam.project(np.array([[px, pz]]))[0]
        paste_sprite_opaque(img, sp.bgra, int(round(u)) - sp.anchor_xy[0], int(round(v)) - sp.anchor_xy[1])
        if light.night and kind == "lamp":
            _glow(
                img,
                (int(round(u + 0.35 * sp.bgra.shape[1])), int(round(v)) - sp.anchor_xy[1]),
                max(6, sp.bgra.shape[0] // 4),
            )
    return img


def _glow(img: np.ndarray, center: tuple[int, int], radius: int) -> None:
    x, y = center
    H, W = img.shape[:2]
    x0, y0, x1, y1 = max(x - radius, 0), max(y - radius, 0), min(x + radius, W), min(y + radius, H)
    if x0 >= x1 or y0 >= y1:
        return
    yy, xx = np.mgrid[y0:y1, x0:x1]
    fall = np.clip(1.0 - np.hypot(xx - x, yy - y) / radius, 0, 1) ** 2
    roi = img[y0:y1, x0:x1].astype(np.float32)
    roi += fall[..., None] * np.array([90, 160, 200], np.float32)
    img[y0:y1, x0:x1] = np.clip(roi, 0, 255).astype(np.uint8)


def _draw_patch(img: np.ndarray, cam: Camera, patch: Patch, light: Lighting) -> None:
    uv = _fill_world(img, cam, patch.polygon, shade(patch.color, light))
    if len(uv) == 0:
        return
    poly = np.asarray(patch.polygon, np.float64)
    xs, zs = poly[:, 0], poly[:, 1]
    if patch.style == "dashed_center":
        zc = float((zs.min() + zs.max()) / 2)
        for x in np.arange(-60, 60, 6.0):
            _line_world(img, cam, (x, zc), (x + 3, zc), shade((230, 230, 230), light), 2)
        for zz in (zs.min() + 0.3, zs.max() - 0.3):
            _line_world(img, cam, (-200, zz), (200, zz), shade((210, 210, 210), light), 1)
    elif patch.style == "hatch_red":
        x0, x1, z0, z1 = xs.min(), xs.max(), zs.min(), zs.max()
        for x in np.arange(x0, x1, 1.0):
            _line_world(img, cam, (x, z0), (min(x + 1.2, x1), z1), shade((30, 220, 250), light), 2)
        for a, b in ((0, 1), (1, 2), (2, 3), (3, 0)):
            _line_world(img, cam, tuple(poly[a]), tuple(poly[b]), shade((20, 20, 220), light), 2)
        uvc = cam.project(np.array([[(x0 + x1) / 2 - 1.8, (z0 + z1) / 2]]))[0]
        scale = cam.px_per_m((z0 + z1) / 2) / 60
        cv2.putText(
            img,
            "FIRE LANE",
            (int(uvc[0]), int(uvc[1])),
            cv2.FONT_HERSHEY_SIMPLEX,
            max(scale, 0.25),
            shade((240, 240, 240), light),
            1,
            cv2.LINE_AA,
        )
    elif patch.style == "hazard":
        ring = list(poly) + [poly[0]]
        for a, b in zip(ring[:-1], ring[1:], strict=True):
            n = max(2, int(np.hypot(*(b - a)) / 0.5))
            for i in range(n):
                p, q = a + (b - a) * i / n, a + (b - a) * (i + 1) / n
                col = (0, 200, 250) if i % 2 == 0 else (20, 20, 20)
                _line_world(img, cam, tuple(p), tuple(q), shade(col, light), 3)
    elif patch.style == "parking":
        x0, x1, z0, z1 = xs.min(), xs.max(), zs.min(), zs.max()
        for x in np.arange(x0, x1 + 0.1, 2.6):
            _line_world(img, cam, (x, z0), (x, z1), shade((235, 235, 235), light), 1)


def _draw_fence(img: np.ndarray, cam: Camera, fence: tuple[XZ, XZ], light: Lighting) -> None:
    a, b = np.array(fence[0], np.float64), np.array(fence[1], np.float64)
    n = max(2, int(np.hypot(*(b - a)) / 2.5))
    post = shade((80, 80, 80), light)
    mesh_layer = img.copy()
    tops: list[tuple[float, float, float] | None] = []
    for i in range(n + 1):
        p = a + (b - a) * i / n
        if p[1] < cam.near_depth_m * 0.7:
            tops.append(None)
            continue
        u, v = cam.project(p[None])[0]
        hpx = 2.0 * cam.px_per_m(p[1])
        cv2.line(
            img, (int(u), int(v)), (int(u), int(v - hpx)), post, max(1, int(0.06 * cam.px_per_m(p[1]))), cv2.LINE_AA
        )
        tops.append((u, v, hpx))
    for t0, t1 in zip(tops[:-1], tops[1:], strict=True):
        if t0 is None or t1 is None:
            continue
        quad = np.array([[t0[0], t0[1]], [t1[0], t1[1]], [t1[0], t1[1] - t1[2]], [t0[0], t0[1] - t0[2]]], np.int32)
        cv2.fillPoly(mesh_layer, [quad], shade((150, 150, 150), light), cv2.LINE_AA)
        cv2.line(img, (int(t0[0]), int(t0[1] - t0[2])), (int(t1[0]), int(t1[1] - t1[2])), post, 2, cv2.LINE_AA)
    cv2.addWeighted(mesh_layer, 0.35, img, 0.65, 0, dst=img)


def _draw_building(img: np.ndarray, cam: Camera, b: Building, light: Lighting) -> None:
    s = cam.px_per_m(b.z)
    (u0, v0), (u1, _) = cam.project(np.array([[b.x0, b.z], [b.x1, b.z]]))
    top = v0 - b.height_m * s
    cv2.rectangle(img, (int(u0), int(top)), (int(u1), int(v0)), shade(b.color, light), -1)
    cv2.rectangle(
        img,
        (int(u0), int(top)),
        (int(u1), int(top + 0.6 * s)),
        shade((int(b.color[0] * 0.7), int(b.color[1] * 0.7), int(b.color[2] * 0.7)), light),
        -1,
    )
    floor_px = (b.height_m - 1.0) * s / b.floors
    n_cols = max(1, int((b.x1 - b.x0) / 3.0))
    col_px = (u1 - u0) / n_cols
    k = 0
    for f in range(b.floors):
        y0 = top + 0.6 * s + f * floor_px + 0.25 * floor_px
        for c in range(n_cols):
            x0 = u0 + c * col_px + 0.2 * col_px
            lit = light.night and b.lit[k % len(b.lit)]
            color = (120, 210, 250) if lit else shade(b.window_color, light)
            cv2.rectangle(img, (int(x0), int(y0)), (int(x0 + 0.6 * col_px), int(y0 + 0.5 * floor_px)), color, -1)
            k += 1
    door_w = 2.0 * s
    mid = (u0 + u1) / 2
    cv2.rectangle(
        img,
        (int(mid - door_w / 2), int(v0 - 2.4 * s)),
        (int(mid + door_w / 2), int(v0)),
        shade((60, 50, 40), light),
        -1,
    )
