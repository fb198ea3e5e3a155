"""Revisions of the config file the console edits: what ``ETag`` / ``If-Match`` name, and the
previous versions kept beside it.

- `config_revision`: the revision of a config file's bytes (16 hex digits of its SHA-256): the
  ``ETag`` of ``GET /api/v1/cameras/{name}/zones``; a ``PUT`` whose ``If-Match`` names another one
  is refused (`RevisionConflictError`, HTTP 409), as Kubernetes refuses a stale ``resourceVersion``.
- `keep_revision`: before each rewrite the file as it was goes to ``<config>.revisions/``
  (mode 0600 in a 0700 folder: a config may hold credentials); the newest `REVISIONS_KEPT` stay.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from campusguard.app.infra.durable import write_whole
from campusguard.errors import CampusGuardError

__all__ = ["REVISIONS_KEPT", "RevisionConflictError", "config_revision", "keep_revision", "revisions_dir"]

REVISIONS_KEPT = 10
"""Previous versions of the config file kept in its revisions folder."""


class RevisionConflictError(CampusGuardError):
    """The config changed since the revision an edit was made on; ``current`` is its revision now."""

    def __init__(self, current: str) -> None:
        super().__init__(f"the config was changed since (now at revision {current}); reload, then edit again")
        self.current = current


def config_revision(data: bytes) -> str:
    """The revision of a config file's content: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def revisions_dir(config_path: Path) -> Path:
    """Where the previous versions of ``config_path`` are kept (``<name>.revisions`` beside it)."""
    return config_path.with_name(config_path.name + ".revisions")


def keep_revision(config_path: Path, data: bytes, revision: str, keep: int = REVISIONS_KEPT) -> Path:
    """Keep ``data`` (the config file about to be replaced, at ``revision``) in the revisions folder,
    mode 0600; the oldest beyond ``keep`` are deleted. Returns the kept file.

    Raises:
        OSError: the folder or the file could not be written.
    """
    folder = revisions_dir(config_path)
    folder.mkdir(mode=0o700, exist_ok=True)
    name = f"{time.time_ns():020d}-{revision}{config_path.suffix or '.yaml'}"
    path = folder / name
    old_umask = os.umask(0o077)  # created 0600: never readable by others, even for a moment
    try:
        write_whole(path, data)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    kept = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    for old in kept[: max(0, len(kept) - keep)]:
        old.unlink(missing_ok=True)
    return path
