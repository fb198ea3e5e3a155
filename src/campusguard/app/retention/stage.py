"""`start_retention`: the retention stage of a service that owns the config's storage.

`WatchService` (``watch``, ``serve``) and the cluster driver `ClusterWatch` (``watch --ray``,
``serve --ray``) build it the same way: a `Pruner` over the config's policy and folders and the
event store, run by a `RetentionCleaner` thread. The store is the one the process shares
(``serve``: the console's, left open until after the last pass) or, without one, a connection
of its own, closed by `RetentionStage.finish`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from campusguard.app.config import WatchConfig
from campusguard.app.events.protocols import EventDatabase, PrunableStore
from campusguard.app.retention.cleanup import RetentionCleaner
from campusguard.app.retention.policy import MediaLayout, RetentionPolicy
from campusguard.app.retention.pruner import Pruner
from campusguard.errors import CampusGuardError

__all__ = ["RetentionStage", "start_retention"]

log = logging.getLogger("campusguard.app.retention")


def _recordings_layout(config: WatchConfig) -> MediaLayout:
    folder = Path(config.outputs.annotated_video_dir or ".")
    return MediaLayout(data_dir=folder, recordings_dir=folder)


class RetentionStage:
    """A started `RetentionCleaner` and the store connection it owns (if any)."""

    def __init__(self, cleaner: RetentionCleaner, own_store: EventDatabase | None) -> None:
        self.cleaner = cleaner
        self._own_store = own_store

    def finish(self) -> None:
        """Stop the thread, run the last pass (what the last frames wrote), close an own store."""
        self.cleaner.stop()
        self.cleaner.final_pass()
        if self._own_store is not None:
            self._own_store.close()
            self._own_store = None


def start_retention(
    config: WatchConfig,
    shared_store: PrunableStore | None,
    *,
    clips_dir: Path | None = None,
    open_own: bool = True,
    recordings_only: bool = False,
) -> RetentionStage:
    """Build and start the retention stage of ``config``; ``shared_store``: the process's store
    (kept open by its owner), else a connection of its own is opened (rows are left for the next
    start when it cannot be: media and logs are still looked after); ``open_own=False``: media and
    logs only. ``recordings_only``: the continuous recordings alone, without a store (a cluster
    group's, on the node where it writes them: their age, `max_media` and the free-space floor
    apply to them there; the driver looks after the rows, logs and evidence)."""
    store = shared_store
    own: EventDatabase | None = None
    if store is None and open_own and not recordings_only:
        from campusguard.app.events import open_event_store

        try:
            own = store = open_event_store(config.storage)
        except CampusGuardError as exc:
            log.warning("retention: no event store: %s", exc)
    pruner = Pruner(
        RetentionPolicy.from_config(config),
        _recordings_layout(config) if recordings_only else MediaLayout.from_config(config, clips_dir=clips_dir),
        store,
        [c.id for c in config.cameras],
    )
    cleaner = RetentionCleaner(pruner, interval_s=config.retention.interval_s, check_s=config.retention.check_s)
    cleaner.start()
    return RetentionStage(cleaner, own)
