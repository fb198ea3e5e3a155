"""The recordings a scan reads: sources expanded to video files, each identified by path, size and mtime."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from campusguard.errors import InvalidInputError
from campusguard.io.sources import is_video, list_media

__all__ = ["Recording", "find_recordings"]


@dataclass(frozen=True)
class Recording:
    """One video file of an archive.

    Attributes:
        path: the resolved (absolute, symlink-free) path; also the stream key of its events.
        size: bytes.
        mtime_ns: modification time, nanoseconds since the epoch.
    """

    path: Path
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | Path) -> Recording:
        """The recording at ``path`` as it is now (`InvalidInputError` if it cannot be read)."""
        resolved = Path(path).resolve()
        try:
            st = os.stat(resolved)
        except OSError as exc:
            raise InvalidInputError(f"{path}: cannot read the file: {exc.strerror}") from None
        return cls(resolved, int(st.st_size), int(st.st_mtime_ns))

    @property
    def key(self) -> str:
        """The stream key of this recording's events (`campusguard.app.events.types.event_id_for`)."""
        return str(self.path)

    def output_name(self, suffix: str) -> str:
        """A file name for outputs of this recording: its stem plus a short hash of its path (unique per file)."""
        digest = hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:8]
        return f"{self.path.stem}-{digest}{suffix}"


def find_recordings(sources: list[str]) -> tuple[list[Recording], int]:
    """The video files named by ``sources`` (files, folders, globs), each once, in name order.

    Returns:
        The recordings and how many other files (images, anything not a video) were left out.

    Raises:
        InvalidInputError: a source names nothing, or no source holds a video.
    """
    seen: dict[Path, Recording] = {}
    others = 0
    for source in sources:
        for path in list_media(source):
            if not is_video(path):
                others += 1
                continue
            rec = Recording.of(path)
            seen.setdefault(rec.path, rec)
    if not seen:
        raise InvalidInputError(f"no video files in {', '.join(sources)}")
    return sorted(seen.values(), key=lambda r: str(r.path)), others
