"""`RetentionCleaner`: the cleanup thread of `watch` and `serve` (a `WatchService` stage).

Every ``check_s`` seconds it looks at the free space of the data volume and the bytes of the
media folders; a full pass (`Pruner.run`) runs every ``interval_s``, and at once when a limit
is crossed or a writer asks (`wake`, `make_room`). A pass that fails (the store unreachable, a
folder unreadable) is logged and tried again at the next round: cleanup never stops detection.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from campusguard.app.config.retention import MEDIA_KINDS
from campusguard.app.infra.throttle import LogThrottle
from campusguard.app.retention.pruner import Pruner, PruneReport, media_files

__all__ = ["RetentionCleaner", "RetentionMetrics"]

log = logging.getLogger("campusguard.app.retention")


@dataclass
class RetentionMetrics:
    """What Prometheus exports of retention (`campusguard.app.console.prom`).

    Attributes:
        kept_bytes: media bytes on disk by kind (snapshots, clips, recordings) after the last pass.
        free_bytes: free bytes of the fullest data volume at the last check.
        files_pruned: files deleted by kind since start (counter).
        rows_pruned: incidents deleted since start (counter).
        bytes_pruned: bytes deleted by kind since start (counter).
        passes: cleanup passes run; failures: passes that raised.
    """

    kept_bytes: dict[str, int] = field(default_factory=dict)
    free_bytes: int = 0
    total_bytes: int = 0
    files_pruned: dict[str, int] = field(default_factory=dict)
    bytes_pruned: dict[str, int] = field(default_factory=dict)
    rows_pruned: int = 0
    passes: int = 0
    failures: int = 0

    def add(self, report: PruneReport) -> None:
        self.rows_pruned += report.rows
        for kind, n in report.files.items():
            self.files_pruned[kind] = self.files_pruned.get(kind, 0) + n
        for kind, n in report.bytes.items():
            self.bytes_pruned[kind] = self.bytes_pruned.get(kind, 0) + n
        self.kept_bytes = dict(report.kept_bytes)
        self.free_bytes = report.free_bytes


class RetentionCleaner:
    """The cleanup thread: periodic passes, and passes on demand.

    Args:
        pruner: what a pass runs.
        interval_s: seconds between full passes.
        check_s: seconds between checks of free space and media size.
        metrics: where the pass results go (a new one if None).
    """

    def __init__(
        self,
        pruner: Pruner,
        *,
        interval_s: float = 300.0,
        check_s: float = 10.0,
        metrics: RetentionMetrics | None = None,
    ) -> None:
        self.pruner = pruner
        self.interval_s = interval_s
        self.check_s = check_s
        self.metrics = metrics or RetentionMetrics()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._need = 0  # bytes asked for from any media
        self._need_recordings = 0  # bytes asked for from recordings only
        self._done = threading.Condition(self._lock)
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._warn = LogThrottle(log, 60.0)
        self._busy = False

    # for the media writers ----------------------------------------------------------------
    def wake(self) -> None:
        """Run a pass now (returns at once); safe from any thread."""
        self._wake.set()

    def make_room(self, nbytes: int, *, wait_s: float = 0.0, recordings_only: bool = False) -> bool:
        """Ask for a pass now that frees ``nbytes`` beyond the free-space floor (recordings first,
        then evidence, oldest first in each; ``recordings_only``: from recordings alone, as the
        recording itself asks, so its room never costs an incident its snapshot).

        Returns at once unless ``wait_s`` > 0; then waits for that pass (at most ``wait_s`` seconds)
        and returns whether the volume now has ``nbytes`` free above the floor. Safe from any thread
        but the cleaner's own.
        """
        with self._lock:
            if recordings_only:
                self._need_recordings = max(self._need_recordings, int(nbytes))
            else:
                self._need = max(self._need, int(nbytes))
            # a pass under way may have read the need before this one: wait for the next
            target = self._generation + (2 if self._busy else 1)
        self._wake.set()
        if wait_s <= 0:
            return False
        deadline = time.monotonic() + wait_s
        with self._done:
            while self._generation < target:
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._done.wait(left)
        free, total = self.pruner.layout.free_bytes()
        return free >= self.pruner.policy.min_free_bytes(total) + nbytes

    # the thread ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="retention", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (a pass under way finishes first, up to ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and timeout_s > 0 and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def over_limit(self) -> bool:
        """Whether free space is under the floor or media over `max_media` now (cheap: stat calls only)."""
        policy = self.pruner.policy
        free, total = self.pruner.layout.free_bytes()
        self.metrics.free_bytes, self.metrics.total_bytes = free, total
        if free < policy.min_free_bytes(total):
            return True
        if policy.max_media_bytes is None:
            return False
        used = sum(n for files in media_files(self.pruner.layout).values() for _, n, _ in files)
        return used > policy.max_media_bytes

    def final_pass(self) -> PruneReport | None:
        """At a stop: one more pass if a limit is crossed now (the last frames' media), else nothing."""
        try:
            over = self.over_limit()
        except OSError:
            return None
        return self.run_pass(writers_idle=True) if over else None

    def run_pass(self, *, writers_idle: bool = False) -> PruneReport | None:
        """One pass now (with any room asked for); None when it failed (logged). ``writers_idle``:
        the pipeline has stopped, no recording is being written."""
        with self._lock:
            need, recordings = self._need, self._need_recordings
            self._need = self._need_recordings = 0
            self._busy = True
        kinds = MEDIA_KINDS if need or not recordings else ("recordings",)
        try:
            report = self.pruner.run(need_bytes=max(need, recordings), need_kinds=kinds, writers_idle=writers_idle)
        except Exception as exc:  # noqa: BLE001 - a failed pass is retried; cleanup never stops the app
            self.metrics.failures += 1
            self._warn.log(
                logging.WARNING, "pass", "retention pass failed (tried again in %.0f s): %s", self.check_s, exc
            )
            return None
        finally:
            with self._done:
                self._generation += 1
                self._busy = False
                self._done.notify_all()
        self.metrics.passes += 1
        self.metrics.add(report)
        if report.rows or report.files:
            log.info(
                "retention: deleted %d incident(s) and %d file(s), %d bytes; free %d bytes",
                report.rows,
                sum(report.files.values()),
                report.total_bytes,
                report.free_bytes,
            )
        return report

    def run(self) -> None:
        """Pass at start, then every ``interval_s``, and at once when woken or over a limit."""
        next_full = time.monotonic()
        while not self._stop.is_set():
            due = time.monotonic() >= next_full or self._wake.is_set()
            self._wake.clear()
            if not due:
                try:
                    due = self.over_limit()
                except OSError as exc:
                    self._warn.log(logging.WARNING, "check", "retention: cannot check free space: %s", exc)
            if due:
                self.run_pass()
                next_full = time.monotonic() + self.interval_s
            self._wake.wait(min(self.check_s, max(0.0, next_full - time.monotonic())))
