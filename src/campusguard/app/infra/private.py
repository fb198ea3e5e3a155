"""Private data files: what CampusGuard stores is readable and writable by its own user only.

The users database (password hashes, audit log), the event databases, snapshots, clips,
recordings, spools and ledgers hold personal data. They are created ``0600`` and their folders
``0700``:

- the long-running commands (``watch``, ``serve``, ``scan``, ``prune``) run under `private_umask`
  (decorated `private_files`), so every file and folder they (and the encoders they start) create
  is private;
- `private_sqlite_file` prepares every SQLite file the app opens for writing (users, events, scan
  ledger): created ``0600`` even when CampusGuard runs as a library under a wider umask, and an
  existing file with wider rights is tightened once (with one log line saying so).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

__all__ = [
    "PRIVATE_UMASK",
    "PRIVATE_FILE_MODE",
    "PRIVATE_DIR_MODE",
    "private_umask",
    "private_files",
    "tighten_file",
    "private_sqlite_file",
]

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

PRIVATE_UMASK = 0o077
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
_tightened: set[Path] = set()
_tightened_lock = threading.Lock()


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files and folders created inside (by this process and the encoders it starts) are private.

    The umask is process-wide: enter it at the start of a command, before threads start; the
    previous umask is back on leaving (a command run in-process, as tests do, leaves none behind).
    """
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def private_files(command: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so that it runs under `private_umask` (its signature is kept for typer)."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with private_umask():
            return command(*args, **kwargs)

    return run


def tighten_file(path: Path, *, what: str) -> bool:
    """Remove group and other rights from an existing file of ours; True when its mode changed.

    A file that does not exist, or that belongs to another user (we may not change it), is left
    alone. The first change of each path is logged at WARNING, naming ``what`` it is.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077 or st.st_uid != os.geteuid():
        return False
    os.chmod(path, mode & 0o700)
    with _tightened_lock:
        first = path not in _tightened
        _tightened.add(path)
    if first:
        log.warning("%s %s was readable by others (mode %04o); now %04o", what, path, mode, mode & 0o700)
    return True


def private_sqlite_file(path: Path, *, what: str = "database") -> None:
    """Prepare ``path`` for SQLite: its folder created ``0700`` if missing, the file ``0600`` if missing.

    SQLite gives its ``-wal``, ``-shm`` and ``-journal`` files the mode of the database file, so
    creating the database file first makes them private too. An existing file (and companion)
    with wider rights is tightened (`tighten_file`).
    """
    path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    for file in (path, *(path.with_name(path.name + suffix) for suffix in _SQLITE_COMPANIONS)):
        tighten_file(file, what=what)
