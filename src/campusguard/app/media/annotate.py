"""Drawing the watch view: zones, lines, tracked boxes with ids, active incidents; and a video writer.

Boxes and their labels are drawn by the package's one annotator family
(`campusguard.io.draw`: one colour and one label per box, as ``predict --save`` draws them);
zones, lines and the incident panel are the watch view's own. Drawing is in place on a copy the caller owns; `AnnotatedVideoWriter` writes
a camera's recording as finished, playable segments and always releases its ``cv2.VideoWriter``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import cv2
import numpy as np

from campusguard.app.infra.diskspace import DiskHealth, disk_health
from campusguard.detections import Detections
from campusguard.errors import SourceError
from campusguard.io.draw import BoxAnnotator, LabelAnnotator
from campusguard.io.video_writer import H264Writer

__all__ = ["AnnotatedVideoWriter", "draw_overlay", "finish_dead_segments", "recording_segments"]

log = logging.getLogger(__name__)

_ZONE_COLOR = (0, 200, 255)  # BGR amber
_ALERT_COLOR = (0, 0, 255)  # BGR red
_LINE_COLOR = (255, 200, 0)  # BGR cyan-ish
_ALERT_COLOR_TEXT = (80, 80, 255)  # BGR light red: readable on the darkened header panel


def draw_overlay(
    image: np.ndarray,
    detections: Detections,
    names: dict[int, str],
    zones: Sequence[tuple[str, np.ndarray]] = (),
    lines: Sequence[tuple[str, np.ndarray]] = (),
    alert_zones: Sequence[str] = (),
    incidents: Sequence[str] = (),
    header: str | None = None,
) -> np.ndarray:
    """Draw zones, lines, boxes and the active incidents onto ``image`` (modified and returned).

    Args:
        image: ``(H, W, 3) uint8`` BGR frame.
        detections: boxes in this frame's pixels; labelled ``#id class conf`` when tracked.
        names: class id to name.
        zones: ``(name, (K, 2) polygon in pixels)``; zones in ``alert_zones`` are drawn red.
        lines: ``(name, (2, 2) end points in pixels)``.
        alert_zones: names of zones with an open incident.
        incidents: text lines listed in the top-left corner (one per open incident).
        header: optional first line (camera id, time).
    """
    h, w = image.shape[:2]
    scale = max(0.35, min(w, h) / 900)
    thick = max(1, round(min(w, h) / 360))
    for name, poly in zones:
        color = _ALERT_COLOR if name in alert_zones else _ZONE_COLOR
        pts = np.round(poly).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [pts], True, color, thick, cv2.LINE_AA)
        x, y = pts[:, 0, 0].min(), pts[:, 0, 1].min()
        cv2.putText(
            image,
            name,
            (int(x) + 3, int(y) + int(14 * scale + 4)),
            cv2.FONT_HERSHEY_SIMPLEX,
            scale,
            color,
            1,
            cv2.LINE_AA,
        )
    for name, pts in lines:
        p = np.round(pts).astype(np.int32)
        cv2.line(image, tuple(p[0]), tuple(p[1]), _LINE_COLOR, thick, cv2.LINE_AA)
        cv2.putText(image, name, tuple(p[0] + 4), cv2.FONT_HERSHEY_SIMPLEX, scale, _LINE_COLOR, 1, cv2.LINE_AA)
    BoxAnnotator(thick).annotate(image, detections)
    LabelAnnotator(names, scale * 0.9, filled=False).annotate(image, detections)
    texts = ([header] if header else []) + [f"! {t}" for t in incidents]
    if texts:
        (_, text_h), base = cv2.getTextSize("Ag", cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        step = text_h + base + 4  # one text line, so stacked lines never overlap
        width = max(cv2.getTextSize(t, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0] for t in texts)
        panel = image[: 4 + step * len(texts), : min(w, width + 12)]
        panel[:] = (panel * 0.35).astype(np.uint8)  # darkened panel behind the text: readable on any scene
        for k, text in enumerate(texts):
            color = (255, 255, 255) if k == 0 and header else _ALERT_COLOR_TEXT
            cv2.putText(image, text, (6, 2 + text_h + k * step), cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)
    return image


class AnnotatedVideoWriter:
    """The annotated recording of one camera: finished MP4 segments of ``segment_frames`` frames.

    Each segment is written under a hidden temporary name and renamed when it is finished (the
    MP4 index is written at the end), so the folder holds only complete, playable files: a crash
    or a full disk loses at most the open segment. A segment is named by camera, the UTC wall
    time of its first frame and a counter, ``<camera>_<YYYYmmddTHHMMSSZ>_<NNNN>.mp4``; a name
    already taken (a restart within the same second) takes the next counter, so an earlier
    recording is never overwritten. Frames keep the first frame's size (others are resized).

    Media yield to events: while the volume has less than the `DiskHealth` reserve free (or the
    room the next second of video needs), the writer asks for room (`DiskHealth.make_room`),
    then finishes the open segment and leaves frames out (counted in ``frames_skipped``) until
    there is room again; it never raises for lack of room or a file it cannot open.

    Args:
        folder: where the segments go (created).
        camera_id: the camera, first part of every name.
        fps: frames per second of the output.
        segment_frames: frames per file (None: one file per run).
        disk: where full volumes are reported (default: the process's `disk_health()`).
    """

    def __init__(
        self,
        folder: str | Path,
        camera_id: str,
        fps: float,
        segment_frames: int | None = None,
        *,
        disk: DiskHealth | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.camera_id = camera_id
        self.fps = float(fps)
        self.segment_frames = segment_frames
        self.disk = disk or disk_health()
        self.paths: list[Path] = []  # finished segments of this writer
        self.frames = 0  # frames written
        self.frames_skipped = 0  # frames left out for lack of room
        self.failed_segments = 0  # segments found unreadable when finished (removed)
        self._check_every = max(1, round(self.fps))  # free space is looked at about once a second
        self._writer: H264Writer | None = None
        self._part: Path | None = None
        self._final: Path | None = None
        self._size_wh: tuple[int, int] | None = None
        self._in_segment = 0
        self._counter = 0
        self._paused_until = -1  # frames (of all, written or not) before the next try after a pause
        self._seen = 0

    def _names(self, wall_s: float) -> tuple[Path, Path]:
        stamp = datetime.fromtimestamp(wall_s, UTC).strftime("%Y%m%dT%H%M%SZ")
        while True:
            self._counter += 1
            name = f"{self.camera_id}_{stamp}_{self._counter:04d}"
            final, part = self.folder / f"{name}.mp4", self.folder / f".{name}.part.mp4"
            if not final.exists() and not part.exists():
                return final, part

    def _open(self, size_wh: tuple[int, int], wall_s: float) -> bool:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.disk.failed("recording", self.folder / "segment.mp4", exc)
            return False
        final, part = self._names(wall_s)
        try:  # H.264 (browsers play it); the index goes at the end: no second pass on a filling disk
            writer = H264Writer(part, self.fps, size_wh, crf=23, faststart=False)
        except SourceError as exc:
            part.unlink(missing_ok=True)
            self.disk.failed("recording", final, str(exc))
            return False
        self._writer, self._part, self._final, self._in_segment = writer, part, final, 0
        return True

    def _room_needed(self) -> int:
        """Bytes the next second of the open segment needs, with its index and a margin."""
        per_frame = 64 * 1024
        if self._part is not None and self._in_segment:
            with contextlib.suppress(OSError):
                per_frame = max(1, self._part.stat().st_size // self._in_segment)
        return 2 * per_frame * self._check_every + 16 * (self._in_segment + self._check_every) + 64 * 1024

    def _has_room(self) -> bool:
        need = self._room_needed()
        return self.disk.has_room(self.folder, need) or self.disk.make_room(self.folder, need)

    def write(self, image: np.ndarray, wall_s: float | None = None) -> bool:
        """Append one ``(H, W, 3) uint8`` BGR frame read at ``wall_s`` (epoch seconds; default now);
        False when it was left out for lack of room."""
        self._seen += 1
        if self._size_wh is None:
            self._size_wh = (int(image.shape[1]), int(image.shape[0]))
        if self._writer is not None and self.segment_frames is not None and self._in_segment >= self.segment_frames:
            self._finish()
        if self._writer is None:
            if self._seen < self._paused_until:
                self.frames_skipped += 1
                return False
            if not self._has_room() or not self._open(self._size_wh, time.time() if wall_s is None else wall_s):
                self._pause()
                return False
        elif self._in_segment % self._check_every == 0 and not self._has_room():
            self._pause()
            return False
        assert self._writer is not None
        if (image.shape[1], image.shape[0]) != self._size_wh:
            image = cv2.resize(image, self._size_wh, interpolation=cv2.INTER_AREA)
        try:
            self._writer.write(image)
        except SourceError:  # the disk filled between two checks: finish what was written
            self._pause()
            return False
        self._in_segment += 1
        self.frames += 1
        return True

    def _pause(self) -> None:
        """No room: finish the open segment while it can still be finished, leave frames out for a second."""
        if self._writer is not None:
            self._finish()
        if self._paused_until < self._seen:  # one report per pause, not one per frame
            self.disk.skip("recording", self._final or self.folder / f"{self.camera_id}.mp4", self._room_needed())
        self._paused_until = self._seen + self._check_every
        self.frames_skipped += 1

    def _finish(self) -> None:
        """Close the open segment and give it its name; a segment that cannot be read back is removed."""
        writer, part, final, frames = self._writer, self._part, self._final, self._in_segment
        self._writer = self._part = None
        if writer is None or part is None or final is None:
            return
        with contextlib.suppress(SourceError):  # whether what was written reads back decides below
            writer.close()
        try:
            if frames and _readable(part):
                os.replace(part, final)
                self.paths.append(final)
                self.disk.ok(final)
                return
            reason = "no frame could be read back (the disk filled while it was written)"
        except OSError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        part.unlink(missing_ok=True)
        if frames:
            self.failed_segments += 1
            self.disk.failed("recording", final, reason)

    def close(self) -> None:
        """Finish the current segment (idempotent)."""
        self._finish()


def _readable(path: Path) -> bool:
    """True when OpenCV opens ``path`` and decodes a frame of it (the MP4 index was written)."""
    cap = cv2.VideoCapture(str(path))
    try:
        return bool(cap.isOpened() and cap.read()[0])
    finally:
        cap.release()


def recording_segments(folder: str | Path, camera_id: str) -> list[Path]:
    """The finished segments of a camera in ``folder``, oldest first (by start time, then counter)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{camera_id}_*Z_*.mp4") if not p.name.startswith("."))


def finish_dead_segments(folder: str | Path, camera_ids: Sequence[str]) -> tuple[list[Path], int]:
    """Finish the segments a dead run left under their temporary name (``.<name>.part.mp4``) in ``folder``.

    Call it before this run's writers start. Each one of ``camera_ids`` is remuxed into its
    final name (``ffmpeg -c copy``: a segment whose index was written plays as it is) when it can
    be read, else removed: a run killed mid-segment leaves an MP4 without its index, which no
    player opens. Returns ``(finished segments, segments removed)``; one log line when any.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return [], 0
    finished: list[Path] = []
    removed = 0
    for part in sorted(folder.glob(".*.part.mp4")):
        name = part.name[1 : -len(".part.mp4")]
        if not any(name.startswith(f"{cam}_") for cam in camera_ids):
            continue
        final = folder / f"{name}.mp4"
        if not final.exists() and _remux(part, final):
            finished.append(final)
        else:
            removed += 1
        part.unlink(missing_ok=True)
    if finished or removed:
        log.warning(
            "recordings in %s: %d segment(s) a stopped run left unfinished were finished, %d unreadable removed",
            folder,
            len(finished),
            removed,
        )
    return finished, removed


def _remux(part: Path, final: Path) -> bool:
    """Copy the streams of ``part`` into ``final`` (a hidden temporary name first); True when it plays."""
    if not _readable(part):
        return False
    tmp = final.with_name(f".{final.stem}.remux.mp4")
    ffmpeg = shutil.which("ffmpeg")
    try:
        if ffmpeg is None:
            shutil.copyfile(part, tmp)
        else:
            subprocess.run(
                [ffmpeg, "-v", "error", "-y", "-i", str(part), "-c", "copy", "-movflags", "+faststart", str(tmp)],
                check=True,
                capture_output=True,
                timeout=120,
            )
        if _readable(tmp):
            os.replace(tmp, final)
            return True
    except (OSError, subprocess.SubprocessError):
        pass
    tmp.unlink(missing_ok=True)
    return False
