"""Files that survive a crash: atomic replacement and directory fsync, shared by the event spool
(`campusguard.app.events.spool`), the webhook's dead-letter file (`campusguard.app.alerts.webhook`),
the console's config rewrite (`campusguard.app.console.runtime`) and the media it copies from a
cluster (`campusguard.app.console.cluster_media`)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir", "replace_durably"]


def fsync_dir(folder: Path) -> None:
    """Make a file created, renamed or removed in ``folder`` durable (its directory entry)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (temporary file, fsync, ``os.replace``, folder
    fsync): a crash leaves the old file or the new one, never a mix; durable when this returns."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
