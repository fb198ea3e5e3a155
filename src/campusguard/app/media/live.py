"""The live view: each camera's latest annotated frame, JPEG-encoded only while someone looks.

The analytics worker of a camera hands every processed frame to `FrameHub.publish` as a
`LiveFrame`: a reference to the reader's image plus what to draw on it. Publishing is an
attribute swap and, while viewers are open, the setting of an event; it never copies,
draws, encodes or waits, so the pipeline runs at the same speed with or without viewers.

Drawing and JPEG encoding happen on the hub's own thread per watched camera (at most
``max_fps`` times a second, once per frame whatever the number of viewers), or on the
caller's thread for `FrameHub.snapshot_jpeg`. Every viewer has a bounded queue that drops
its oldest frame, so a slow viewer only ever misses frames (Frigate's per-client buffers).

Blur by role: a frame of a camera with ``privacy.blur`` carries the areas to hide
(`LiveFrame.redact_xyxy`); a *redacted* JPEG (those areas blurred before the overlay is drawn) is
encoded only when a redacted viewer or snapshot asks for it, once per frame like the sharp one.
For a camera without blur the two are the same JPEG.

`PulledFrameHub` serves the same viewers with JPEGs pulled from elsewhere (the camera groups
of ``serve --ray``, which keep their own `FrameHub`): one pull in flight per watched camera, at
most ``max_fps`` a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from campusguard.app.infra.queues import DropOldestQueue
from campusguard.app.media.annotate import draw_overlay
from campusguard.app.media.redact import redact_image
from campusguard.detections import Detections
from campusguard.errors import CampusGuardError

__all__ = ["FrameFetch", "FrameHub", "LiveFrame", "PulledFrameHub", "Viewer", "encode_jpeg", "render_live_frame"]


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """One processed frame of one camera and what to draw on it.

    Attributes:
        camera_id: the camera.
        index: frame number from the reader.
        timestamp_s: the frame's stream time, seconds.
        image: ``(H, W, 3) uint8`` BGR pixels as the reader produced them; shared, never modified.
        detections: tracked boxes in pixels of ``resolution_wh``.
        names: class id to name.
        resolution_wh: the reference frame size of the zones, lines and boxes (width, height).
        zones: ``(name, (K, 2) float32 polygon)`` in pixels of ``resolution_wh``.
        lines: ``(name, (2, 2) float32 end points)``.
        alert_zones: zones with an open incident (drawn red).
        incidents: one text line per open incident.
        header: first text line (camera, time, frame).
        redact_xyxy: ``(N, 4)`` areas viewers get blurred, in pixels of ``resolution_wh``; ``None``
            when the camera has no blur (the redacted view is then the sharp one).
    """

    camera_id: str
    index: int
    timestamp_s: float
    image: np.ndarray
    detections: Detections
    names: dict[int, str]
    resolution_wh: tuple[int, int]
    zones: Sequence[tuple[str, np.ndarray]] = ()
    lines: Sequence[tuple[str, np.ndarray]] = ()
    alert_zones: Sequence[str] = ()
    incidents: Sequence[str] = ()
    header: str | None = None
    redact_xyxy: np.ndarray | None = None

    @property
    def blurred(self) -> bool:
        """Whether viewers get this frame redacted (its camera has blur on)."""
        return self.redact_xyxy is not None


def render_live_frame(frame: LiveFrame, redacted: bool = False) -> np.ndarray:
    """A new ``(H, W, 3) uint8`` BGR image of ``frame.resolution_wh`` with the overlay drawn.

    ``redacted``: the frame's `LiveFrame.redact_xyxy` areas blurred first (what viewers see).
    """
    canvas = frame.image.copy()
    if (canvas.shape[1], canvas.shape[0]) != frame.resolution_wh:
        canvas = cv2.resize(canvas, frame.resolution_wh, interpolation=cv2.INTER_AREA)
    if redacted and frame.redact_xyxy is not None and len(frame.redact_xyxy):
        canvas = redact_image(canvas, frame.redact_xyxy, frame.resolution_wh)
    return draw_overlay(
        canvas,
        frame.detections,
        frame.names,
        zones=frame.zones,
        lines=frame.lines,
        alert_zones=frame.alert_zones,
        incidents=frame.incidents,
        header=frame.header,
    )


def encode_jpeg(image: np.ndarray, quality: int = 80) -> bytes:
    """JPEG bytes of a BGR image (quality 1..100)."""
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 BGR image
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes()


class Viewer(DropOldestQueue[bytes]):
    """One open live view of a camera: a bounded queue of JPEG frames that drops its oldest.

    Made by `FrameHub.open_viewer`; call ``get(timeout) -> bytes | None`` from the serving
    thread and `close` when done.
    """

    def __init__(self, hub: FrameHub, camera_id: str, maxsize: int, redacted: bool = False) -> None:
        super().__init__(maxsize)
        self.camera_id = camera_id
        self.redacted = redacted  # gets the redacted frames (a viewer-role client)
        self.fresh = True  # has not been sent a frame yet
        self._hub = hub

    def close(self) -> None:
        """Stop receiving frames (idempotent); a waiting `get` returns ``None``."""
        super().close()
        self._hub._remove(self)

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Slot:
    """A camera's latest frame, its cached JPEG and its viewers."""

    def __init__(self) -> None:
        self.latest: LiveFrame | None = None
        self.seq = 0  # written only by the camera's analytics thread
        self.jpeg: tuple[int, bytes] | None = None
        self.jpeg_redacted: tuple[int, bytes] | None = None
        self.viewers: list[Viewer] = []
        self.wake = threading.Event()
        self.lock = threading.Lock()  # viewers and the encoder thread
        self.encode_lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.encoded = 0


class FrameHub:
    """Latest annotated frame per camera, for snapshots and live viewers.

    Args:
        cameras: the camera ids.
        jpeg_quality: JPEG quality of snapshots and live frames.
        max_fps: most live frames per second sent to viewers of one camera.
    """

    def __init__(self, cameras: Sequence[str], *, jpeg_quality: int = 80, max_fps: float = 15.0) -> None:
        self._slots = {c: _Slot() for c in cameras}
        self.jpeg_quality = jpeg_quality
        self.max_fps = max_fps
        self._closed = threading.Event()

    def _slot(self, camera_id: str) -> _Slot:
        try:
            return self._slots[camera_id]
        except KeyError:
            raise KeyError(camera_id) from None

    # pipeline side -------------------------------------------------------------------------
    def publish(self, frame: LiveFrame) -> None:
        """Make ``frame`` its camera's latest (a reference swap; never blocks, copies or encodes)."""
        slot = self._slots[frame.camera_id]
        slot.latest = frame
        slot.seq += 1
        if slot.viewers:
            slot.wake.set()

    # consumer side -------------------------------------------------------------------------
    def latest(self, camera_id: str) -> LiveFrame | None:
        """The camera's latest frame (``KeyError`` for an unknown camera)."""
        return self._slot(camera_id).latest

    def encoded_frames(self, camera_id: str) -> int:
        """How many JPEGs have been encoded for this camera so far."""
        return self._slot(camera_id).encoded

    def viewer_count(self, camera_id: str) -> int:
        return len(self._slot(camera_id).viewers)

    def snapshot_jpeg(self, camera_id: str, redacted: bool = False) -> bytes | None:
        """JPEG of the camera's latest annotated frame, or ``None`` before its first frame.

        ``redacted``: with the camera's blur areas blurred (what a viewer-role client gets).

        Raises:
            KeyError: unknown camera.
        """
        return self._jpeg(self._slot(camera_id), redacted)

    def latest_jpeg(self, camera_id: str, redacted: bool = False) -> tuple[int, bytes] | None:
        """``(frame number, JPEG)`` of the camera's latest annotated frame (numbers count its
        frames from 1), or ``None`` before its first frame; encoded once per frame and variant.

        Raises:
            KeyError: unknown camera.
        """
        return self._encoded(self._slot(camera_id), redacted)

    def _jpeg(self, slot: _Slot, redacted: bool = False) -> bytes | None:
        got = self._encoded(slot, redacted)
        return None if got is None else got[1]

    def _encoded(self, slot: _Slot, redacted: bool = False) -> tuple[int, bytes] | None:
        with slot.encode_lock:
            seq, frame = slot.seq, slot.latest
            if frame is None:
                return None
            redacted = redacted and frame.blurred  # no blur: the redacted view is the sharp one
            cached = slot.jpeg_redacted if redacted else slot.jpeg
            if cached is not None and cached[0] == seq:
                return cached
            cached = (seq, encode_jpeg(render_live_frame(frame, redacted), self.jpeg_quality))
            if redacted:
                slot.jpeg_redacted = cached
            else:
                slot.jpeg = cached
            slot.encoded += 1
            return cached

    def open_viewer(self, camera_id: str, maxsize: int = 2, redacted: bool = False) -> Viewer:
        """A new live viewer of a camera; it gets the latest frame at once, then each new one.

        ``redacted``: it gets the frames with the camera's blur areas blurred.

        Raises:
            KeyError: unknown camera.
        """
        slot = self._slot(camera_id)
        viewer = Viewer(self, camera_id, maxsize, redacted)
        with slot.lock:
            slot.viewers.append(viewer)
            if slot.thread is None and not self._closed.is_set():
                slot.thread = threading.Thread(
                    target=self._serve, args=(camera_id, slot), name=f"live-{camera_id}", daemon=True
                )
                slot.thread.start()
        slot.wake.set()  # the newcomer gets the current frame without waiting for the next one
        return viewer

    def _remove(self, viewer: Viewer) -> None:
        slot = self._slots[viewer.camera_id]
        with slot.lock:
            if viewer in slot.viewers:
                slot.viewers.remove(viewer)
        slot.wake.set()

    def _serve(self, camera_id: str, slot: _Slot) -> None:
        """Encode the latest frame for the camera's viewers until none is left (one thread per watched camera)."""
        period = 1.0 / self.max_fps if self.max_fps > 0 else 0.0
        sent_seq = -1
        while True:
            self._wait_for_frame(slot)
            with slot.lock:
                viewers = list(slot.viewers)
                if not viewers or self._closed.is_set():
                    slot.thread = None
                    return
            started = time.monotonic()
            seq = self._frame_seq(camera_id, slot)
            # every viewer on a new frame; otherwise only newcomers (e.g. of a camera whose stream ended)
            targets = viewers if seq != sent_seq else [v for v in viewers if v.fresh]
            for redacted in (False, True):
                group = [v for v in targets if v.redacted == redacted]
                jpeg = self._jpeg(slot, redacted) if group else None
                if jpeg is not None:
                    for v in group:
                        v.fresh = False
                        v.offer(jpeg)
                    sent_seq = seq
            rest = period - (time.monotonic() - started)
            if rest > 0 and self._closed.wait(rest):
                continue

    def _wait_for_frame(self, slot: _Slot) -> None:
        """Until `publish` (or a new viewer) rings, at most half a second."""
        slot.wake.wait(0.5)
        slot.wake.clear()

    def _frame_seq(self, camera_id: str, slot: _Slot) -> int:
        """The number of the camera's latest frame (what `_jpeg` would encode)."""
        return slot.seq

    def close(self) -> None:
        """Close every viewer and stop the encoder threads."""
        self._closed.set()
        for slot in self._slots.values():
            with slot.lock:
                viewers = list(slot.viewers)
            for v in viewers:
                v.close()
            slot.wake.set()
            thread = slot.thread
            if thread is not None:
                thread.join(timeout=2.0)


FrameFetch = Callable[[str, Hashable | None], tuple[Hashable, bytes | None] | None]
"""``(camera_id, known key) -> (key, JPEG or None when still the known frame) | None before a first
frame``; raises a `CampusGuardError` when the frame's holder does not answer."""


class PulledFrameHub(FrameHub):
    """A `FrameHub` whose frames are JPEGs pulled from elsewhere instead of published.

    The viewers of a camera are served as by `FrameHub` (bounded queues, newcomers get the
    current frame); the hub's thread of a watched camera pulls at most ``max_fps`` times a
    second, one pull at a time, and an unwatched camera is never pulled. A pull that fails
    (its holder is restarting) sends nothing: the viewers wait for the next frame.

    Args:
        cameras: the camera ids.
        fetch: pulls a camera's latest JPEG (`FrameFetch`); called from the hub's threads and
            from `snapshot_jpeg`.
        max_fps: most pulls per second per camera.
    """

    def __init__(self, cameras: Sequence[str], fetch: FrameFetch, *, max_fps: float = 15.0) -> None:
        super().__init__(cameras, max_fps=max_fps)
        self._fetch = fetch
        self._keys: dict[str, Hashable] = {}  # camera -> key of its cached JPEG
        self._pulled_at: dict[str, float] = {}

    def publish(self, frame: LiveFrame) -> None:
        raise TypeError("a PulledFrameHub pulls its frames; nothing is published to it")

    def snapshot_jpeg(self, camera_id: str, redacted: bool = False) -> bytes | None:
        """The camera's latest JPEG, pulled now unless pulled within the last ``1 / max_fps`` s.

        The groups send one variant, redacted when the camera has blur on, to every role.

        Raises:
            KeyError: unknown camera.
            CampusGuardError: the frame's holder did not answer (from ``fetch``).
        """
        slot = self._slot(camera_id)
        self._pull(camera_id, slot, 1.0 / self.max_fps if self.max_fps > 0 else 0.0)
        return self._jpeg(slot)

    def _encoded(self, slot: _Slot, redacted: bool = False) -> tuple[int, bytes] | None:
        return slot.jpeg  # pulled ready-made (redacted by the group where the camera has blur on)

    def _wait_for_frame(self, slot: _Slot) -> None:
        slot.wake.clear()  # frames are pulled, not rung for: the loop's own pace (max_fps) is the wait

    def _frame_seq(self, camera_id: str, slot: _Slot) -> int:
        with contextlib.suppress(CampusGuardError):  # its holder is restarting: nothing new this round
            self._pull(camera_id, slot)  # the serving loop keeps its own pace
        return slot.seq

    def _pull(self, camera_id: str, slot: _Slot, min_age_s: float = 0.0) -> None:
        """Fetch the camera's latest JPEG into its slot, one fetch at a time per camera; not when the
        cached one was fetched less than ``min_age_s`` seconds ago."""
        with slot.encode_lock:
            now = time.monotonic()
            if slot.jpeg is not None and camera_id in self._pulled_at and now - self._pulled_at[camera_id] < min_age_s:
                return
            reply = self._fetch(camera_id, self._keys.get(camera_id))
            self._pulled_at[camera_id] = now
            if reply is None:
                return
            key, jpeg = reply
            if jpeg is not None and key != self._keys.get(camera_id):
                self._keys[camera_id] = key
                slot.seq += 1
                slot.jpeg = (slot.seq, jpeg)
                slot.encoded += 1
