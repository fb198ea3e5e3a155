"""`ClusterMedia`: incident snapshots and clips copied from the camera groups' actors (``serve --ray``).

With the cameras on Ray actors, each actor writes its incidents' snapshots and clips on its
own node (`campusguard.app.cluster.group.CameraGroup.media`); nothing assumes a shared file
system. When an incident starts, the console asks for them here: a thread of its own calls the
camera's actor (``fetch``) until the file is there or the request expires, and writes the bytes
atomically into the console's media folders, where the API serves them like its own. The
driver's event thread only queues the request, so pulling events never waits for media.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from campusguard.app.cluster.group import MediaKind
from campusguard.app.infra.durable import replace_durably
from campusguard.errors import CampusGuardError

__all__ = ["ClusterMedia", "MediaFetch"]

log = logging.getLogger("campusguard.app.console")

MediaFetch = Callable[[str, MediaKind, str], bytes | None]
"""``(camera_id, kind, event_id) -> bytes | None`` (not there yet); raises a `CampusGuardError`
when the camera's group does not answer."""


@dataclass
class _Request:
    camera: str
    kind: MediaKind
    event_id: str
    dest: Path
    due: float  # monotonic time of the next try
    expires: float  # monotonic time after which it is given up


class ClusterMedia:
    """Copies incident media from the camera groups into local files, on its own thread.

    Args:
        fetch: asks the camera's group for the bytes (`MediaFetch`).
        retry_s: seconds between tries of a file not there yet (a clip is written some seconds
            after the incident's start).
    """

    def __init__(self, fetch: MediaFetch, *, retry_s: float = 0.5) -> None:
        self.fetch = fetch
        self.retry_s = retry_s
        self.copied = 0
        self.given_up = 0
        self._requests: list[_Request] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cluster-media", daemon=True)
            self._thread.start()

    def request(self, camera: str, kind: MediaKind, event_id: str, dest: Path, within_s: float) -> None:
        """Copy an incident's snapshot or clip to ``dest`` once its group has it, trying for ``within_s`` seconds."""
        now = time.monotonic()
        with self._lock:
            self._requests.append(_Request(camera, kind, event_id, dest, now, now + within_s))
        self._wake.set()

    def pending(self) -> int:
        """Requests not done yet."""
        with self._lock:
            return len(self._requests)

    def close(self) -> None:
        """Stop the thread; requests not done are dropped."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                due = [r for r in self._requests if r.due <= now]
            for r in due:
                if self._stop.is_set():
                    return
                self._try(r)
            with self._lock:
                next_due = min((r.due for r in self._requests), default=None)
            self._wake.wait(1.0 if next_due is None else max(0.0, next_due - time.monotonic()))
            self._wake.clear()

    def _try(self, r: _Request) -> None:
        try:
            data = self.fetch(r.camera, r.kind, r.event_id)
        except CampusGuardError as exc:
            log.debug("%s of incident %s: %s", r.kind, r.event_id, exc)
            data = None
        if data is not None:
            try:
                _write_atomically(r.dest, data)
                self.copied += 1
            except OSError as exc:
                log.warning("%s of incident %s not saved: %s", r.kind, r.event_id, exc)
            self._drop(r)
        elif time.monotonic() >= r.expires:
            self.given_up += 1
            log.warning("no %s of incident %s from camera %s's group", r.kind, r.event_id, r.camera)
            self._drop(r)
        else:
            r.due = time.monotonic() + self.retry_s

    def _drop(self, r: _Request) -> None:
        with self._lock:
            self._requests.remove(r)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably (`campusguard.app.infra.durable.replace_durably`), folders created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_durably(path, data)
