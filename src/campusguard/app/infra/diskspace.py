"""Full volumes: which ones, what could not be written there, and the one log line that says so.

Every writer of the app (event store, snapshots, the annotated recording, clips, the JSONL
alert log, the webhook's dead letters) reports a write that failed for lack of room to one
`DiskHealth`, and a write that went through again. It keeps, per volume (the mount point of
the folder written to), whether the volume is full now, with its free bytes at the last
failure, and per kind of write how many failed. The console's ``/readyz`` and the Prometheus
``campusguard_disk_full{volume}`` gauge read it.

A full disk must not fill the log too: the line naming the volume, its free bytes and what was
not written goes out at most once per volume and ``log_interval_s`` (`LogThrottle`).

Media yields to events: before a media writer gives up for lack of room it calls
`DiskHealth.make_room` with the folder and the bytes it wanted, which hands them to the
``on_full`` hook (the retention cleanup, wired by the service: it deletes the oldest media, or
wakes its own thread to), then tries once more. Media writers also leave ``reserve_bytes``
free (`DiskHealth.has_room`) so the event rows still find room when the media do not.

A volume is a fact of the whole process, so the service and its writers share the process's
`disk_health()` unless they are given their own (tests).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from campusguard.app.infra.throttle import LogThrottle

__all__ = ["DiskFullHook", "DiskHealth", "VolumeState", "disk_health", "is_disk_full", "volume_of"]

log = logging.getLogger("campusguard.app.infra.diskspace")

DiskFullHook = Callable[[Path, int], None]
"""``(folder, bytes wanted)``: free room on the volume of ``folder`` (delete the oldest media, or
wake a thread that will); called from the writing thread, so it must not take long."""

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_disk_full(exc: BaseException) -> bool:
    """True for an error that means "no room": ENOSPC, a quota, or SQLite's "database or disk is full"."""
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return code == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return False


def volume_of(path: Path) -> Path:
    """The mount point holding ``path`` (the nearest existing folder above it that is a mount)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> int:
    """Bytes free for this user on the volume of ``path`` (-1 when it cannot be read)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return int(shutil.disk_usage(p).free)
    except OSError:
        return -1


def _usage(path: Path) -> tuple[int, int]:
    """``(free, total)`` bytes of the volume of ``path`` (``(-1, 0)`` when it cannot be read)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        usage = shutil.disk_usage(p)
    except OSError:
        return -1, 0
    return int(usage.free), int(usage.total)


@dataclass
class VolumeState:
    """One volume a write failed on: full until a later write to it goes through."""

    volume: str
    full: bool
    free_bytes: int
    last_error: str
    failures: int = 0


class DiskHealth:
    """Full volumes and failed writes, shared by every writer (thread-safe).

    Args:
        reserve_bytes: media writers leave this much free on their volume (`has_room`), so event
            rows and the spool still fit when the media stop.
        log_interval_s: at most one "volume full" line per volume this often.
        on_full: the hook `make_room` calls (see `DiskFullHook`); settable later.

    Attributes:
        floor: ``total bytes -> bytes`` the retention cleanup keeps free (its ``min_free``; set by
            the service that runs it). A full volume has room again only with ``floor`` plus
            ``reserve_bytes`` free, so ``/readyz`` does not say "room again" while the media
            writers and the cleanup still see a full disk.
    """

    def __init__(
        self, reserve_bytes: int = 1 << 20, log_interval_s: float = 60.0, on_full: DiskFullHook | None = None
    ) -> None:
        self.reserve_bytes = int(reserve_bytes)
        self.on_full = on_full
        self.floor: Callable[[int], int] | None = None
        self._throttle = LogThrottle(log, log_interval_s)
        self._lock = threading.Lock()
        self._volumes: dict[str, VolumeState] = {}
        self._volume_of: dict[str, str] = {}  # folder -> its volume (mount points do not move)
        self.failures: dict[str, int] = {}  # kind of write -> writes that failed for lack of room
        self.skipped: dict[str, int] = {}  # kind of media -> writes left out to keep the reserve

    def _volume(self, folder: Path) -> str:
        key = str(folder)
        vol = self._volume_of.get(key)
        if vol is None:
            vol = self._volume_of[key] = str(volume_of(folder))
        return vol

    def failed(self, kind: str, path: Path, exc: BaseException | str) -> None:
        """A write of ``kind`` to ``path`` failed; a full volume is marked and logged (rate-limited)."""
        folder = Path(path).parent
        full = isinstance(exc, str) or is_disk_full(exc)
        free = free_bytes(folder)
        vol = self._volume(folder)
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.failures[kind] = self.failures.get(kind, 0) + 1
            state = self._volumes.setdefault(vol, VolumeState(vol, False, free, reason))
            state.full = state.full or full
            state.free_bytes, state.last_error = free, reason
            state.failures += 1
        if full:
            self._throttle.log(
                logging.ERROR,
                ("full", vol),
                "disk full: volume %s has %d bytes free; %s %s not written (%s); "
                "detection goes on, media are left out until there is room",
                vol,
                free,
                kind,
                path,
                reason,
            )
        else:
            self._throttle.log(logging.ERROR, ("error", vol, kind), "%s %s not written: %s", kind, path, reason)

    def skip(self, kind: str, path: Path, nbytes: int = 0) -> None:
        """A media write of ``kind`` (``nbytes``) left out to keep the reserve: counted, and the volume marked full."""
        with self._lock:
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
        self.failed(kind, path, f"{nbytes} bytes would leave less than {self.reserve_bytes} free, kept for event rows")

    def ok(self, path: Path) -> None:
        """A write to ``path`` went through: its volume is no longer full once it has the ``floor``
        and the reserve free again (cheap when no volume is full)."""
        if not self._volumes:
            return
        folder = Path(path).parent
        vol = self._volume(folder)
        with self._lock:
            state = self._volumes.get(vol)
            if state is None or not state.full:
                return
        free, total = _usage(folder)
        floor = self.floor
        if 0 <= free < self.reserve_bytes + (floor(total) if floor is not None and total > 0 else 0):
            return
        with self._lock:
            state.full = False
            state.free_bytes = free
        self._throttle.log(logging.WARNING, ("room", vol), "volume %s has room again (%d bytes free)", vol, free)

    def has_room(self, folder: Path, nbytes: int = 0) -> bool:
        """True when the volume of ``folder`` keeps ``reserve_bytes`` free after ``nbytes`` more."""
        free = free_bytes(folder)
        return free < 0 or free - nbytes >= self.reserve_bytes

    def make_room(self, folder: Path, nbytes: int) -> bool:
        """Ask the ``on_full`` hook for ``nbytes`` on the volume of ``folder``; True when there is room now."""
        hook = self.on_full
        if hook is not None:
            try:
                hook(folder, int(nbytes))
            except Exception:  # a broken cleanup must not take the writer down
                log.exception("freeing room on %s failed", folder)
        return self.has_room(folder, nbytes)

    def full_volumes(self) -> dict[str, VolumeState]:
        """The volumes full now (a copy)."""
        with self._lock:
            return {v: VolumeState(**vars(s)) for v, s in self._volumes.items() if s.full}

    def volumes(self) -> dict[str, VolumeState]:
        """Every volume a write failed on since the start, full or not (a copy)."""
        with self._lock:
            return {v: VolumeState(**vars(s)) for v, s in self._volumes.items()}


_PROCESS = DiskHealth()


def disk_health() -> DiskHealth:
    """The process's `DiskHealth` (volumes are shared by every service of the process)."""
    return _PROCESS
