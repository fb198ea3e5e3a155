"""Fixed pinhole camera looking at a flat ground plane; shared by still images and videos.

World coordinates are metres: ``x`` to the right, ``z`` depth away from the camera, ground at
height 0. The optical axis is horizontal with the principal point shifted up, so a ground point
at depth ``z`` lands on row ``horizon_y + focal_px * height_m / z`` and an object ``h`` metres
tall standing there is ``focal_px * h / z`` pixels tall. Images and videos use the same
`Camera.for_frame` model, so objects have the same pixel sizes in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Camera", "PERSON_HEIGHT_M"]

PERSON_HEIGHT_M = 1.7


@dataclass(frozen=True)
class Camera:
    """Pinhole camera over a flat ground plane.

    Attributes:
        width: frame width in pixels.
        height: frame height in pixels.
        focal_px: focal length in pixels.
        horizon_y: row of the horizon in pixels (may be outside the frame).
        height_m: camera height above the ground in metres.
        cx: column of the principal point in pixels.
    """

    width: int
    height: int
    focal_px: float
    horizon_y: float
    height_m: float
    cx: float

    @classmethod
    def for_frame(
        cls,
        width: int,
        height: int,
        *,
        near_person_px: float = 120.0,
        height_m: float = 4.0,
        focal_per_width: float = 0.75,
    ) -> Camera:
        """Camera whose bottom frame row shows a standing person ``near_person_px`` tall.

        ``near_person_px`` and the focal length are given for a 640-pixel-wide frame and scale
        with ``width``, so a 640x640 image and a 640x360 video frame show the same sizes.
        """
        k = width / 640.0
        focal = focal_per_width * width
        horizon = height - near_person_px * k * height_m / PERSON_HEIGHT_M
        return cls(width, height, focal, horizon, height_m, width / 2.0)

    def row_of_depth(self, z_m: float | np.ndarray) -> float | np.ndarray:
        """Image row (pixels) of ground points at depth ``z_m`` metres."""
        return self.horizon_y + self.focal_px * self.height_m / np.asarray(z_m, dtype=np.float64)

    def depth_of_row(self, v_px: float) -> float:
        """Depth in metres of the ground point on image row ``v_px`` (must be below the horizon)."""
        return float(self.focal_px * self.height_m / max(v_px - self.horizon_y, 1e-6))

    def px_per_m(self, z_m: float) -> float:
        """Pixels per metre for an upright object at depth ``z_m``."""
        return float(self.focal_px / z_m)

    def project(self, xz_m: np.ndarray) -> np.ndarray:
        """``(N, 2) float64`` pixel points of ``(N, 2)`` ground points ``(x, z)`` in metres."""
        p = np.asarray(xz_m, dtype=np.float64).reshape(-1, 2)
        u = self.cx + self.focal_px * p[:, 0] / p[:, 1]
        v = self.horizon_y + self.focal_px * self.height_m / p[:, 1]
        return np.stack([u, v], axis=1)

    def unproject(self, uv_px: np.ndarray) -> np.ndarray:
        """``(N, 2)`` ground points ``(x, z)`` metres of ``(N, 2)`` pixels below the horizon."""
        p = np.asarray(uv_px, dtype=np.float64).reshape(-1, 2)
        z = self.focal_px * self.height_m / np.maximum(p[:, 1] - self.horizon_y, 1e-6)
        x = (p[:, 0] - self.cx) * z / self.focal_px
        return np.stack([x, z], axis=1)

    def half_width_m(self, z_m: float) -> float:
        """Half the visible ground width in metres at depth ``z_m``."""
        return float(self.width / 2.0 * z_m / self.focal_px)

    @property
    def near_depth_m(self) -> float:
        """Depth in metres of the ground seen on the bottom frame row."""
        return self.depth_of_row(float(self.height))
