"""`NodeService`: what the console reads of "the pipeline" on a node (``serve --node``).

A node runs each of its cameras in a `WatchService` of its own; the console's metrics, storage
page and stop read one object: every local camera's metrics merged, the site's retention while
this node leads it, and whether the node has stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from campusguard.app.engine.metrics import CameraMetrics
from campusguard.app.engine.writer import EventWorker
from campusguard.app.retention.cleanup import RetentionCleaner
from campusguard.app.retention.stage import RetentionStage
from campusguard.app.service import WatchService

__all__ = ["NodeService"]


class NodeService:
    """The node's pipelines seen as one.

    Args:
        services: the camera services running on this node now.
        retention_stage: the site's retention stage while this node leads it, else None.
        stopped: set once the node has stopped its cameras.
    """

    def __init__(
        self,
        services: Callable[[], dict[str, WatchService]],
        retention_stage: Callable[[], RetentionStage | None],
        stopped: threading.Event,
    ) -> None:
        self._services = services
        self._retention_stage = retention_stage
        self._stopped = stopped
        self.event_worker: EventWorker | None = None  # each camera has its own; the node's sinks are not a worker's
        self.metrics: dict[str, CameraMetrics] = {}

    @property
    def retention(self) -> RetentionCleaner | None:
        stage = self._retention_stage()
        return None if stage is None else stage.cleaner

    def refresh_metrics(self) -> None:
        merged: dict[str, CameraMetrics] = {}
        for service in self._services().values():
            service.refresh_metrics()
            merged.update(service.metrics)
        self.metrics = merged

    def wait(self, timeout: float | None = None) -> bool:
        """True once the node has stopped, or every camera service running now has drained (after a stop
        was asked: their open incidents ended and committed)."""
        if self._stopped.is_set():
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        for service in self._services().values():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not service.wait(remaining):
                return False
        return True
