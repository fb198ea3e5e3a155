"""Files that survive a crash: atomic replacement and directory fsync, shared by the event spool
(`campusguard.app.events.spool`), the webhook's dead-letter file (`campusguard.app.alerts.webhook`),
the console's config rewrite (`campusguard.app.console.runtime`) and the media it copies from a
cluster (`campusguard.app.console.cluster_media`); whole files that are complete or absent (incident
snapshots); appends of whole lines (the JSONL alert log, the webhook's dead letters).

An append-only log that retention trims (`campusguard.app.retention.pruner.trim_jsonl`) is
rewritten as a new file renamed over the old one, so a crash mid-trim leaves the old file or the
new one whole. Writers and the trim agree through an exclusive ``flock`` on the file: the trim
holds it from its read to its rename, and `AppendLog` takes it for each append and, finding the
path renamed over meanwhile, reopens it, so no line goes to the replaced file.

On a full disk none of them leaves a partial file or line behind: the temporary file is removed,
a cut append is truncated back, and the ``OSError`` (``ENOSPC``) goes to the caller."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["AppendLog", "append_lines", "fsync_dir", "locked_for_rewrite", "replace_durably", "write_whole"]


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


@contextlib.contextmanager
def locked_for_rewrite(path: Path) -> Iterator[int | None]:
    """The file at ``path`` opened read-only and locked (``flock``) against `AppendLog` appends,
    re-opened if it was replaced before the lock was had; ``None`` when there is no file. Rewrite
    it with `replace_durably` inside: appenders wait, then reopen the new file."""
    for _ in range(5):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                yield fd
                return
        finally:
            os.close(fd)  # the lock goes with it
    raise OSError(errno.EAGAIN, f"{path} keeps being replaced")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


class AppendLog:
    """An append-only file of whole lines, kept open, that a trim may replace (`locked_for_rewrite`).

    Each `append` takes the file's ``flock``, reopens the path if it was renamed over since, and
    appends all or nothing (`append_lines`).

    Args:
        path: the file (created ``mode`` when missing; its folder must exist).
    """

    def __init__(self, path: Path, mode: int = 0o644) -> None:
        self.path = Path(path)
        self.mode = mode
        self._fd: int | None = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, self.mode)

    def append(self, data: bytes, *, sync: bool = True) -> None:
        """Append ``data`` (whole lines); ``OSError`` (a full disk: nothing written) is raised."""
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        for _ in range(5):
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if _same_file(self._fd, self.path):
                    append_lines(self._fd, data, sync=sync)
                    return
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)  # replaced by a trim (or removed): append to the file at the path now
            self._fd = None
            self._fd = self._open()
        raise OSError(errno.EAGAIN, f"{self.path} keeps being replaced")

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
