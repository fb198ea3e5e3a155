"""The retention section: how long incidents, media and logs are kept, and how much disk media may use.

Durations are text such as ``90d``, ``12h``, ``30m``, ``45s``, ``2w`` (``0s``: keep nothing that
has ended); sizes such as ``50GB``, ``2MB``, ``512KiB`` (decimal ``KB``/``MB``/``GB``/``TB``,
binary ``KiB``/``MiB``/``GiB``/``TiB``); the free-space floor is a size or a percentage of the
data volume (``5%``). A bad value is a config error naming the file and line like any other.

The global section applies to every camera; a camera's own ``retention:`` overrides the
durations of its incidents and media (``max_media`` and ``min_free`` are about the volume and
stay global). `campusguard.app.retention` applies it.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from campusguard.app.config.base import ConfigModel

__all__ = [
    "CameraRetentionConfig",
    "MEDIA_KINDS",
    "RETENTION_KINDS",
    "RetentionConfig",
    "parse_duration",
    "parse_free",
    "parse_size",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_DURATION_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)
_SIZE_B = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")

RETENTION_KINDS: tuple[str, ...] = (
    "incidents",
    "snapshots",
    "clips",
    "recordings",
    "tracks",
    "dead_letters",
    "logs",
)
"""What the retention section names a duration for."""
MEDIA_KINDS: tuple[str, ...] = ("snapshots", "clips", "recordings", "tracks")
"""The media `max_media` and `min_free` count (the oldest go first when over); ``tracks``: the
cameras' track files (`campusguard replay`)."""


def parse_duration(text: str | float | int) -> float:
    """Seconds of a duration: ``30d``, ``12h``, ``15m``, ``45s``, ``2w`` (a bare number is seconds).

    Raises:
        ValueError: not a duration, naming the forms.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"duration must be >= 0, got {text}")
        return float(text)
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a duration; use a number and a unit: 45s, 30m, 12h, 30d, 2w")
    return float(m.group(1)) * _DURATION_S[m.group(2)]


def parse_size(text: str | int) -> int:
    """Bytes of a size: ``2MB``, ``50GB``, ``512KiB`` (a bare number is bytes).

    Raises:
        ValueError: not a size, naming the forms.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"size must be >= 0, got {text}")
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size; use a number and a unit: 500MB, 50GB, 2TB, 512MiB")
    return int(float(m.group(1)) * _SIZE_B[m.group(2).lower()])


AUTO_FREE_BYTES = 10**9
AUTO_FREE_FRACTION = 0.05


def parse_free(text: str | int, total_bytes: int) -> int:
    """Bytes of a free-space floor: a size (`parse_size`), a percentage of ``total_bytes`` (``5%``),
    or ``auto``: 1 GB, but at most 5% of the volume (a small volume is not emptied of media to keep
    a floor it can never reach)."""
    if str(text).strip().lower() == "auto":
        return min(AUTO_FREE_BYTES, int(AUTO_FREE_FRACTION * total_bytes))
    m = _PERCENT.match(str(text))
    if m:
        return int(float(m.group(1)) / 100.0 * total_bytes)
    return parse_size(text)


def _check_duration(value: str | None) -> str | None:
    if value is not None:
        parse_duration(value)
    return value


class CameraRetentionConfig(ConfigModel):
    """One camera's retention: any duration given here replaces the global one for its incidents and media."""

    incidents: str | None = Field(
        None, title="Incidents", description="Keep this camera's ended incidents this long (e.g. 365d); none: global."
    )
    snapshots: str | None = Field(
        None, title="Snapshots", description="Keep this camera's incident snapshots this long; none: global."
    )
    clips: str | None = Field(
        None, title="Clips", description="Keep this camera's incident clips this long; none: global."
    )
    recordings: str | None = Field(
        None, title="Recordings", description="Keep this camera's annotated recordings this long; none: global."
    )

    @field_validator("incidents", "snapshots", "clips", "recordings")
    @classmethod
    def _check_durations(cls, value: str | None) -> str | None:
        return _check_duration(value)


class RetentionConfig(ConfigModel):
    """How long things are kept and how much disk media may take; enforced by a cleanup thread in `watch`
    and `serve`, and by `campusguard prune`. Incidents an operator marked as kept are never deleted."""

    incidents: str = Field(
        "90d",
        title="Incidents",
        description="Delete ended incidents (rows, with their snapshot and clip) this long after they ended.",
    )
    snapshots: str = Field(
        "30d",
        title="Snapshots",
        description="Delete incident snapshots this long after the incident ended (the row stays, without it).",
    )
    clips: str = Field("30d", title="Clips", description="Delete incident clips this long after they were written.")
    recordings: str = Field(
        "7d", title="Recordings", description="Delete annotated recording files this long after their last write."
    )
    tracks: str = Field(
        "30d",
        title="Tracks",
        description="Delete the cameras' track files (what `campusguard replay` runs rules over) this long after "
        "their last write.",
    )
    dead_letters: str = Field(
        "30d", title="Dead letters", description="Drop webhook dead-letter lines older than this."
    )
    logs: str = Field("30d", title="JSONL logs", description="Drop lines of JSONL alert logs older than this.")
    max_media: str | None = Field(
        None,
        title="Most media",
        description=(
            "Snapshots, clips, recordings and tracks together take at most this much (e.g. 50GB); the oldest go first, "
            "kept incidents' media never. None: no limit but `min_free`."
        ),
    )
    min_free: str = Field(
        "auto",
        title="Free-space floor",
        description=(
            "When the data volume has less free space than this (a size, a percentage such as 5%, or auto: 1GB but "
            "at most 5% of the volume), the oldest "
            "media are deleted at once until it has it again; event rows are never deleted for space."
        ),
    )
    orphan_grace: str = Field(
        "1h",
        title="Orphan grace",
        description="Media files that no incident names are deleted once they are this old.",
    )
    interval_s: float = Field(
        300.0,
        gt=0,
        le=86400,
        title="Cleanup interval",
        description="Seconds between full cleanup passes (free space and media size are checked every check_s).",
    )
    check_s: float = Field(
        10.0, gt=0, le=3600, title="Check interval", description="Seconds between checks of free space and media size."
    )
    batch_rows: int = Field(
        500, ge=1, le=100_000, title="Rows per batch", description="Incidents deleted per statement."
    )
    enabled: bool = Field(True, title="Enabled", description="False: never delete anything (not recommended).")

    @field_validator("incidents", "snapshots", "clips", "recordings", "tracks", "dead_letters", "logs", "orphan_grace")
    @classmethod
    def _check_durations(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("max_media")
    @classmethod
    def _check_size(cls, value: str | None) -> str | None:
        if value is not None:
            parse_size(value)
        return value

    @field_validator("min_free")
    @classmethod
    def _check_free(cls, value: str) -> str:
        m = _PERCENT.match(value)
        if m and float(m.group(1)) > 90:
            raise ValueError(f"min_free {value!r}: at most 90%")
        parse_free(value, 100)
        return value

    def seconds(self, kind: str, camera: CameraRetentionConfig | None = None) -> float:
        """How long ``kind`` (one of `RETENTION_KINDS`) is kept, seconds, for a camera's override if it has one."""
        own = getattr(camera, kind, None) if camera is not None else None
        return parse_duration(own if own is not None else getattr(self, kind))

    def max_media_bytes(self) -> int | None:
        """`max_media` in bytes, or None."""
        return None if self.max_media is None else parse_size(self.max_media)
