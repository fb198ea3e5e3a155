"""Retention: what is kept, for how long, and the thread that deletes the rest.

Modelled on Frigate's ``record/cleanup.py`` and ``events/cleanup.py``: storage is maintained by
its own thread, per camera, and the oldest media go first when space runs low; a row and its
files go together; an emergency never takes the detector down.

- `policy`: `RetentionPolicy` (durations per kind and camera, `max_media`, `min_free`) and
  `MediaLayout` (the folders and files retention looks after), both built from the config.
- `pruner`: `Pruner.plan` lists what is due (a `PrunePlan`: rows, snapshot paths to clear,
  files, log lines), `Pruner.apply` deletes it and returns a `PruneReport` (rows, files and
  bytes by kind). `campusguard prune` and the cleanup thread share it.
- `cleanup`: `RetentionCleaner`, the thread in `watch` and `serve` (a stage of `WatchService`).

Order of deletion: database first, then files. An expired incident's row is deleted (in
batches of ids) before its snapshot and clip; a snapshot deleted on its own (shorter retention,
or for space) has its row's ``snapshot_path`` cleared and committed before the file goes. So no
row ever names a deleted file; a crash between the two leaves an orphan file, which the orphan
sweep (files no row names, older than ``orphan_grace``) deletes later.

For the media writers: `RetentionCleaner.make_room(nbytes)` asks for a pass at once that frees
at least ``nbytes`` beyond the ``min_free`` floor (oldest media first; event rows are never
deleted for space), and `RetentionCleaner.wake()` asks for an ordinary pass now. Both return at
once (``make_room(..., wait_s=...)`` waits for that pass, at most ``wait_s`` seconds, and says
whether the space is there). Call them from a writer that got ENOSPC or crossed a size.
"""

from campusguard.app.retention.cleanup import RetentionCleaner, RetentionMetrics
from campusguard.app.retention.policy import MediaLayout, RetentionPolicy
from campusguard.app.retention.pruner import PrunableStore, PrunePlan, Pruner, PruneReport

__all__ = [
    "MediaLayout",
    "PrunableStore",
    "PrunePlan",
    "PruneReport",
    "Pruner",
    "RetentionCleaner",
    "RetentionMetrics",
    "RetentionPolicy",
]
