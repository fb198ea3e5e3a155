"""`run_scan`: the driver of `campusguard scan`, and the scan's one writer.

::

    find recordings -> skip those the ledger has as done -> check the detector once
      -> submit one unit per recording (largest first) to the executor
      -> as each unit returns: commit its events to the store, then the alert sinks
         (the event writer's `EventWorker.handle`, as in `watch`), then mark the recording done in the ledger
      -> summary: files, frames, events, frames per second

Events reach the store only from here, so SQLite has one writer and a unit that is retried
(a lost Ray task) or re-run (a resumed scan) cannot write twice: its ids are deterministic and
the store upserts them.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import cv2
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from campusguard.app.config import LoadedConfig
from campusguard.app.engine.wiring import DetectorFactory, detector_key
from campusguard.app.engine.writer import EventWorker
from campusguard.app.event_side import EventSide
from campusguard.app.events.recorder import EventRecorder
from campusguard.app.scan.executors import UnitExecutor
from campusguard.app.scan.ledger import ScanLedger
from campusguard.app.scan.recordings import Recording, find_recordings
from campusguard.app.scan.unit import (
    FileResult,
    ScanJob,
    camera_index_for,
    scan_config,
    shared_detector_factory,
)
from campusguard.errors import CampusGuardError, require
from campusguard.models.synthetic_warning import CONFIG_FIX, warn_if_synthetic_model_on_real

__all__ = ["ScanSummary", "default_state_path", "run_scan"]

log = logging.getLogger("campusguard.app.scan")


@dataclass
class ScanSummary:
    """What a scan did.

    Attributes:
        found: recordings named by the sources.
        scanned: recordings scanned to their end in this run.
        already_done: recordings skipped because the ledger had them as done.
        failed: ``(path, one-line reason)`` of recordings that could not be scanned.
        frames: frames processed in this run.
        events: event updates committed (start, update, end).
        incidents: distinct incidents (event ids) among them.
        seconds: wall time of the run.
        ignored: files named by the sources that are not videos.
        stopped: the scan was stopped (SIGTERM, SIGINT) before every recording was scanned; the
            ones not finished are scanned by the next run (the ledger has only the finished ones).
    """

    found: int = 0
    scanned: int = 0
    already_done: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    frames: int = 0
    events: int = 0
    incidents: int = 0
    seconds: float = 0.0
    ignored: int = 0
    stopped: bool = False

    @property
    def frames_per_s(self) -> float:
        """Frames processed per wall-clock second of this run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def clean(self) -> bool:
        """True when no recording failed."""
        return not self.failed

    def line(self) -> str:
        """The one-line summary printed at the end."""
        extra = [f"{self.already_done} already done"] if self.already_done else []
        extra += [f"{len(self.failed)} failed"] if self.failed else []
        extra += [f"{self.ignored} non-video file(s) ignored"] if self.ignored else []
        extra += ["stopped: the rest is scanned by the next run"] if self.stopped else []
        more = f" ({', '.join(extra)})" if extra else ""
        return (
            f"scanned {self.scanned} of {self.found} file(s){more}: {self.frames} frames, "
            f"{self.incidents} incident(s) ({self.events} event updates) in {self.seconds:.1f} s, "
            f"{self.frames_per_s:.1f} frames/s"
        )


def default_state_path(loaded: LoadedConfig) -> Path:
    """The scan ledger beside the config's SQLite event store (``events.db`` -> ``events.scan-state.db``)."""
    return Path(loaded.config.storage.sqlite).with_suffix(".scan-state.db")


def _frame_count(path: Path) -> int:
    """Frames the file announces (0 when unknown), for the progress bar."""
    cap = cv2.VideoCapture(str(path))
    try:
        return max(0, int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)) if cap.isOpened() else 0
    finally:
        cap.release()


def _count_frames(bar: Progress, task: TaskID, recordings: list[Recording]) -> None:
    """Add each recording's announced frame count to the bar's total (a thread: opening many files takes a while)."""
    total = 0
    for rec in recordings:
        total += _frame_count(rec.path)
        bar.update(task, total=total or None)


def _reason(exc: BaseException) -> str:
    """One line for a failed unit (a Ray task error carries its cause; the remote traceback is dropped)."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    message = text[0] if text else ""
    if isinstance(cause, CampusGuardError):
        return message
    return f"{type(cause).__name__}: {message}" if message else type(cause).__name__


def _progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def run_scan(
    loaded: LoadedConfig,
    sources: list[str],
    executor: UnitExecutor,
    *,
    camera_id: str | None = None,
    state_path: Path | None = None,
    detections_dir: Path | None = None,
    detector_factory: DetectorFactory | None = None,
    store: EventRecorder | None = None,
    rescan: bool = False,
    warn_synthetic_model: bool = False,
    out: TextIO | None = None,
    console: Console | None = None,
    stop: threading.Event | None = None,
) -> ScanSummary:
    """Scan recorded footage with the config's camera section; commit events, sinks, ledger.

    Args:
        loaded: the watch config.
        sources: files, folders or globs of videos.
        executor: where units run (`LocalExecutor`, `RayExecutor`); closed on return.
        camera_id: the camera section whose zones and rules apply (default: the only one).
        state_path: the ledger file (default: `default_state_path`).
        detections_dir: write each recording's per-frame detections as Parquet here.
        detector_factory: a picklable detector factory instead of the config's detector.
        store: an event store instead of the config's.
        rescan: scan every recording, also those the ledger has as done.
        warn_synthetic_model: print the one-line warning when the bundled synthetic-only model
            is about to scan anything but CampusGuard's own synthetic video (the CLI does).
        out: where the stdout alert sink writes (default: stdout).
        console: where the progress bar and failure lines go (default: stderr).
        stop: set (by a signal handler) to stop: the units running are ended, the events of the
            finished ones are committed and sent, and the summary says ``stopped``.

    Raises:
        CampusGuardError: bad sources, camera, detector, store or sinks (before anything runs).
    """
    t0 = time.perf_counter()
    console = console or Console(stderr=True)
    try:
        camera_index = camera_index_for(loaded, camera_id)
        camera = loaded.config.cameras[camera_index]
        recordings, ignored = find_recordings(sources)
        if detections_dir is not None:
            require("pyarrow", "parquet")
        job_config = scan_config(loaded, camera_index)
        # the detector is checked once here, not once per file (kept for an in-process unit)
        detector = shared_detector_factory(job_config, detector_factory)(*detector_key(job_config.config, camera))
        loaded.check_class_names(camera_index, detector.names)
        del detector
        if warn_synthetic_model:
            warn_if_synthetic_model_on_real(
                detector_key(job_config.config, camera)[0], [r.path for r in recordings], fix=CONFIG_FIX
            )
        ledger = ScanLedger(state_path or default_state_path(loaded))
    except BaseException:
        executor.close(cancel=True)
        raise
    summary = ScanSummary(found=len(recordings), ignored=ignored)
    try:
        opened = EventSide.batch(loaded, out or sys.stdout, store=store).open()  # old footage: no escalation
    except BaseException:
        ledger.close()
        executor.close(cancel=True)
        raise
    writer = EventWorker(queue.Queue(), opened.store, opened.sinks, [camera.id], threading.Event())
    todo = [r for r in recordings if rescan or not ledger.is_done(r, camera.id)]
    summary.already_done = len(recordings) - len(todo)
    interrupted = True
    incidents: set[str] = set()
    try:
        with _progress_bar(console) as bar:
            files_task = bar.add_task("files", total=len(todo))
            frames_task = bar.add_task("frames", total=None)
            counting = threading.Thread(
                target=_count_frames, args=(bar, frames_task, todo), name="scan-frame-count", daemon=True
            )
            counting.start()  # the bar's total grows as files are probed; the scan does not wait for it
            futures: dict[Future[FileResult], Recording] = {}
            for rec in sorted(todo, key=lambda r: -r.size):  # largest first: the last to finish is short
                job = ScanJob(job_config, camera_index, rec, detections_dir, detector_factory)
                futures[executor.submit(job)] = rec
            reported: dict[str, int] = {}  # frames reported by running units
            finished: set[str] = set()
            pending = set(futures)
            while pending and not (stop is not None and stop.is_set()):
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for key, n in executor.progress():
                    if key in finished:
                        continue  # a late report of a unit whose frames were counted when it returned
                    reported[key] = reported.get(key, 0) + n
                    bar.advance(frames_task, n)
                for future in done:
                    rec = futures[future]
                    finished.add(rec.key)
                    try:
                        result = future.result()
                    except CampusGuardError as exc:
                        _fail(bar, files_task, summary, rec, _reason(exc))
                        continue
                    except Exception as exc:  # a worker crashed (killed process, lost node after retries)
                        log.debug("unit %s failed", rec.path, exc_info=True)
                        _fail(bar, files_task, summary, rec, _reason(exc))
                        continue
                    for event in result.events:  # committed, then the sinks: the `watch` event worker's order
                        writer.handle(event)
                        incidents.add(event.event_id)
                    ledger.mark_done(rec, camera.id, result.frames, len(result.events))
                    summary.scanned += 1
                    summary.frames += result.frames
                    summary.events += len(result.events)
                    bar.advance(frames_task, result.frames - reported.pop(rec.key, 0))
                    bar.advance(files_task, 1)
        interrupted = bool(pending)  # stopped before the last unit returned
        summary.stopped = interrupted
    finally:
        executor.close(cancel=interrupted)
        writer.close()
        ledger.close()
    summary.incidents = len(incidents)
    summary.seconds = time.perf_counter() - t0
    return summary


def _fail(bar: Progress, files_task: TaskID, summary: ScanSummary, rec: Recording, reason: str) -> None:
    """Report a recording that could not be scanned on one line, and count it."""
    summary.failed.append((rec.path, reason))
    bar.console.print(f"skipped {rec.path}: {reason}", markup=False, highlight=False, soft_wrap=True)
    bar.advance(files_task, 1)
