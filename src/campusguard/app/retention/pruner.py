"""`Pruner`: plan what retention deletes, then delete it (database first, then files).

`Pruner.plan` reads the store and the folders and returns a `PrunePlan`; nothing is changed,
so ``campusguard prune --dry-run`` prints the plan. `Pruner.apply` runs it in the order that
keeps every row pointing at a file that exists:

1. expired incidents: their rows are deleted (batches of ids; kept ones are skipped by the
   statement itself), then their snapshot and clip files;
2. snapshots deleted on their own (expired sooner than their incident, or for space): the
   rows' ``snapshot_path`` is cleared and committed, then the files are deleted;
3. clips, recordings and orphans (files no row names, older than the grace period);
4. dead-letter and JSONL log lines older than their retention are dropped (the lines kept are
   written to a new file renamed over the old: a crash mid-trim leaves one of the two whole);
5. the SQLite file is vacuumed when much of it is free pages (`reclaim_space`).

A redacted variant (blur by role, `campusguard.app.media.redact.redacted_path`) goes with its
sharp file and counts as that file's incident's media.

Media of incidents that are kept or still open are never deleted. Over `max_media` or under
the free-space floor, continuous recordings go first (oldest first, a dead run's temporary
segments included), then incident evidence: clips, then snapshots (oldest first in each), so
the snapshots stay while they fit, until both hold. Event rows are never deleted for space. A recording that asks for room gets it from recordings
only.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from campusguard.app.config.retention import MEDIA_KINDS
from campusguard.app.events.protocols import PrunableStore
from campusguard.app.infra.durable import locked_for_rewrite, replace_durably
from campusguard.app.media.redact import redacted_path, sharp_path
from campusguard.app.retention.policy import MediaLayout, RetentionPolicy, camera_of

__all__ = ["PlannedFile", "PrunableStore", "PrunePlan", "PruneReport", "Pruner", "trim_jsonl"]

log = logging.getLogger("campusguard.app.retention")

_OPEN_FILE_S = 5.0  # a recording written to in the last seconds is the open one: never deleted
_KINDS = ("incidents", *MEDIA_KINDS, "orphans", "dead_letters", "logs")
# for space: continuous recordings first, then incident evidence, the large clips before the
# snapshots (the evidence a row names, and the smallest), so the snapshots stay while they fit
# (the cameras' track files after the recordings: small, and what `campusguard replay` needs)
_SPACE_ORDER = {"recordings": 0, "tracks": 1, "clips": 2, "snapshots": 3}
_OPEN_TRACKS_S = 120.0  # a track file written to in the last two minutes may be the open one


@dataclass(frozen=True)
class PlannedFile:
    """One file to delete: its kind (`MEDIA_KINDS` or ``orphans``), path, size and why."""

    kind: str
    path: Path
    nbytes: int
    reason: str  # "expired", "incident", "orphan", "space"


@dataclass
class PrunePlan:
    """What one pass deletes. Nothing is changed until `Pruner.apply`.

    Attributes:
        rows: ids of incidents deleted (their media are in ``files``).
        cleared: ids of incidents whose snapshot is deleted while the row stays.
        files: files to delete.
        trims: ``(kind, path, cutoff)`` JSONL files whose lines older than ``cutoff`` are dropped,
            with the lines and bytes that would go in ``trim_counts``.
        media_bytes: snapshot, clip and recording bytes by kind before the pass.
        free_bytes: free bytes of the fullest data volume before the pass.
    """

    rows: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    files: list[PlannedFile] = field(default_factory=list)
    trims: list[tuple[str, Path, datetime]] = field(default_factory=list)
    trim_counts: dict[Path, tuple[int, int]] = field(default_factory=dict)
    media_bytes: dict[str, int] = field(default_factory=dict)
    free_bytes: int = 0

    def report(self) -> PruneReport:
        """What applying the plan would free (`--dry-run`)."""
        out = PruneReport(rows=len(self.rows), snapshots_cleared=len(self.cleared), dry_run=True)
        for f in self.files:
            out.add_file(f.kind, f.nbytes)
        for kind, path, _ in self.trims:
            lines, nbytes = self.trim_counts.get(path, (0, 0))
            out.lines[kind] = out.lines.get(kind, 0) + lines
            out.bytes[kind] = out.bytes.get(kind, 0) + nbytes
        out.kept_bytes = dict(self.media_bytes)
        for f in self.files:
            if f.kind in out.kept_bytes:
                out.kept_bytes[f.kind] = max(0, out.kept_bytes[f.kind] - f.nbytes)
        out.free_bytes = self.free_bytes
        return out


@dataclass
class PruneReport:
    """What a pass deleted (or, ``dry_run``, would delete): rows, files and bytes by kind."""

    rows: int = 0
    snapshots_cleared: int = 0
    files: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    reclaimed_db_bytes: int = 0
    kept_bytes: dict[str, int] = field(default_factory=dict)
    free_bytes: int = 0
    errors: int = 0
    dry_run: bool = False

    def add_file(self, kind: str, nbytes: int) -> None:
        self.files[kind] = self.files.get(kind, 0) + 1
        self.bytes[kind] = self.bytes.get(kind, 0) + nbytes

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    def lines_of_text(self) -> list[str]:
        """The summary `campusguard prune` prints."""
        verb = "would free" if self.dry_run else "freed"
        out = [f"incidents: {self.rows} row(s) {'would be ' if self.dry_run else ''}deleted"]
        if self.snapshots_cleared:
            out.append(f"snapshots detached from {self.snapshots_cleared} kept row(s)")
        for kind in _KINDS[1:]:
            if kind in self.files or kind in self.lines:
                what = f"{self.files[kind]} file(s)" if kind in self.files else f"{self.lines[kind]} line(s)"
                out.append(f"{kind}: {what}, {verb} {_human(self.bytes.get(kind, 0))}")
        out.append(f"total: {verb} {_human(self.total_bytes)}")
        if self.reclaimed_db_bytes:
            out.append(f"database: {_human(self.reclaimed_db_bytes)} given back (VACUUM)")
        kept = ", ".join(f"{k} {_human(v)}" for k, v in sorted(self.kept_bytes.items()))
        out.append(f"media kept: {kept or 'none'}; free space {_human(self.free_bytes)}")
        return out


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def is_part_segment(name: str) -> bool:
    """A recording segment still under its hidden temporary name (``.<name>.part.mp4``,
    `campusguard.app.media.annotate.AnnotatedVideoWriter`): the open one, or one a dead run left."""
    return name.startswith(".") and name.endswith(".part.mp4")


def _files(folder: Path, *, parts: bool = False) -> list[tuple[Path, int, float]]:
    """``(path, bytes, mtime)`` of the plain files directly in ``folder`` (none when it is missing);
    hidden files are left out, but for ``parts`` the recording segments under their temporary name
    (`is_part_segment`): they take room too, and a dead run's go like any recording."""
    out: list[tuple[Path, int, float]] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    shown = not entry.name.startswith(".") or (parts and is_part_segment(entry.name))
                    if entry.is_file(follow_symlinks=False) and shown:
                        st = entry.stat(follow_symlinks=False)
                        out.append((Path(entry.path), st.st_size, st.st_mtime))
                except OSError:
                    continue
    except (FileNotFoundError, NotADirectoryError):
        pass
    return out


def media_files(layout: MediaLayout) -> dict[str, list[tuple[Path, int, float]]]:
    """``{kind: [(path, bytes, mtime)]}`` of the media folders, recordings' temporary segments included."""
    return {kind: _files(folder, parts=kind == "recordings") for kind, folder in layout.media_dirs().items()}


def _resolved(path: str | Path) -> Path:
    try:
        return Path(path).resolve()
    except OSError:
        return Path(os.path.abspath(path))


def _iso(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _line_time(line: str) -> datetime | None:
    """The time of one JSONL line: ``failed_at`` (dead letters), else the event's end or start."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    event = data.get("event") if isinstance(data.get("event"), dict) else data
    for source, key in ((data, "failed_at"), (event, "ended_at"), (event, "started_at"), (data, "time")):
        value = source.get(key) if isinstance(source, dict) else None
        if isinstance(value, str):
            try:
                return _iso(value)
            except ValueError:
                continue
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
    return None


def _split_old(path: Path, cutoff: datetime) -> tuple[bytes, int, int] | None:
    """``(text to keep, lines dropped, bytes dropped)`` of a JSONL file, or None when nothing is due."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _split_data(data, cutoff)


def _split_data(data: bytes, cutoff: datetime) -> tuple[bytes, int, int] | None:
    """`_split_old` of the file's bytes.

    Lines older than ``cutoff`` at the head of the file go; the file is append-only, so the
    first line that is not old ends the scan. A line that is not JSON (a write cut by a crash
    before lines were appended whole) goes with the old line before it, so it never stops trims.
    """
    pos = 0
    dropped = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a line still being written
        text = data[pos:end].decode("utf-8", errors="replace")
        when = _line_time(text)
        if when is None and not (dropped and _broken(text)):
            break
        if when is not None and when >= cutoff:
            break
        pos = end + 1
        dropped += 1
    return (data[pos:], dropped, pos) if dropped else None


def _broken(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return True
    return False


def trim_jsonl(path: Path, cutoff: datetime) -> tuple[int, int]:
    """Drop the lines of an append-only JSONL file older than ``cutoff``; ``(lines, bytes)``.

    The lines kept are written to a new file renamed over the old one (`replace_durably`): a
    crash (SIGKILL) mid-trim leaves the old file or the new one, whole. The file's lock
    (`locked_for_rewrite`) holds a sink's appends (`AppendLog`) from the read to the rename;
    they then go to the new file.
    """
    try:
        with locked_for_rewrite(path) as fd:
            if fd is None:
                return 0, 0
            with os.fdopen(os.dup(fd), "rb") as fh:
                split = _split_data(fh.read(), cutoff)
            if split is None:
                return 0, 0
            keep, lines, nbytes = split
            replace_durably(path, keep)
    except OSError as exc:
        log.warning("retention: cannot trim %s: %s", path, exc)
        return 0, 0
    return lines, nbytes


class Pruner:
    """Plans and applies retention for one store and one `MediaLayout`.

    Args:
        policy: the durations and limits.
        layout: the folders and files.
        store: the event store, or None (media and logs only).
        camera_ids: the cameras of the config (media file names start with one).
    """

    def __init__(
        self,
        policy: RetentionPolicy,
        layout: MediaLayout,
        store: PrunableStore | None,
        camera_ids: list[str] | None = None,
    ) -> None:
        self.policy = policy
        self.layout = layout
        self.store = store
        self.camera_ids = list(camera_ids or [])
        self.started_at = time.time()  # temporary segments older than this are a dead run's

    # planning ---------------------------------------------------------------------------------
    def plan(
        self,
        now: datetime | None = None,
        *,
        need_bytes: int = 0,
        need_kinds: tuple[str, ...] = MEDIA_KINDS,
        writers_idle: bool = False,
    ) -> PrunePlan:
        """What is due at ``now``; ``need_bytes``: free this much beyond the free-space floor too,
        from media of ``need_kinds`` only (a recording asking for room takes it from recordings,
        never from the incidents' evidence).

        Over `max_media` or under the floor, continuous recordings go first, then incident evidence
        (clips, then snapshots), oldest first within each; media of kept or open incidents never.

        The newest recording of each camera, when written to in the last seconds, is the one being
        written and is left alone, unless ``writers_idle`` (the pipeline has stopped)."""
        now = now or datetime.now(UTC)
        wall = now.timestamp()
        policy = self.policy
        plan = PrunePlan()
        if not policy.enabled:
            return plan
        planned: set[Path] = set()

        def add(kind: str, path: Path, nbytes: int, reason: str) -> None:
            key = _resolved(path)
            if key not in planned:
                planned.add(key)
                plan.files.append(PlannedFile(kind, path, nbytes, reason))
                variant = redacted_path(path)
                if kind in ("snapshots", "clips") and sharp_path(path) == path and _resolved(variant) in sizes:
                    add(kind, variant, sizes[_resolved(variant)], reason)  # the viewers' copy goes with it

        media = media_files(self.layout)
        writing: set[Path] = set()  # each camera's newest recording, if it was written to just now
        if not writers_idle:
            newest: dict[str | None, tuple[float, Path]] = {}
            for path, _, mtime in media.get("recordings", []):
                cam = camera_of(path.name, self.camera_ids)
                if cam not in newest or mtime > newest[cam][0]:
                    newest[cam] = (mtime, path)
            writing = {p for m, p in newest.values() if m >= wall - _OPEN_FILE_S}
            # this run's segments under their temporary name are open (even while their camera is
            # silent); a dead run's are recordings like any other (finished or removed at start)
            writing |= {
                p for p, _, m in media.get("recordings", []) if is_part_segment(p.name) and m >= self.started_at
            }
            writing |= {p for p, _, m in media.get("tracks", []) if m >= wall - _OPEN_TRACKS_S}
        plan.media_bytes = {kind: sum(n for _, n, _ in files) for kind, files in media.items()}
        sizes = {_resolved(p): n for files in media.values() for p, n, _ in files}
        clips_dir = self.layout.clips_dir

        # 1. expired incidents, with their media
        protected: set[str] = set()
        named: dict[Path, tuple[str, bool]] = {}  # snapshot file -> (event id, deletable)
        if self.store is not None:
            cutoff = now - timedelta(seconds=policy.shortest("incidents"))
            for event_id, camera, snapshot, ended in self.store.expired(cutoff):
                if _iso(ended) >= now - timedelta(seconds=policy.ttl("incidents", camera)):
                    continue
                plan.rows.append(event_id)
                if snapshot:
                    add("snapshots", Path(snapshot), sizes.get(_resolved(snapshot), 0), "incident")
                if clips_dir is not None:
                    clip = clips_dir / f"{event_id}.mp4"
                    if _resolved(clip) in sizes:
                        add("clips", clip, sizes[_resolved(clip)], "incident")
            gone = set(plan.rows)
            protected = self.store.protected_ids()
            # 2. snapshots expired before their incident
            for event_id, camera, snapshot, is_open, kept, ended in self.store.media_rows():
                named[_resolved(snapshot)] = (event_id, not (is_open or kept or event_id in protected))
                if event_id in gone or is_open or kept:
                    continue
                if _iso(ended) < now - timedelta(seconds=policy.ttl("snapshots", camera)):
                    plan.cleared.append(event_id)
                    add("snapshots", Path(snapshot), sizes.get(_resolved(snapshot), 0), "expired")

        # 3. clips, recordings, orphans
        grace = wall - policy.orphan_grace_s
        for kind, files in media.items():
            for path, nbytes, mtime in files:
                if kind == "snapshots":
                    if _resolved(sharp_path(path)) not in named and self.store is not None and mtime < grace:
                        add("orphans", path, nbytes, "orphan")
                    continue
                if kind == "clips":
                    event_id = sharp_path(path).stem
                    if event_id in protected:
                        continue
                    if mtime < wall - policy.ttl("clips", camera_of(event_id, self.camera_ids)):
                        add("clips", path, nbytes, "expired")
                    continue
                owner_cam = camera_of(path.name, self.camera_ids)
                if path not in writing and mtime < wall - policy.ttl(kind, owner_cam):
                    add(kind, path, nbytes, "expired")

        # 4. logs and dead letters
        for kind, paths in (("dead_letters", self.layout.dead_letters), ("logs", self.layout.logs)):
            cutoff_t = now - timedelta(seconds=policy.seconds[kind])
            for path in paths:
                split = _split_old(path, cutoff_t)
                if split is not None:
                    plan.trims.append((kind, path, cutoff_t))
                    plan.trim_counts[path] = (split[1], split[2])

        # 5. space: max_media and the free-space floor; recordings before evidence, oldest first in each
        free, total = self.layout.free_bytes()
        plan.free_bytes = free
        freed = sum(f.nbytes for f in plan.files)
        remaining = sum(plan.media_bytes.values()) - sum(f.nbytes for f in plan.files if f.kind in MEDIA_KINDS)
        over = 0 if policy.max_media_bytes is None else max(0, remaining - policy.max_media_bytes)
        # the segments being written count, but evidence never goes to make up for them: they go
        # (recordings first) once finished, at the latest in the pass at the stop
        open_bytes = sum(n for k in ("recordings", "tracks") for p, n, _ in media.get(k, []) if p in writing)
        over_evidence = over - open_bytes
        floor = policy.min_free_bytes(total)
        short = max(0, floor - free - freed)  # any media may go for the floor
        asked = max(0, floor + need_bytes - free - freed) - short  # only ``need_kinds`` for the request
        if over or short or asked:
            candidates: list[tuple[int, float, str, Path, int, str | None]] = []
            for kind, files in media.items():
                for path, nbytes, mtime in files:
                    key = _resolved(path)
                    if key in planned or sharp_path(path) != path:  # a redacted variant goes with its sharp file
                        continue
                    owner: str | None = None
                    if kind == "snapshots":
                        row = named.get(key)
                        if row is not None:
                            if not row[1]:
                                continue  # kept or open incident
                            owner = row[0]
                        elif mtime >= grace and self.store is not None:
                            continue  # perhaps not committed yet
                    elif (kind == "clips" and path.stem in protected) or (
                        kind in ("recordings", "tracks") and path in writing
                    ):
                        continue
                    candidates.append((_SPACE_ORDER[kind], mtime, kind, path, nbytes, owner))
            candidates.sort(key=lambda c: (c[0], c[1]))
            for _, _, kind, path, nbytes, owner in candidates:
                budget = over if kind in ("recordings", "tracks") else over_evidence
                if not (budget > 0 or short > 0 or (asked > 0 and kind in need_kinds)):
                    continue
                if owner is not None:
                    plan.cleared.append(owner)
                add(kind, path, nbytes, "space")
                over -= nbytes
                over_evidence -= nbytes
                asked -= nbytes if kind in need_kinds else max(0, nbytes - max(0, short))  # room beyond the floor
                short -= nbytes
        return plan

    # applying ---------------------------------------------------------------------------------
    def apply(self, plan: PrunePlan, *, vacuum: bool = False) -> PruneReport:
        """Delete what ``plan`` lists: rows, then snapshot paths, then files, then old log lines."""
        report = PruneReport()
        deleted_rows: set[str] = set(plan.rows)
        if self.store is not None and plan.rows:
            report.rows = self.store.delete_events(plan.rows, batch=self.policy.batch_rows)
        if self.store is not None and plan.cleared:
            report.snapshots_cleared = self.store.clear_snapshots(
                [e for e in plan.cleared if e not in deleted_rows], batch=self.policy.batch_rows
            )
        for f in plan.files:
            try:
                f.path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                report.errors += 1
                log.warning("retention: cannot delete %s: %s", f.path, exc)
                continue
            report.add_file(f.kind, f.nbytes)
        for kind, path, cutoff in plan.trims:
            lines, nbytes = trim_jsonl(path, cutoff)
            if lines:
                report.lines[kind] = report.lines.get(kind, 0) + lines
                report.bytes[kind] = report.bytes.get(kind, 0) + nbytes
        if self.store is not None and (report.rows or vacuum):
            report.reclaimed_db_bytes = self.store.reclaim_space(force=vacuum and report.rows > 0)
        report.kept_bytes = {kind: sum(n for _, n, _ in files) for kind, files in media_files(self.layout).items()}
        report.free_bytes = self.layout.free_bytes()[0]
        return report

    def run(
        self,
        now: datetime | None = None,
        *,
        need_bytes: int = 0,
        need_kinds: tuple[str, ...] = MEDIA_KINDS,
        vacuum: bool = False,
        writers_idle: bool = False,
    ) -> PruneReport:
        """`plan` then `apply`; the report."""
        t0 = time.monotonic()
        plan = self.plan(now, need_bytes=need_bytes, need_kinds=need_kinds, writers_idle=writers_idle)
        report = self.apply(plan, vacuum=vacuum)
        log.debug("retention pass in %.2f s: %s", time.monotonic() - t0, report)
        return report
