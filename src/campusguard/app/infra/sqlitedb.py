"""SQLite plumbing shared by the app's stores (the event store, the console's users): durable
connections, numbered migrations, write transactions, a checkpointed close.

Connections run in autocommit mode (``isolation_level=None``) with explicit ``BEGIN IMMEDIATE``
transactions, WAL journal and ``synchronous=FULL``: a write is fsync'd when its transaction
commits (see `campusguard.app.events.sqlite` for the measured cost).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Self

from campusguard.app.infra.private import private_sqlite_file
from campusguard.errors import InvalidInputError

__all__ = [
    "DamagedFileError",
    "SQLiteFile",
    "check_sqlite_file",
    "set_aside",
    "connect_durable",
    "schema_version",
    "apply_migrations",
    "write_transaction",
    "close_checkpointed",
]


_BUSY_TIMEOUT_S = 5.0
_NEW_FILE_S = 1.0  # an empty file that stays empty this long is damage, not another opener's new file
_COMPANIONS = ("-wal", "-shm", "-journal")
_checked: set[str] = set()  # files found sound by this process (a start's check; not repeated per open)
_checked_lock = threading.Lock()


class DamagedFileError(InvalidInputError):
    """A SQLite file of the app is empty or damaged. The message names the file and how to start
    afresh; the app never resets it on its own (``--repair`` sets it aside when asked)."""


def check_sqlite_file(path: Path, *, what: str) -> None:
    """Refuse a damaged ``path`` before it is used: zero bytes, not SQLite, or ``PRAGMA quick_check`` fails.

    The app creates each of its files with its schema at once (the WAL switch alone writes the
    first page), so an empty file is damage, not a new store. A missing file is fine (it will be
    created). A file found sound is not checked again by this process (the check reads the
    whole file: once per start, not at every open of the same file).

    Raises:
        DamagedFileError: one line naming ``what``, the file, the problem and how to start afresh.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DamagedFileError(f"{what} {path} cannot be read: {exc}") from None
    key = str(path.resolve())
    with _checked_lock:
        if key in _checked:
            return
    problem = _sqlite_problem(path, st.st_size)
    if problem is not None:
        raise DamagedFileError(
            f"{what} {path} is damaged ({problem}); start with --repair to set it aside "
            f"(renamed to {path.name}.damaged-<time>) and begin a new one, or restore it from a backup"
        )
    with _checked_lock:
        _checked.add(key)


def _sqlite_problem(path: Path, size: int) -> str | None:
    deadline = time.monotonic() + _NEW_FILE_S
    while size == 0:  # another opener may have just created it: its first page follows at once
        if time.monotonic() >= deadline:
            return "an empty file: the app writes its schema when it creates one"
        time.sleep(0.02)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return None
    try:
        conn = sqlite3.connect(
            f"file:{path.resolve()}?mode=ro", uri=True, isolation_level=None, timeout=_BUSY_TIMEOUT_S
        )
    except sqlite3.Error as exc:
        return f"cannot be opened: {exc}"
    try:
        rows = conn.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    found = [str(r[0]) for r in rows]
    if found == ["ok"]:
        return None
    text = " ".join("; ".join(found).split())  # one line: SQLite's report spans several
    return "quick_check: " + text.replace("*** in database main *** ", "")[:200]


def set_aside(path: Path) -> Path | None:
    """Rename a damaged SQLite file and its companions to ``<name>.damaged-<UTC time>`` (``--repair``);
    the new name of the file, or None when there is no file."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("", *_COMPANIONS):
        source = path.with_name(path.name + suffix)
        if source.exists():
            source.rename(target.with_name(target.name + suffix))
    return target


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another opener holds the file.

    Changing the journal mode of a new file needs it alone; SQLite answers "database is locked"
    at once, without its busy handler, when several processes open a new file together (the
    contract suite's six concurrent openers hit it about once in a full run).
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def connect_durable(path: Path, *, read_only: bool = False, foreign_keys: bool = False) -> sqlite3.Connection:
    """Open ``path`` for sharing across threads: WAL and ``synchronous=FULL`` (read-write), or read-only.

    Read-write, the file is private (``0600``, its new folder ``0700``; see `private_sqlite_file`).

    Raises:
        sqlite3.DatabaseError: the file cannot be opened (the caller names it in its own error).
    """
    if read_only:
        conn = sqlite3.connect(
            f"file:{path.resolve()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
    else:
        private_sqlite_file(path)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
        _set_wal(conn)
        conn.execute("PRAGMA synchronous=FULL")
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    """The file's schema version (``PRAGMA user_version``; 0 for a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (durable on return), rolled back on any error. Hold your lock around it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def apply_migrations(conn: sqlite3.Connection, migrations: Mapping[int, str], current: int) -> None:
    """Run migrations ``current + 1`` .. ``max(migrations)`` (each a ``;``-separated script) in one transaction.

    Migration N brings a file from schema N-1 to N; the version is stored with the last one.
    The version is read again inside the write transaction, so of several connections opening a
    new file at once the first migrates it and the others find it done.
    """
    target = max(migrations)
    with write_transaction(conn):
        current = max(current, schema_version(conn))
        for version in range(current + 1, target + 1):
            for statement in migrations[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version={int(target)}")


def close_checkpointed(conn: sqlite3.Connection) -> None:
    """Checkpoint the WAL into the main file and close (a read-only or busy file keeps its WAL: still valid)."""
    with contextlib.suppress(sqlite3.DatabaseError):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


class SQLiteFile:
    """Base of a store kept in one SQLite file: ``_conn`` guarded by ``_lock``, idempotent `close`, ``with``."""

    _conn: sqlite3.Connection
    _lock: threading.Lock

    def close(self) -> None:
        """Checkpoint the WAL and close the connection (idempotent)."""
        with self._lock:
            if getattr(self, "_conn", None) is None:
                return
            close_checkpointed(self._conn)
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
