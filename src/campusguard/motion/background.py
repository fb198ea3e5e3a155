"""A cheap motion detector: a running-average background on a downscaled, blurred grey frame.

The steps follow Frigate's: downscale, grey, blur, difference from the running average,
threshold, dilate, contours. The downscale is bilinear, not area-averaging: on a 720p frame to the
320-pixel working width `cv2.INTER_AREA` took 1.54 of the detector's 1.79 ms and `cv2.INTER_LINEAR`
0.35 ms (one thread, 2-vCPU AMD EPYC with VNNI, 2026-12-03); the Gaussian blur that follows does
the smoothing that matters for a motion mask. Paid on every frame of a gated camera, in the one
detection thread.
"""

from __future__ import annotations

import cv2
import numpy as np

from campusguard.errors import InvalidInputError

__all__ = ["MotionDetector"]

_KERNEL = np.ones((3, 3), np.uint8)


class MotionDetector:
    """Moving areas of a camera's frames, one instance per camera.

    Args:
        threshold: grey-level difference (0..255) from the background that counts as motion.
        min_area: smallest moving area kept, as a fraction of the frame's area.
        width: working width in pixels (the frame is downscaled to it, keeping its aspect).
        alpha: background learning rate per frame (0..1); still objects fade into the background
            after about ``3 / alpha`` frames, which is why tracked objects keep their own regions.
        blur: odd Gaussian kernel size on the working frame, 0 for none.
        dilate: dilation iterations joining nearby moving pixels into one area.
        lighting_fraction: when more than this fraction of the frame moves at once (lights on,
            camera auto-exposure), the background is reset and the whole frame is reported.
    """

    def __init__(
        self,
        *,
        threshold: int = 25,
        min_area: float = 0.0005,
        width: int = 320,
        alpha: float = 0.02,
        blur: int = 5,
        dilate: int = 2,
        lighting_fraction: float = 0.6,
    ) -> None:
        if not 0 < threshold < 255:
            raise InvalidInputError(f"motion threshold must be within 1..254, got {threshold}")
        if not 0 < alpha <= 1:
            raise InvalidInputError(f"motion alpha must be within (0, 1], got {alpha}")
        if width < 32:
            raise InvalidInputError(f"motion width must be at least 32 pixels, got {width}")
        if blur and blur % 2 == 0:
            raise InvalidInputError(f"motion blur must be odd or 0, got {blur}")
        self.threshold, self.min_area, self.width = threshold, min_area, width
        self.alpha, self.blur, self.dilate = alpha, blur, dilate
        self.lighting_fraction = lighting_fraction
        self._background: np.ndarray | None = None
        self._shape: tuple[int, int] | None = None
        self.moving_fraction = 0.0  # of the last frame, for metrics

    def reset(self) -> None:
        """Forget the background (after a reconnect or a resolution change)."""
        self._background, self._shape = None, None

    def __call__(self, frame_bgr: np.ndarray) -> np.ndarray:
        """Moving areas of one ``(H, W, 3) uint8`` BGR frame as ``(N, 4) float32`` xyxy frame pixels.

        The first frame (and the first after a resolution change) only starts the background and
        reports no motion.
        """
        h, w = frame_bgr.shape[:2]
        scale = self.width / w if w > self.width else 1.0
        small = cv2.resize(
            frame_bgr, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_LINEAR
        )
        grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY) if small.ndim == 3 else small
        if self.blur:
            grey = cv2.GaussianBlur(grey, (self.blur, self.blur), 0)
        if self._background is None or self._shape != (h, w):
            self._background, self._shape = grey.astype(np.float32), (h, w)
            self.moving_fraction = 0.0
            return np.zeros((0, 4), np.float32)
        diff = cv2.absdiff(grey, cv2.convertScaleAbs(self._background))
        _, mask = cv2.threshold(diff, self.threshold, 255, cv2.THRESH_BINARY)
        if self.dilate:
            mask = cv2.dilate(mask, _KERNEL, iterations=self.dilate)
        self.moving_fraction = float(np.count_nonzero(mask)) / mask.size
        if self.moving_fraction > self.lighting_fraction:
            self._background = grey.astype(np.float32)
            return np.array([[0, 0, w, h]], np.float32)
        cv2.accumulateWeighted(grey, self._background, self.alpha)
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        min_px = self.min_area * mask.size
        boxes = [cv2.boundingRect(c) for c in contours if cv2.contourArea(c) >= min_px]
        if not boxes:
            return np.zeros((0, 4), np.float32)
        xywh = np.asarray(boxes, np.float32)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1) / scale
        return np.clip(xyxy, 0, [w, h, w, h]).astype(np.float32)
