"""`campusguard scan`: recorded footage through the `watch` pipeline, in parallel and resumable.

Public API:
    `run_scan(loaded, sources, executor, camera_id=..., state_path=..., detections_dir=...)`:
        scan files, folders and globs of videos with one camera section's zones and rules;
        returns a `ScanSummary`.
    `LocalExecutor(workers)`, `RayExecutor(address)`: where the units run.
    `scan_file(job)`: one recording through the pipeline (the unit every executor runs).
    `ScanLedger(path)`: the resumable state: recordings finished (path, size, mtime, camera).
    `Recording`, `find_recordings(sources)`: the video files of the sources.
    `DetectionsParquet`: per-frame detections of one recording as Parquet.

Each recording is one ordered unit (tracking needs its frames in order); recordings run in
parallel. Event ids carry the recording's resolved path as their stream key, so two files of
one camera never share an id, and a re-run of a file upserts the same rows.
"""

from campusguard.app.scan.executors import LocalExecutor, RayExecutor, UnitExecutor
from campusguard.app.scan.ledger import ScanLedger
from campusguard.app.scan.parquet import DetectionsParquet
from campusguard.app.scan.recordings import Recording, find_recordings
from campusguard.app.scan.runner import ScanSummary, default_state_path, run_scan
from campusguard.app.scan.unit import FileResult, ScanJob, scan_file

__all__ = [
    "DetectionsParquet",
    "FileResult",
    "LocalExecutor",
    "RayExecutor",
    "Recording",
    "ScanJob",
    "ScanLedger",
    "ScanSummary",
    "UnitExecutor",
    "default_state_path",
    "find_recordings",
    "run_scan",
    "scan_file",
]
