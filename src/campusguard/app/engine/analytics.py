"""The analytics stage: `AnalyticsWorker` (one per camera: track, rules, annotate, snapshots) and
the camera geometry it draws."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import cv2
import numpy as np

from campusguard.app.config.privacy import BlurMode
from campusguard.app.engine.detection import TrackedBoxes
from campusguard.app.engine.metrics import CameraMetrics
from campusguard.app.engine.sources import EndOfStream, Frame
from campusguard.app.engine.stages import DetectedFrame, put_until, wall_time_of
from campusguard.app.engine.writer import EventMessage
from campusguard.app.events.types import Event
from campusguard.app.infra.diskspace import DiskHealth, disk_health
from campusguard.app.infra.durable import write_whole
from campusguard.app.media.annotate import AnnotatedVideoWriter
from campusguard.app.media.live import LiveFrame, render_live_frame
from campusguard.app.media.redact import redact_image, redacted_path, redaction_areas
from campusguard.app.rules import RuleEngine
from campusguard.app.tracks.recorder import TrackRecorder
from campusguard.detections import Detections
from campusguard.ops.boxes import resize_boxes
from campusguard.tracking import Tracker

log = logging.getLogger(__name__)


# analytics ---------------------------------------------------------------------------------
@dataclass
class CameraGeometry:
    """A camera's zones and lines in pixels of its reference frame size (for drawing).

    Attributes:
        resolution_wh: the frame size rules were built for; frames of another size (after a
            reconnect) have their boxes scaled to it.
        zones: ``(name, (K, 2) float32 polygon)``.
        lines: ``(name, (2, 2) float32 end points)``.
    """

    resolution_wh: tuple[int, int]
    zones: Sequence[tuple[str, np.ndarray]] = ()
    lines: Sequence[tuple[str, np.ndarray]] = ()


TRIGGER_BOXES = "trigger_boxes"
"""The `Event.details` key of the boxes that raised an incident: ``[{"tracker_id", "class_id",
"xyxy"}]`` in pixels of the camera's reference frame, as tracked on its first frame (what a
snapshot shows and a report draws)."""


def with_trigger_boxes(ev: Event, tracked: Detections) -> Event:
    """``ev`` with the tracked boxes of its tracks (`TRIGGER_BOXES`) in its details (a new event)."""
    if tracked.tracker_id is None or not ev.tracker_ids:
        return ev
    wanted = set(ev.tracker_ids)
    boxes = [
        {"tracker_id": int(tid), "class_id": int(cid), "xyxy": [round(float(v), 1) for v in xyxy]}
        for xyxy, cid, tid in zip(tracked.xyxy, tracked.class_id, tracked.tracker_id, strict=True)
        if int(tid) in wanted
    ]
    return dataclasses.replace(ev, details={**ev.details, TRIGGER_BOXES: boxes}) if boxes else ev


def scale_detections(det: Detections, from_wh: tuple[int, int], to_wh: tuple[int, int]) -> Detections:
    """Detections with ``xyxy`` rescaled from a frame of ``from_wh`` to one of ``to_wh`` (new object)."""
    if from_wh == to_wh or len(det) == 0:
        return det
    xyxy = resize_boxes(det.xyxy, from_wh, to_wh)
    return Detections(xyxy, det.confidence, det.class_id, det.tracker_id, dict(det.data))


class AnalyticsWorker:
    """Tracking, rules, snapshots and the annotated video of one camera.

    Args:
        camera_id: the camera.
        inbox: its `DetectedFrame` / `EndOfStream` queue.
        events_out: the event worker's queue.
        tracker: this camera's tracker.
        rules: this camera's rules.
        geometry: zones and lines in the reference frame's pixels.
        names: class id to name.
        metrics: this camera's counters.
        failed: set when any worker died; puts then give up.
        video: annotated video writer, or None.
        snapshots_dir: folder for event-start JPEGs, or None. A snapshot that cannot be written
            (a full disk) is left out and counted in ``snapshots_failed``: the event goes on
            without a ``snapshot_path``, never naming a file that is not there.
        on_frame: called with each processed frame as a `LiveFrame` (the live view and clips);
            must not block.
        tracked_out: where this camera's tracked boxes are published after every frame (for
            its motion gate), or None.
        disk: where full volumes are reported (default: the process's `disk_health()`).
        blur: the camera's ``privacy.blur`` (``none``, ``persons``, ``faces``): with blur, each
            frame carries the person areas viewers get blurred (from this frame's detections and
            tracks), and each snapshot is written a second time redacted (`redacted_path`). The
            attribute may be replaced while the worker runs (a config edit).
        offline_end_s: a live camera's open incidents are ended, with ``details.interrupted``, when
            no frame came for this many seconds (its source offline or reconnecting); None (files):
            never. A camera's end by a stop (not the end of its file) ends them the same way.
        tracks: where each frame's tracked rows go right after the rules ran on them (for
            `campusguard replay`; appends without waiting), closed when the worker ends; or None.
    """

    def __init__(
        self,
        camera_id: str,
        inbox: queue.Queue,
        events_out: queue.Queue,
        tracker: Tracker,
        rules: RuleEngine,
        geometry: CameraGeometry,
        names: dict[int, str],
        metrics: CameraMetrics,
        failed: threading.Event,
        video: AnnotatedVideoWriter | None = None,
        snapshots_dir: Path | None = None,
        on_frame: Callable[[LiveFrame], None] | None = None,
        tracked_out: TrackedBoxes | None = None,
        disk: DiskHealth | None = None,
        blur: BlurMode = "none",
        offline_end_s: float | None = None,
        tracks: TrackRecorder | None = None,
    ) -> None:
        self.camera_id = camera_id
        self.tracks = tracks
        self.blur = blur
        self.inbox = inbox
        self.events_out = events_out
        self.tracker = tracker
        self.rules = rules
        self.geometry = geometry
        self.names = names
        self.metrics = metrics
        self.failed = failed
        self.video = video
        self.snapshots_dir = snapshots_dir
        self.on_frame = on_frame
        self.tracked_out = tracked_out
        self.disk = disk or disk_health()
        self.snapshots_failed = 0
        self.offline_end_s = offline_end_s
        self.offline_ended = 0  # incidents ended because the camera gave no frame for offline_end_s
        self.heartbeat = time.monotonic()
        self._last_frame_at = time.monotonic()
        self._open: dict[str, Event] = {}  # event_id -> latest open state, for drawing
        self._last_ts = 0.0
        self._last_frame: Frame | None = None
        self._pending: tuple[RuleEngine, CameraGeometry] | None = None
        self._pending_lock = threading.Lock()

    def replace_rules(self, rules: RuleEngine, geometry: CameraGeometry) -> None:
        """Swap in new rules and zones before the next frame (thread-safe; the tracker is kept).

        A running rule that ``rules`` builds again unchanged (`RuleEngine.carry_over`: same
        section, same watched zone or line) goes on with its state, so its ongoing incident is
        not split; the other old rules' open events are ended at the last processed frame's time.
        """
        with self._pending_lock:
            self._pending = (rules, geometry)

    def _apply_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        rules, geometry = pending
        self._finish(rules.carry_over(self.rules))
        self.rules, self.geometry = rules, geometry

    def run(self) -> None:
        """Process frames until the camera's `EndOfStream`; then end open events and close the video."""
        try:
            while not self.failed.is_set():
                try:
                    item = self.inbox.get(timeout=0.2)
                except queue.Empty:
                    self.heartbeat = time.monotonic()
                    self._tick(self.heartbeat)
                    self._end_if_offline(self.heartbeat)
                    continue
                self.heartbeat = time.monotonic()
                if isinstance(item, EndOfStream):
                    self._finish(interrupted=item.reason != "end of stream")
                    self._close_video()  # before the end goes on: `WatchService.wait` returns once events end
                    put_until(self.events_out, item, self.failed.is_set)
                    return
                self.process(item)
        finally:
            self._close_video()
            if self.tracks is not None:
                self.tracks.close()

    def _tick(self, now: float) -> None:
        """A live camera that gives no frame: its picture rules (camera health) see the time pass, on
        the live stream clock (``time.monotonic()``, as its frames' timestamps)."""
        if self.offline_end_s is None:
            return
        self._apply_pending()
        for ev in self.rules.tick(now, datetime.now().astimezone()):
            self._emit(ev, None)

    def _end_if_offline(self, now: float) -> None:
        """End the open incidents about objects as interrupted once no frame came for ``offline_end_s``
        seconds (the camera's own health incidents stay open: they are about the outage)."""
        if self.offline_end_s is None or not self._open or now - self._last_frame_at < self.offline_end_s:
            return
        wall = wall_time_of(self._last_frame) if self._last_frame is not None else None
        ended = self.rules.close_for_outage(self._last_ts, wall)
        if not ended:
            return
        n = len(ended)
        for ev in ended:
            self._emit(dataclasses.replace(ev, details={**ev.details, "interrupted": True}), None)
        self.offline_ended += n
        log.warning(
            "camera %s: no frame for %.0f s; %d open incident(s) ended as interrupted",
            self.camera_id,
            now - self._last_frame_at,
            n,
        )

    def _close_video(self) -> None:
        if self.video is not None:
            self.video.close()

    def process(self, msg: DetectedFrame) -> list[Event]:
        """Track, evaluate rules and annotate one frame; return the events it raised."""
        self._apply_pending()
        frame = msg.frame
        self._last_frame_at = time.monotonic()
        wall = wall_time_of(frame)
        dets = scale_detections(msg.detections, frame.resolution_wh, self.geometry.resolution_wh)
        tracked = self.tracker.update(dets, frame.timestamp_s)
        if self.tracked_out is not None:
            self.tracked_out.publish(tracked.xyxy, self.geometry.resolution_wh)
        events = self.rules.update(frame.timestamp_s, tracked, frame.index, wall)
        if self.tracks is not None:  # exactly what the rules got, for `campusguard replay`
            self.tracks.record(frame.index, frame.timestamp_s, wall, tracked)
        events += self.rules.observe(frame.timestamp_s, frame.index, frame.image, wall)
        self._last_ts = frame.timestamp_s
        self._last_frame = frame
        blur = self.blur
        redact = None if blur == "none" else redaction_areas(blur, self.names, dets, tracked)
        for ev in events:
            self._emit(ev, frame, redact, tracked)
        if self.video is not None or self.on_frame is not None:
            live = self._live_frame(frame, tracked, redact)
            if self.video is not None:
                self.video.write(render_live_frame(live), wall.timestamp())
            if self.on_frame is not None:
                self.on_frame(live)
        self.metrics.frames_processed += 1
        return events

    def _emit(
        self, ev: Event, frame: Frame | None, redact: np.ndarray | None = None, tracked: Detections | None = None
    ) -> None:
        if ev.phase == "start" and tracked is not None:
            ev = with_trigger_boxes(ev, tracked)
        elif TRIGGER_BOXES not in ev.details and ev.event_id in self._open:
            boxes = self._open[ev.event_id].details.get(TRIGGER_BOXES)
            if boxes is not None:
                ev = dataclasses.replace(ev, details={**ev.details, TRIGGER_BOXES: boxes})
        # the policy the incident's media are made under, fixed at its start (what viewers may be given)
        known = self._open.get(ev.event_id)
        policy = known.media_blur if known is not None and known.media_blur is not None else self.blur
        if ev.media_blur != policy:
            ev = dataclasses.replace(ev, media_blur=policy)
        if ev.phase == "start" and self.snapshots_dir is not None and (frame is not None or not ev.tracker_ids):
            snapshot = self._snapshot(ev, frame, redact)
            if snapshot is not None:
                ev = ev.with_snapshot(str(snapshot))
        elif (opened := self._open.get(ev.event_id)) is not None and opened.snapshot_path:
            ev = ev.with_snapshot(opened.snapshot_path)
        if ev.phase == "end" or ev.end_s is not None:
            self._open.pop(ev.event_id, None)
        else:
            self._open[ev.event_id] = ev
        self.metrics.events += 1
        put_until(self.events_out, EventMessage(ev), self.failed.is_set)

    def _snapshot(self, ev: Event, frame: Frame | None, redact: np.ndarray | None = None) -> Path | None:
        """Write the event's JPEG (complete, or not at all); None when it could not be written.

        The picture is the frame's, or what the event's rule composes (camera health: the last
        good view beside this one; without a frame, beside "no signal"). With ``redact`` (areas in
        pixels of the geometry's frame size) its redacted variant is written first, so a sharp
        snapshot never exists without the one viewers are given.
        """
        assert self.snapshots_dir is not None
        image = self.rules.snapshot_image(ev, frame.image if frame is not None else None)
        if image is None:
            return None
        index = frame.index if frame is not None else ev.start_frame
        path = self.snapshots_dir / f"{self.camera_id}_{index:07d}_{ev.rule_name.replace(':', '-')}_{ev.event_id[:8]}.jpg"
        if redact is not None or (self.blur != "none" and image is not (frame.image if frame is not None else None)):
            # a composed picture (camera health) has no person areas of its own: viewers get it blurred whole
            redacted = (
                redact_image(image, redact, self.geometry.resolution_wh)
                if frame is not None and image is frame.image and redact is not None
                else cv2.GaussianBlur(image, (0, 0), 12)
            )
            if self._write_jpeg(ev, redacted, redacted_path(path)) is None:
                return None
        return self._write_jpeg(ev, image, path)

    def _write_jpeg(self, ev: Event, image: np.ndarray, path: Path) -> Path | None:
        assert self.snapshots_dir is not None
        ok, jpeg = cv2.imencode(".jpg", image)
        if not ok:
            self.snapshots_failed += 1
            log.error("snapshot of event %s could not be encoded", ev.event_id)
            return None
        data = jpeg.tobytes()
        if not (
            self.disk.has_room(self.snapshots_dir, len(data)) or self.disk.make_room(self.snapshots_dir, len(data))
        ):
            self.snapshots_failed += 1
            self.disk.skip("snapshot", path, len(data))
            return None
        try:
            write_whole(path, data)
        except OSError as exc:
            self.snapshots_failed += 1
            self.disk.failed("snapshot", path, exc)
            return None
        self.disk.ok(path)
        return path

    def _live_frame(self, frame: Frame, tracked: Detections, redact: np.ndarray | None = None) -> LiveFrame:
        """The frame with what the annotated view draws on it (nothing is drawn or copied here)."""
        open_events = list(self._open.values())
        return LiveFrame(
            camera_id=self.camera_id,
            index=frame.index,
            timestamp_s=frame.timestamp_s,
            image=frame.image,
            detections=tracked,
            names=self.names,
            resolution_wh=self.geometry.resolution_wh,
            zones=self.geometry.zones,
            lines=self.geometry.lines,
            alert_zones=[e.zone for e in open_events],
            incidents=[f"{e.rule_kind} in {e.zone} ({frame.timestamp_s - e.start_s:.0f} s)" for e in open_events],
            header=f"{self.camera_id}  t={frame.timestamp_s:7.1f} s  frame {frame.index}",
            redact_xyxy=redact,
        )

    def _finish(self, rules: RuleEngine | None = None, *, interrupted: bool = False) -> None:
        """End every open event of ``rules`` (default: all of this camera's) at the last frame's time;
        ``interrupted``: the camera stopped or went offline, not the incident (``details.interrupted``)."""
        wall = wall_time_of(self._last_frame) if self._last_frame is not None else None
        for ev in (self.rules if rules is None else rules).close(self._last_ts, wall):
            if interrupted:
                ev = dataclasses.replace(ev, details={**ev.details, "interrupted": True})
            self._emit(ev, None)
