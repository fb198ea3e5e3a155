"""`ZoneEditListener`: a zone edit saved on any node's console reaches every node (``LISTEN/NOTIFY``).

The saving node stores the camera's new parts in ``camera_zone_edits`` and notifies channel
``campusguard_zones`` (`NodeDirectory.publish_zones`). Every node listens on a connection of its
own; for each notification (and, after each (re)connection, for every stored edit: what was saved
while it was away or cut off) it calls ``on_edit(camera, parts, node)``, which writes the edit into
that node's own config file and, where the camera runs, applies it to the running pipeline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from campusguard.app.events.urls import one_line
from campusguard.app.nodes.directory import ZONES_CHANNEL, NodeDirectory

__all__ = ["ZoneEditListener"]

log = logging.getLogger(__name__)


class ZoneEditListener:
    """Calls ``on_edit`` with each camera's zone edit saved by another node."""

    def __init__(
        self, directory: NodeDirectory, on_edit: Callable[[str, dict[str, Any], str], None], *, retry_s: float = 2.0
    ) -> None:
        self.directory = directory
        self.on_edit = on_edit
        self.retry_s = retry_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zone-edits", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001 - the server is away: listen again once it is back
                log.warning("zone edits from other nodes: %s; listening again in %.0f s", one_line(exc), self.retry_s)
            self._stop.wait(self.retry_s)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(self.directory.url, autocommit=True, connect_timeout=2) as conn:
            conn.execute(f"LISTEN {ZONES_CHANNEL}")
            for camera, (parts, node) in sorted(self.directory.zone_edits().items()):  # missed while away
                self._deliver(camera, parts, node)
            while not self._stop.is_set():
                for note in conn.notifies(timeout=1.0):
                    edits = self.directory.zone_edits()
                    if note.payload in edits:
                        parts, node = edits[note.payload]
                        self._deliver(note.payload, parts, node)

    def _deliver(self, camera: str, parts: dict[str, Any], node: str) -> None:
        if node == self.directory.node:
            return  # saved here: already written and applied
        try:
            self.on_edit(camera, parts, node)
        except Exception as exc:  # noqa: BLE001 - one bad edit must not stop the others
            log.warning("zone edit of camera %s saved on node %s not taken here: %s", camera, node, one_line(exc))
