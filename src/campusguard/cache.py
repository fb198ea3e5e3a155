"""Where the package caches what it builds, and the stable keys it names those files by.

A leaf module (standard library only), so the registry, the backends and the benchmarks all read the
one root without importing each other: ``$CAMPUSGUARD_CACHE``, else ``~/.cache/campusguard``.
Everything the package caches lives under it (ONNX exports of checkpoints in read-only folders and
of architecture models, INT8/FP16 variants and calibration images of the benchmarks, and MIGraphX
compiled programs under ``migraphx/`` unless ``$ORT_MIGRAPHX_CACHE_DIR`` says otherwise).

Keys come from `hashlib`, never the built-in ``hash()``: that one is salted per process
(``PYTHONHASHSEED``), so a name built from it differs in every process and the cache never hits.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "file_key", "write_text_atomically"]

CACHE_ENV = "CAMPUSGUARD_CACHE"


def cache_dir() -> Path:
    """The package's cache root (``$CAMPUSGUARD_CACHE`` or ``~/.cache/campusguard``), created if missing."""
    root = Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "campusguard"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def file_key(path: Path, length: int = 16) -> str:
    """A stable key of one file as it is now: SHA-256 of its resolved path, size and modification time (ns).

    The same in every process and after a restart; a new key when the file is replaced or rewritten,
    so a stale cached product is never served. Reads only the file's metadata (a checkpoint can be
    hundreds of megabytes), so two copies of the same bytes at two paths get two keys.
    """
    resolved = Path(path).resolve()
    stat = resolved.stat()
    digest = hashlib.sha256(f"{resolved}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:length]


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file beside it, then ``os.replace``),
    so a reader or a second process never sees half a cache record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
