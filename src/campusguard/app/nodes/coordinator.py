"""`NodeCoordinator`: one node's loop — heartbeat, take its cameras, hand over the rest, fence itself.

Every ``heartbeat_s`` (one second by default) the loop:

1. says the node is alive (`NodeDirectory.heartbeat`);
2. reads the live nodes, keeps those seen without a gap for ``settle_s`` (a node that just
   started, or came back, joins the assignment only once it has settled: no flapping while it
   crash-loops), and computes the assignment (`assign_cameras`, the same on every node); a camera
   is taken only when the nodes still settling would not get it either (several nodes starting
   together spread the cameras at once);
3. renews the leases of the cameras it runs, publishing each one's status; a lease it no longer
   holds (it was expired and taken while this node hung) stops that camera at once;
4. hands over the cameras assigned to another settled node — once it has run them ``hold_s``:
   stops the pipeline (its open incidents end, committed), then frees the lease;
5. takes the free or expired leases of the cameras assigned to it and starts them.

Fencing: a separate thread stops every camera when no renewal has succeeded for ``fence_s``
(less than ``lease_s``), so a node cut off from PostgreSQL, or frozen and resumed, has stopped
its cameras before anyone else may take them: no camera is ever run by two nodes.

Starting and stopping a camera (seconds: a model to load, a source to open) run on their own
threads, one at a time per camera, so renewals never wait for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from campusguard.app.nodes.assign import assign_cameras
from campusguard.app.nodes.directory import DirectoryUnavailableError, NodeDirectory, NodeInfo

__all__ = ["CameraRunner", "NodeCoordinator", "NodeTimings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeTimings:
    """The node loop's clocks, seconds (config ``nodes``).

    Attributes:
        heartbeat_s: how often a node says it is alive and renews its leases.
        lease_s: how long a lease lasts without renewal (server clock): the longest a dead node's
            cameras wait before another may take them.
        fence_s: a node that could not renew for this long stops its cameras (< ``lease_s``).
        dead_s: a node unseen for this long is left out of the assignment.
        settle_s: a node joins the assignment once seen without a gap for this long.
        hold_s: a camera stays at least this long on the node that took it before it is handed over.
    """

    heartbeat_s: float = 1.0
    lease_s: float = 6.0
    fence_s: float = 4.0
    dead_s: float = 4.0
    settle_s: float = 3.0
    hold_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_s < self.fence_s < self.lease_s:
            raise ValueError("node timings need 0 < heartbeat_s < fence_s < lease_s")


class CameraRunner(Protocol):
    """What a node runs its cameras with (the console's `NodeCameras`)."""

    def start_camera(self, camera: str, previous_node: str | None) -> None:
        """Start ``camera``'s pipeline (blocking); raise when it cannot start."""

    def stop_camera(self, camera: str) -> None:
        """Stop ``camera``'s pipeline (blocking): its open incidents ended and committed."""

    def camera_status(self, camera: str) -> dict[str, Any]:
        """``camera``'s status as the console shows it (published with each renewal)."""


class NodeCoordinator:
    """Runs this node's share of ``cameras`` through ``runner``, coordinated over ``directory``.

    Args:
        directory: the site's `NodeDirectory` (this node's name is its ``node``).
        runner: starts and stops camera pipelines.
        cameras: the site's enabled cameras.
        preferred: camera id to the node it prefers (``cameras[].node``).
        url: this node's console URL, for the other nodes' live-view proxy.
        timings: the loop's clocks.
        on_change: called (loop thread) after the cameras this node runs changed.
    """

    def __init__(
        self,
        directory: NodeDirectory,
        runner: CameraRunner,
        cameras: Sequence[str],
        *,
        preferred: Mapping[str, str] | None = None,
        url: str | None = None,
        timings: NodeTimings | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.directory = directory
        self.node = directory.node
        self.runner = runner
        self.cameras = list(cameras)
        self.preferred = dict(preferred or {})
        self.url = url
        self.timings = timings or NodeTimings()
        self.on_change = on_change
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}  # camera -> monotonic time this node took its lease
        self._busy: dict[str, threading.Thread] = {}  # camera -> its start or stop under way
        self._running: set[str] = set()  # cameras whose pipeline started
        self._last_renew_ok = time.monotonic()
        self._stop = threading.Event()
        self._first = True
        self._nodes: list[NodeInfo] = []
        self._threads: list[threading.Thread] = []
        self.fenced = 0  # times this node stopped its cameras for want of renewals

    # public --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Create the tables when missing, then start the loop and the fence."""
        self.directory.create_tables()
        for name, target in (("node-loop", self._loop), ("node-fence", self._fence)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def held(self) -> set[str]:
        """The cameras this node holds a lease for (starting, running or stopping)."""
        with self._lock:
            return set(self._held)

    def running(self) -> set[str]:
        """The cameras whose pipeline runs on this node."""
        with self._lock:
            return set(self._running)

    def healthy(self) -> bool:
        """The last lease renewal (or heartbeat) succeeded within ``fence_s``: this node coordinates."""
        return time.monotonic() - self._last_renew_ok <= self.timings.fence_s

    def nodes(self) -> list[NodeInfo]:
        """The nodes as last read by the loop."""
        with self._lock:
            return list(self._nodes)

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the loop, stop every camera (incidents ended), free the leases and say goodbye."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=max(0.1, self.timings.heartbeat_s * 3))
        deadline = time.monotonic() + timeout_s
        for camera in sorted(self.held()):  # each lease freed once its camera has stopped: taken over at once
            self._stop_camera(camera, release=True)
        clean = self._join_busy(deadline)
        try:
            self.directory.say_goodbye()
        except DirectoryUnavailableError as exc:
            log.warning("node %s: goodbye not recorded (%s); its leases expire on their own", self.node, exc)
        self.directory.close()
        return clean

    def request_stop(self) -> None:
        """Ask the loop to stop (safe from a signal handler); `stop` finishes."""
        self._stop.set()

    # the loop ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        t = self.timings
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._round(started)
            except DirectoryUnavailableError as exc:
                log.warning("node %s: %s", self.node, exc)
            except Exception:  # a bug here must not stop the heartbeat for good
                log.exception("node %s: coordination round failed", self.node)
            self._stop.wait(max(0.05, t.heartbeat_s - (time.monotonic() - started)))

    def _round(self, started: float) -> None:
        t = self.timings
        self.directory.heartbeat(self.url, socket.gethostname(), os.getpid(), first=self._first, gap_s=t.dead_s)
        self._first = False
        nodes = self.directory.nodes()
        with self._lock:
            self._nodes = nodes
        live = [n.name for n in nodes if not n.stopped and n.age_s <= t.dead_s]
        settled = [n.name for n in nodes if n.name in live and n.joined_s >= t.settle_s]
        current = {c: lease.node for c, lease in self.directory.leases().items() if lease.valid and lease.node}
        desired = assign_cameras(self.cameras, settled, self.preferred, current)
        # what the nodes still settling will get: not taken meanwhile (a cold start of several nodes
        # spreads the cameras at once instead of the first settled node taking all, then handing over)
        with_joining = assign_cameras(self.cameras, live, self.preferred, current)
        held = self.held()
        if held:
            statuses = {c: self.runner.camera_status(c) for c in held}
            kept = self.directory.renew(statuses, t.lease_s)
            self._last_renew_ok = started
            for camera in held - kept:
                log.error("node %s: lost the lease of camera %s (taken by another node); stopping it", self.node, camera)
                self._stop_camera(camera, release=False)
        else:
            self._last_renew_ok = started
        now = time.monotonic()
        for camera in sorted(self.held()):
            target = desired.get(camera)
            if target is not None and target != self.node and now - self._held.get(camera, now) >= t.hold_s:
                log.info("node %s: handing camera %s over to node %s", self.node, camera, target)
                self._stop_camera(camera, release=True)
        if self.node not in settled:
            return
        for camera, target in sorted(desired.items()):
            if target != self.node or with_joining.get(camera) != self.node or camera in self._held or camera in self._busy:
                continue
            taken, previous = self.directory.acquire(camera, t.lease_s)
            if taken:
                with self._lock:
                    self._held[camera] = time.monotonic()
                self._start_camera(camera, previous)

    def _fence(self) -> None:
        t = self.timings
        while not self._stop.wait(min(0.25, t.heartbeat_s / 2)):
            if self.held() and time.monotonic() - self._last_renew_ok > t.fence_s:
                self.fenced += 1
                log.error(
                    "node %s: no lease renewal for %.1f s (PostgreSQL unreachable?): stopping its cameras "
                    "before the leases expire, so no other node runs them twice",
                    self.node,
                    time.monotonic() - self._last_renew_ok,
                )
                for camera in sorted(self.held()):
                    self._stop_camera(camera, release=False)

    # camera actions (one at a time per camera) ----------------------------------------------------
    def _start_camera(self, camera: str, previous: str | None) -> None:
        def run() -> None:
            try:
                self.runner.start_camera(camera, previous)
            except Exception as exc:  # noqa: BLE001 - a camera that cannot start stays with us and is retried
                log.error("node %s: camera %s did not start: %s", self.node, camera, exc)
                with self._lock:
                    self._held.pop(camera, None)
                with contextlib.suppress(DirectoryUnavailableError):
                    self.directory.release(camera)
                return
            with self._lock:
                still_ours = camera in self._held
                if still_ours:
                    self._running.add(camera)
            if not still_ours:  # fenced or lost while it started
                self.runner.stop_camera(camera)
            elif previous is not None and previous != self.node:
                log.warning("node %s: took over camera %s from node %s", self.node, camera, previous)
            self._changed()

        self._spawn(camera, f"start-{camera}", run)

    def _stop_camera(self, camera: str, *, release: bool) -> None:
        with self._lock:
            if self._held.pop(camera, None) is None:
                return

        def run() -> None:
            try:
                self.runner.stop_camera(camera)
            except Exception:  # noqa: BLE001
                log.exception("node %s: camera %s did not stop cleanly", self.node, camera)
            with self._lock:
                self._running.discard(camera)
            if release:
                try:
                    self.directory.release(camera)
                except DirectoryUnavailableError as exc:
                    log.warning("node %s: lease of %s not freed (%s); it expires on its own", self.node, camera, exc)
            self._changed()

        self._spawn(camera, f"stop-{camera}", run)

    def _spawn(self, camera: str, name: str, run: Callable[[], None]) -> None:
        with self._lock:
            before = self._busy.get(camera)

        def chained() -> None:
            if before is not None:
                before.join()
            try:
                run()
            finally:
                with self._lock:
                    if self._busy.get(camera) is threading.current_thread():
                        del self._busy[camera]

        thread = threading.Thread(target=chained, name=f"node-{name}", daemon=True)
        with self._lock:
            self._busy[camera] = thread
        thread.start()

    def _join_busy(self, deadline: float) -> bool:
        while True:
            with self._lock:
                busy = list(self._busy.values())
            if not busy:
                return True
            for thread in busy:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if time.monotonic() >= deadline:
                with self._lock:
                    return not self._busy

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # noqa: BLE001
                log.exception("node %s: on_change failed", self.node)
