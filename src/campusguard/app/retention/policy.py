"""`RetentionPolicy` (how long, how much) and `MediaLayout` (where), built from a `WatchConfig`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from campusguard.app.alerts.registry import SINKS
from campusguard.app.config.retention import RETENTION_KINDS, parse_duration, parse_free
from campusguard.app.config.root import WatchConfig

__all__ = ["MediaLayout", "RetentionPolicy", "camera_of"]


@dataclass(frozen=True)
class MediaLayout:
    """The folders and files retention looks after.

    Attributes:
        data_dir: the folder of the SQLite file (the event store's, the spool's, the outboxes'):
            its volume's free space is watched.
        snapshots_dir: incident snapshots (JPEG), named by the rows' ``snapshot_path``.
        clips_dir: incident clips, ``<event_id>.mp4``.
        recordings_dir: annotated recordings, ``<camera>...`` files.
        tracks_dir: the cameras' track files (`campusguard.app.tracks`), ``<camera>_...`` files.
        dead_letters: the sinks' dead-letter JSONL files.
        logs: JSONL alert logs.
    """

    data_dir: Path
    snapshots_dir: Path | None = None
    clips_dir: Path | None = None
    recordings_dir: Path | None = None
    tracks_dir: Path | None = None
    dead_letters: tuple[Path, ...] = ()
    logs: tuple[Path, ...] = ()

    @classmethod
    def from_config(
        cls, config: WatchConfig, *, clips_dir: Path | None = None, serve_defaults: bool = False
    ) -> MediaLayout:
        """The layout `watch` writes with ``config`` (and `serve`'s clip folder if given).

        ``serve_defaults``: also `serve`'s default media folders beside the SQLite file
        (``media/snapshots`` when no snapshot folder is set, ``media/clips``), as `campusguard prune` does.
        """
        outputs = config.outputs
        media = Path(config.storage.sqlite).parent / "media"
        if serve_defaults and clips_dir is None:
            clips_dir = media / "clips"
        snapshots = outputs.snapshots_dir or (str(media / "snapshots") if serve_defaults else None)
        dead: list[Path] = []
        logs: list[Path] = []
        for sink in config.alerts:  # each sink's files, as its registry entry names them
            files = SINKS.files(sink, config.storage.sqlite)
            if files.log is not None:
                logs.append(files.log)
            if files.dead_letters is not None:
                dead.append(files.dead_letters)
        return cls(
            data_dir=Path(config.storage.sqlite).parent,
            snapshots_dir=Path(snapshots) if snapshots else None,
            clips_dir=clips_dir,
            recordings_dir=Path(outputs.annotated_video_dir) if outputs.annotated_video_dir else None,
            tracks_dir=config.storage.tracks_path(),
            dead_letters=tuple(dict.fromkeys(dead)),
            logs=tuple(dict.fromkeys(logs)),
        )

    def media_dirs(self) -> dict[str, Path]:
        """``{kind: folder}`` of the media folders that are set (`MEDIA_KINDS`)."""
        dirs = {
            "snapshots": self.snapshots_dir,
            "clips": self.clips_dir,
            "recordings": self.recordings_dir,
            "tracks": self.tracks_dir,
        }
        return {k: v for k, v in dirs.items() if v is not None}

    def free_bytes(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the fullest volume among the data folder and the media folders."""
        best: tuple[int, int] | None = None
        for folder in (self.data_dir, *self.media_dirs().values()):
            probe = folder
            while not probe.exists() and probe != probe.parent:
                probe = probe.parent
            usage = shutil.disk_usage(probe)
            if best is None or usage.free < best[0]:
                best = (usage.free, usage.total)
        assert best is not None
        return best


@dataclass(frozen=True)
class RetentionPolicy:
    """How long each kind is kept (seconds, per camera) and how much media may take.

    Attributes:
        seconds: ``{kind: seconds}`` for every kind of `RETENTION_KINDS` (the global section).
        cameras: ``{camera_id: {kind: seconds}}`` for cameras with their own durations.
        max_media_bytes: snapshots, clips and recordings together at most this (None: no limit).
        min_free: the free-space floor as written (a size or a percentage).
        orphan_grace_s: files no row names are deleted once this old.
        batch_rows: incidents per DELETE.
        enabled: False deletes nothing.
    """

    seconds: dict[str, float]
    cameras: dict[str, dict[str, float]] = field(default_factory=dict)
    max_media_bytes: int | None = None
    min_free: str = "1GB"
    orphan_grace_s: float = 3600.0
    batch_rows: int = 500
    enabled: bool = True

    @classmethod
    def from_config(cls, config: WatchConfig) -> RetentionPolicy:
        r = config.retention
        return cls(
            seconds={k: r.seconds(k) for k in RETENTION_KINDS},
            cameras={
                c.id: {k: r.seconds(k, c.retention) for k in RETENTION_KINDS} for c in config.cameras if c.retention
            },
            max_media_bytes=r.max_media_bytes(),
            min_free=r.min_free,
            orphan_grace_s=parse_duration(r.orphan_grace),
            batch_rows=r.batch_rows,
            enabled=r.enabled,
        )

    def ttl(self, kind: str, camera_id: str | None = None) -> float:
        """Seconds ``kind`` is kept for ``camera_id`` (its override, else the global value)."""
        own = self.cameras.get(camera_id or "")
        return own[kind] if own is not None else self.seconds[kind]

    def shortest(self, kind: str) -> float:
        """The shortest duration of ``kind`` over the global value and every camera's."""
        return min([self.seconds[kind], *(c[kind] for c in self.cameras.values())])

    def min_free_bytes(self, total_bytes: int) -> int:
        return parse_free(self.min_free, total_bytes)

    def with_older_than(self, seconds: float) -> RetentionPolicy:
        """Every duration replaced by ``seconds`` (`campusguard prune --older-than`); orphans too."""
        return RetentionPolicy(
            seconds={k: seconds for k in self.seconds},
            cameras={},
            max_media_bytes=self.max_media_bytes,
            min_free=self.min_free,
            orphan_grace_s=min(self.orphan_grace_s, seconds),
            batch_rows=self.batch_rows,
            enabled=True,
        )


def camera_of(name: str, camera_ids: list[str]) -> str | None:
    """The camera a media file name starts with (``<camera>_...``, ``<camera>.mp4``, ``<camera>.001.mp4``):
    the longest matching id followed by ``_``, ``.`` or ``-``, else None."""
    best: str | None = None
    for cid in camera_ids:
        fits = name.startswith(cid) and len(name) > len(cid) and name[len(cid)] in "_.-"
        if fits and (best is None or len(cid) > len(best)):
            best = cid
    return best
