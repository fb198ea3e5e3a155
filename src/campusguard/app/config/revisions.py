"""Revisions of what the console edits: what ``ETag`` / ``If-Match`` name, and the previous
versions of the config file kept beside it.

- `camera_revision`: the revision of ONE camera's editable state (its zones, lines, rules and
  privacy section as ``GET /api/v1/cameras/{name}/zones`` returns them, read from the config file
  on disk): ``cam-`` and 16 hex digits of the SHA-256 of their canonical JSON. It is that GET's
  ``ETag``; a ``PUT`` whose ``If-Match`` names another one is refused (`RevisionConflictError`,
  HTTP 409), as Kubernetes refuses a stale ``resourceVersion``. Being per camera, a save to one
  camera is never refused because another camera (or another part of the file) changed: two admins
  drawing zones on two cameras at once both save. A change to the camera's own section, by another
  admin or by hand in the YAML, is a conflict; a change of layout alone (comments, key order,
  spacing) is not.
- `config_revision`: the revision of the whole file's bytes (16 hex digits of its SHA-256): names
  the kept versions and tells the runtime when to read the file again.
- `keep_revision`: before each rewrite the file as it was goes to ``<config>.revisions/``
  (mode 0600 in a 0700 folder: a config may hold credentials); the newest `REVISIONS_KEPT` stay.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from campusguard.app.infra.durable import write_whole
from campusguard.errors import CampusGuardError

__all__ = [
    "CAMERA_REVISION_PREFIX",
    "REVISIONS_KEPT",
    "RevisionConflictError",
    "camera_revision",
    "config_revision",
    "keep_revision",
    "revisions_dir",
]

REVISIONS_KEPT = 10
"""Previous versions of the config file kept in its revisions folder."""


CAMERA_REVISION_PREFIX = "cam-"
"""What a camera's revision starts with: never taken for a whole-file revision (16 bare hex digits)."""


class RevisionConflictError(CampusGuardError):
    """A camera's editable state changed since the revision an edit was made on; ``current`` is its
    revision now, ``camera`` the camera's id."""

    def __init__(self, current: str, camera: str) -> None:
        super().__init__(
            f"camera {camera!r} was changed since (its zones are now at revision {current}); reload, then edit again"
        )
        self.current = current
        self.camera = camera


def config_revision(data: bytes) -> str:
    """The revision of a config file's content: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def camera_revision(camera: str, editable: Mapping[str, Any]) -> str:
    """The revision of one camera's editable state: `CAMERA_REVISION_PREFIX` and the first 16 hex
    digits of the SHA-256 of the canonical JSON (sorted keys, no spaces) of the camera's id and
    ``editable`` (``{"zones", "lines", "rules", "privacy"}`` as the zones API returns them). The id
    is part of it, so two cameras with the same zones still have different revisions."""
    canonical = json.dumps(
        {"camera": camera, "editable": editable}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return CAMERA_REVISION_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


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
