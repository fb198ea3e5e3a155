"""Files that survive a crash: atomic replacement and directory fsync, shared by the event spool
(`campusguard.app.events.spool`), the webhook's dead-letter file (`campusguard.app.alerts.webhook`),
the console's config rewrite (`campusguard.app.console.runtime`) and the media it copies from a
cluster (`campusguard.app.console.cluster_media`); whole files that are complete or absent (incident
snapshots); appends of whole lines (the JSONL alert log, the webhook's dead letters).

On a full disk none of them leaves a partial file or line behind: the temporary file is removed,
a cut append is truncated back, and the ``OSError`` (``ENOSPC``) goes to the caller."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["append_lines", "fsync_dir", "replace_durably", "write_whole"]


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


def write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to a new ``path`` (folder created) complete or not at all: a temporary file
    renamed into place; on an error (a full disk) nothing is left behind and the error is raised."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def append_lines(fd: int, data: bytes, *, sync: bool = True) -> None:
    """Append ``data`` (whole lines) to the file open as ``fd`` (``O_APPEND``), fsync'd when ``sync``.

    All or nothing: a write cut short (a full disk) is truncated back to where it started, so
    the file never ends in half a line, and the ``OSError`` is raised.
    """
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[n:]
        if sync:
            os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise
