"""The weights store: Ultralytics' trained checkpoints by name, downloaded once, verified, cached.

``ensure_weights("yolov8n")`` returns ``$CAMPUSGUARD_CACHE/weights/yolov8n.pt``, fetching it first
when it is missing: from ``source`` (a URL or a folder) when given, else from the mirror named by
``CAMPUSGUARD_WEIGHTS_MIRROR`` (a folder or an ``http(s)`` base URL), then from Ultralytics'
release assets (`OFFICIAL`). A download goes to ``NAME.pt.part`` (resumed with an HTTP ``Range``
request after a cut), is checked (SHA-256, then that it is a PyTorch checkpoint) and only then
renamed into place, so the cache never holds a file that failed a check. A ``.part`` of an
interrupted download stays for the next try to resume; `remove_weights` deletes it.

The expected SHA-256 is, in order: the ``sha256`` argument, the digest pinned in `OFFICIAL` (where
one was found in public sources), the ``SHA256SUMS`` file beside the source (``HEX  FILE`` lines,
as ``sha256sum`` writes them). Without any, the file is kept as unverified and `cached_weights`
says so.

``CAMPUSGUARD_OFFLINE=1`` (or ``offline=True``) forbids network downloads; a mirror folder is
still read. ``YOLO_OFFLINE`` is not read here: CampusGuard sets it itself so that Ultralytics
never downloads behind its back, and it would then stop every pull.

A kit module: standard library only at import (rich, torch and Ultralytics inside functions).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.util
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from campusguard.cache import cache_dir, write_text_atomically
from campusguard.errors import InvalidInputError, WeightsUnavailableError

__all__ = [
    "MIRROR_ENV",
    "OFFICIAL",
    "OFFLINE_ENV",
    "CachedWeights",
    "WeightsUnavailableError",
    "OfficialWeights",
    "cached_weights",
    "ensure_weights",
    "official_for",
    "pull_command",
    "remove_weights",
    "weights_dir",
    "weights_file_name",
]

log = logging.getLogger(__name__)

MIRROR_ENV = "CAMPUSGUARD_WEIGHTS_MIRROR"
OFFLINE_ENV = "CAMPUSGUARD_OFFLINE"
TIMEOUT_ENV = "CAMPUSGUARD_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0  # per socket operation (connect, each read): a stalled server fails, a slow one does not
SUMS_FILE = "SHA256SUMS"
_ATTEMPTS = 3  # tries per source when a transfer is cut (each resumes where the last stopped)
_CHUNK = 1 << 20
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_RELEASES = "https://github.com/ultralytics/assets/releases/download"

COCO_CLASSES = 80
COCO = "COCO 2017"
ULTRALYTICS_LICENCE = "AGPL-3.0"


@dataclass(frozen=True)
class OfficialWeights:
    """One of Ultralytics' trained detection checkpoints.

    Attributes:
        name: the name users give (``yolov8n``; ``yolov8n.pt`` means the same).
        file: the checkpoint's file name (``yolov8n.pt``).
        url: where Ultralytics publishes it (its GitHub release asset).
        sha256: the file's SHA-256 where it could be found in public sources, else ``None``.
        classes: number of classes (80, COCO's).
        trained_on: the data set it was trained on.
        licence: the weights' licence.
    """

    name: str
    file: str
    url: str
    sha256: str | None
    classes: int = COCO_CLASSES
    trained_on: str = COCO
    licence: str = ULTRALYTICS_LICENCE


# The release Ultralytics 8.4 downloads every one of these from (`attempt_download_asset`,
# ``release="v8.4.0"``). Digests: each found in several unrelated public projects that pin the
# same file (size and SHA-256 agreeing); yolov8n, yolo11n and yolo26n/s also next to this very
# v8.4.0 URL. No public source was found for yolov8s, yolov8l and yolov8x: ``None`` (see
# docs/models.md; pass ``--sha256`` or use a mirror's SHA256SUMS to verify those).
_RELEASE = "v8.4.0"
_DIGESTS: dict[str, str | None] = {
    "yolov8n": "f59b3d833e2ff32e194b5bb8e08d211dc7c5bdf144b90d2c8412c47ccfc83b36",
    "yolov8s": None,
    "yolov8m": "5d4a90cdc7a21786cc59cd19778e9eafff836df9e2da32524737c7ee6efe4fe5",
    "yolov8l": None,
    "yolov8x": None,
    "yolo11n": "0ebbc80d4a7680d14987a577cd21342b65ecfd94632bd9a8da63ae6417644ee1",
    "yolo11s": "85a76fe86dd8afe384648546b56a7a78580c7cb7b404fc595f97969322d502d5",
    "yolo11m": "d5ffc1a674953a08e11a8d21e022781b1b23a19b730afc309290bd9fb5305b95",
    "yolo11l": "9ebd0e09d59811db4b1d61e2bc6730649608b1ac47f8dd01e2da6bca7c20023f",
    "yolo11x": "7bc158aa95c0ebfdd87f70f01653c1131b93e92522dbe15c228bcd742e773a24",
    "yolo26n": "9b09cc8bf347f0fc8a5f7657480587f25db09b34bf33b0652110fb03a8ad4fef",
    "yolo26s": "646f8bc3fe0a656803d95c294f7852321748cb29d13466a1af8862e2db384a1b",
    "yolo26m": "401cea9ab23ad19246ff7744859816bc599f350e93c9dd30367b6f0a0745d0b7",
    "yolo26l": "9fe3c544f2b19bebad7ea41e76d7ad3d88b7c2f10d11d24430c5311f6b32db26",
    "yolo26x": "9fdd44a31c504547ffb81d2c6d9e6dac3493c8eaa8b0398d3f43bae6c7003e92",
}

OFFICIAL: dict[str, OfficialWeights] = {
    name: OfficialWeights(name, f"{name}.pt", f"{_RELEASES}/{_RELEASE}/{name}.pt", digest)
    for name, digest in _DIGESTS.items()
}
"""Ultralytics' trained COCO detectors by name, in family then size order."""


@dataclass(frozen=True)
class CachedWeights:
    """One checkpoint in the weights cache.

    Attributes:
        name: its name (``yolov8n``, or the name it was pulled under).
        path: the checkpoint (``.pt``); absent while only a partial download exists.
        complete: the checkpoint is there (false: only a ``.part`` of an interrupted download).
        size_bytes: bytes on disk: checkpoint, partial download and exports together.
        sha256: its SHA-256, as recorded when it was pulled.
        verified_by: what the digest was checked against (``pinned``, ``--sha256``, ``SHA256SUMS``),
            ``None`` when nothing was there to check it against.
        source: where it was fetched from.
        exports: ONNX files made from it, next to it.
    """

    name: str
    path: Path
    complete: bool
    size_bytes: int
    sha256: str | None
    verified_by: str | None
    source: str | None
    exports: tuple[Path, ...]


def weights_dir() -> Path:
    """``$CAMPUSGUARD_CACHE/weights``: the weights' folder under the package's one cache root
    (`campusguard.cache.cache_dir`), created if missing."""
    root = cache_dir() / "weights"
    root.mkdir(parents=True, exist_ok=True)
    return root


def official_for(name: object) -> OfficialWeights | None:
    """The official weights ``name`` names (``yolov8n``, ``YOLOv8n.pt``), or ``None``.

    ``yolov8n.yaml`` names the random-weight architecture, not these.
    """
    if not isinstance(name, str | Path):
        return None
    text = str(name).strip().lower()
    return OFFICIAL.get(text.removesuffix(".pt")) if "/" not in text and "\\" not in text else None


def _key(name: str) -> str:
    """The cache name of ``name``: an official name in its canonical spelling, else ``name`` without ``.pt``."""
    official = official_for(name)
    if official is not None:
        return official.name
    text = name.strip()
    if text.lower().endswith((".yaml", ".yml", ".onnx")):
        raise InvalidInputError(
            f"{name!r} is not a checkpoint name ({text.rsplit('.', 1)[-1]} files are not pulled); "
            f"Ultralytics' trained weights are: {', '.join(OFFICIAL)}"
        )
    if not _NAME_RE.match(text) or ".." in text:
        raise InvalidInputError(
            f"model name {name!r}: use letters, digits, '.', '_' and '-' only (it names a file in the weights cache)"
        )
    return text.removesuffix(".pt")


def weights_file_name(name: str) -> str:
    """The checkpoint's file name in the cache (``yolov8n.pt``)."""
    return f"{_key(name)}.pt"


def pull_command(name: str) -> str:
    """The command that fetches ``name`` into the cache, for messages."""
    return f"campusguard models pull {name} --from URL|DIR"


def _offline(offline: bool | None) -> bool:
    if offline is not None:
        return offline
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _timeout(timeout_s: float | None) -> float:
    if timeout_s is not None:
        return timeout_s
    try:
        return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class _Source:
    """Where one copy of a checkpoint may be: ``location`` (URL or path) and an optional SHA256SUMS beside it."""

    location: str
    sums: str | None
    label: str  # "--from", "mirror" or "Ultralytics"

    @property
    def remote(self) -> bool:
        return _is_url(self.location)

    @property
    def file_name(self) -> str:
        """The name the SHA256SUMS lists it under."""
        if self.remote:
            return urllib.parse.unquote(urllib.parse.urlsplit(self.location).path.rsplit("/", 1)[-1])
        return Path(self.location).name


def _source_from(spec: str, file: str, label: str) -> _Source:
    """A ``--from`` or mirror value: a checkpoint URL, a base URL, a checkpoint file or a folder."""
    spec = spec.strip()
    if _is_url(spec):
        parts = urllib.parse.urlsplit(spec)
        last = parts.path.rsplit("/", 1)[-1]
        if last.lower().endswith((".pt", ".pth")):
            base = spec[: spec.rfind(last)] if parts.query == "" else None
            return _Source(spec, f"{base}{SUMS_FILE}" if base else None, label)
        base = spec.rstrip("/")
        return _Source(f"{base}/{file}", f"{base}/{SUMS_FILE}", label)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _Source(str(path / file), str(path / SUMS_FILE), label)
    if path.is_file():
        return _Source(str(path), str(path.parent / SUMS_FILE), label)
    where = "CAMPUSGUARD_WEIGHTS_MIRROR" if label == "mirror" else "--from"
    raise WeightsUnavailableError(
        f"{where} {spec}: no such file or folder (give a folder, a .pt file or an http(s) URL)"
    )


def _sources(key: str, file: str, source: str | None) -> list[_Source]:
    if source:
        return [_source_from(source, file, "--from")]
    sources = []
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if mirror:
        sources.append(_source_from(mirror, file, "mirror"))
    official = OFFICIAL.get(key)
    if official is not None:
        sources.append(_Source(official.url, None, "Ultralytics"))
    if not sources:
        known = ", ".join(OFFICIAL)
        raise WeightsUnavailableError(
            f"{key!r} is not one of Ultralytics' weights ({known}) and is not in the cache ({weights_dir()}); "
            f"fetch it with: {pull_command(key)}"
        )
    return sources


def ensure_weights(
    name: str,
    *,
    source: str | None = None,
    sha256: str | None = None,
    offline: bool | None = None,
    progress: bool = False,
    force: bool = False,
    timeout_s: float | None = None,
) -> Path:
    """The cached checkpoint of ``name``, downloaded (or copied) and verified first when missing.

    Args:
        name: an official name (`OFFICIAL`: ``yolov8n``, ``yolo26s.pt``) or, with ``source``, any
            name to cache a checkpoint under.
        source: a checkpoint URL, a base URL, a ``.pt`` file or a folder to take it from (default:
            ``CAMPUSGUARD_WEIGHTS_MIRROR``, then Ultralytics' release).
        sha256: the digest the file must have (64 hex digits); overrides the pinned one.
        offline: no network downloads (default: ``CAMPUSGUARD_OFFLINE``); folders are still read.
        progress: show a progress bar on stderr.
        force: fetch again even when cached.
        timeout_s: socket timeout of each connect and read (default ``CAMPUSGUARD_DOWNLOAD_TIMEOUT`` or 30).

    Raises:
        WeightsUnavailableError: offline or unreachable (the message names the URL tried and the
            ``campusguard models pull`` command), a wrong digest, a truncated or corrupt file.
        InvalidInputError: a malformed name or ``sha256``.
    """
    key = _key(name)
    expected_arg = _check_hex(sha256) if sha256 is not None else None
    target = weights_dir() / f"{key}.pt"
    if target.is_file() and not force:  # renamed into place only once checked: complete when there
        return _cache_hit(target, key, expected_arg)
    sources = _sources(key, target.name, source)
    with _locked(target):
        if target.is_file() and not force:  # another process pulled it while this one waited
            return _cache_hit(target, key, expected_arg)
        problems: list[str] = []
        for src in sources:
            if src.remote and _offline(offline):
                problems.append(f"{src.location} not tried: downloads are off ({OFFLINE_ENV}=1 or offline)")
                continue
            try:
                _fetch(src, target, key, expected_arg, progress, _timeout(timeout_s))
                return target
            except _NotThere as exc:
                problems.append(str(exc))
        tried = "; ".join(problems)
        raise WeightsUnavailableError(
            f"{key} is not in the cache ({weights_dir()}) and could not be fetched: {tried}; "
            f"where there is a network (or a copy), run: {pull_command(key)}"
        )


def _cache_hit(target: Path, key: str, expected: str | None) -> Path:
    """The cached checkpoint; checked against ``expected`` when one is given (not on every use: hashing takes time)."""
    if expected is not None and _file_sha256(target) != expected:
        raise WeightsUnavailableError(
            f"{target} is cached with another SHA-256 than --sha256 {expected[:12]}...; "
            f"remove it (campusguard models rm {key}) and pull again"
        )
    return target


class _NotThere(Exception):
    """This source does not have the file or cannot be reached: the next source is tried."""


def _check_hex(digest: str) -> str:
    text = digest.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise InvalidInputError(f"--sha256 {digest!r}: expected 64 hexadecimal digits")
    return text


def _expected_digest(key: str, src: _Source, arg: str | None, timeout_s: float) -> tuple[str | None, str | None]:
    """The digest to check against and its origin: ``--sha256``, ``pinned``, ``SHA256SUMS`` or none."""
    if arg is not None:
        return arg, "--sha256"
    official = OFFICIAL.get(key)
    if official is not None and official.sha256 is not None:
        return official.sha256, "pinned"
    if src.sums is not None:
        listed = _read_sums(src.sums, timeout_s).get(src.file_name)
        if listed is not None:
            return listed, SUMS_FILE
    return None, None


def _read_sums(location: str, timeout_s: float) -> dict[str, str]:
    """``FILE -> sha256`` from a SHA256SUMS file or URL; empty when there is none."""
    try:
        if _is_url(location):
            with urllib.request.urlopen(_request(location), timeout=timeout_s) as response:
                text = response.read(1 << 20).decode("utf-8", "replace")
        else:
            text = Path(location).read_text("utf-8", "replace")
    except (OSError, urllib.error.URLError, ValueError):
        return {}
    sums = {}
    for line in text.splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2 and re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            sums[parts[1].lstrip("*").strip().rsplit("/", 1)[-1]] = parts[0].lower()
    return sums


def _request(url: str, start: int = 0) -> urllib.request.Request:
    headers = {"User-Agent": "campusguard-weights"}
    if start > 0:
        headers["Range"] = f"bytes={start}-"
    return urllib.request.Request(url, headers=headers)


def _fetch(src: _Source, target: Path, key: str, expected_arg: str | None, progress: bool, timeout_s: float) -> None:
    """Bring ``src`` to ``target``: into ``.part``, check, rename. `_NotThere` when the source lacks it."""
    part = target.with_name(target.name + ".part")
    expected, verified_by = _expected_digest(key, src, expected_arg, timeout_s)
    if src.remote:
        _download(src.location, part, progress, timeout_s)
    else:
        _copy(Path(src.location), part, progress)
    try:
        digest = _file_sha256(part)
        if expected is not None and digest != expected:
            raise WeightsUnavailableError(
                f"{src.location} gave a file whose SHA-256 is {digest[:16]}..., not the {verified_by} "
                f"{expected[:16]}...: refused, nothing cached; pull it from a trusted copy: {pull_command(key)}"
            )
        problem = checkpoint_problem(part)
        if problem is not None:
            raise WeightsUnavailableError(
                f"{src.location} is not a usable checkpoint ({problem}): refused, nothing cached; "
                f"pull it from a good copy: {pull_command(key)}"
            )
    except WeightsUnavailableError:
        part.unlink(missing_ok=True)
        raise
    _fsync(part)
    os.replace(part, target)
    _write_record(target, key, src.location, digest, verified_by)
    if verified_by is None:
        log.warning(
            "%s: no SHA-256 to check it against (none pinned, no --sha256, no SHA256SUMS); kept unverified", key
        )


def _download(url: str, part: Path, progress: bool, timeout_s: float) -> None:
    """Download ``url`` into ``part``, resuming what is there; a few tries when the transfer is cut."""
    last = ""
    for _attempt in range(_ATTEMPTS):
        start = part.stat().st_size if part.is_file() else 0
        try:
            response = urllib.request.urlopen(_request(url, start), timeout=timeout_s)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and start > 0:  # the .part is not a prefix the server knows: start over
                part.unlink(missing_ok=True)
                last = f"{url}: HTTP 416 on resume"
                continue
            raise _NotThere(f"{url}: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _NotThere(f"{url}: {reason}") from exc
        with response:
            resumed = response.status == 206
            if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {start}-"):
                raise _NotThere(
                    f"{url}: the server resumed at another offset ({response.headers.get('Content-Range')})"
                )
            if start > 0 and not resumed:
                start = 0  # the server ignored Range: the whole file comes again
            length = response.headers.get("Content-Length")
            total = start + int(length) if length is not None and length.isdigit() else None
            try:
                with part.open("ab" if resumed else "wb") as out, _bar(progress, url, total, start) as advance:
                    _pump(response, out, advance)
            except (OSError, urllib.error.URLError) as exc:  # timeouts and resets mid-transfer
                last = f"{url}: transfer cut ({exc})"
                continue
        size = part.stat().st_size
        if total is None or size == total:
            return
        last = f"{url}: transfer cut at {size} of {total} bytes"
        if size > total:
            part.unlink(missing_ok=True)
    got = part.stat().st_size if part.is_file() else 0
    raise _NotThere(f"{last} after {_ATTEMPTS} tries ({got} bytes kept in {part} to resume)")


def _pump(response: IO[bytes], out: IO[bytes], advance: Callable[[int], None]) -> None:
    while True:
        chunk = response.read(_CHUNK)
        if not chunk:
            return
        out.write(chunk)
        advance(len(chunk))


def _copy(path: Path, part: Path, progress: bool) -> None:
    if not path.is_file():
        raise _NotThere(f"{path}: no such file")
    try:
        with (
            path.open("rb") as src,
            part.open("wb") as out,
            _bar(progress, str(path), path.stat().st_size, 0) as advance,
        ):
            _pump(src, out, advance)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise _NotThere(f"{path}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _bar(progress: bool, label: str, total: int | None, done: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (or nothing); yields the function that advances it."""
    if not progress:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    name = label.rsplit("/", 1)[-1]
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task(name, total=total, completed=done)
        yield lambda n: bar.advance(task, n)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` is not a PyTorch checkpoint, or ``None`` when it is one.

    Always: a zip archive (PyTorch's format) with a ``data.pkl`` whose members all pass their CRC
    (a truncated or corrupted file fails here). When PyTorch and Ultralytics are installed, also
    ``torch.load`` (on the CPU) must give a checkpoint dict with a model.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if not any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
                return "a zip archive without data.pkl, not a PyTorch checkpoint"
            bad = archive.testzip()
            if bad is not None:
                return f"member {bad} is corrupt"
    except zipfile.BadZipFile:
        return "not a zip archive: truncated, corrupt or not a PyTorch checkpoint"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("ultralytics") is None:
        return None
    return _torch_load_problem(path)


def _torch_load_problem(path: Path) -> str | None:
    import torch

    from campusguard.models.ultralytics_env import offline_ultralytics

    offline_ultralytics()
    try:
        checkpoint: Any = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as exc:  # unpickling errors come in many types
        return f"torch.load failed: {type(exc).__name__}"
    if not isinstance(checkpoint, dict) or not any(checkpoint.get(k) is not None for k in ("model", "ema")):
        return "torch.load gave no model (expected an Ultralytics checkpoint dict with 'model')"
    return None


def _fsync(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def _write_record(target: Path, key: str, source: str, digest: str, verified_by: str | None) -> None:
    """The provenance record beside the checkpoint (``NAME.pt.json``), written atomically."""
    record = {
        "name": key,
        "file": target.name,
        "source": source,
        "sha256": digest,
        "verified_by": verified_by,
        "bytes": target.stat().st_size,
        "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_text_atomically(_record_path(target), json.dumps(record, indent=1) + "\n")


def _record_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """One process at a time per checkpoint (two pulls would append to the same ``.part``)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    lock = target.with_name(target.name + ".lock")
    while True:  # the holder removes the lock file at the end: lock the file that is still there
        with lock.open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                if os.fstat(handle.fileno()).st_ino != os.stat(lock).st_ino:
                    continue  # removed (and maybe made again) while this process waited
            except FileNotFoundError:
                continue
            try:
                yield
            finally:
                lock.unlink(missing_ok=True)  # no empty `.lock` left in the cache
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return


def _exports(root: Path, key: str) -> tuple[Path, ...]:
    return tuple(sorted(p for p in root.glob(f"{glob.escape(key)}.*.onnx") if p.is_file()))


def cached_weights() -> list[CachedWeights]:
    """Every checkpoint in the weights cache (and every partial download), by name."""
    root = weights_dir()
    keys = {p.name.removesuffix(".pt") for p in root.glob("*.pt")} | {
        p.name.removesuffix(".pt.part") for p in root.glob("*.pt.part")
    }
    found = []
    for key in sorted(keys):
        target = root / f"{key}.pt"
        part = root / f"{key}.pt.part"
        exports = _exports(root, key)
        record: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(_record_path(target).read_text())
        size = sum(p.stat().st_size for p in (target, part, *exports) if p.is_file())
        found.append(
            CachedWeights(
                name=key,
                path=target,
                complete=target.is_file(),
                size_bytes=size,
                sha256=record.get("sha256"),
                verified_by=record.get("verified_by"),
                source=record.get("source"),
                exports=exports,
            )
        )
    return found


def remove_weights(name: str) -> bool:
    """Delete ``name``'s checkpoint, partial download, record and exports; ``False`` when none was there."""
    key = _key(name)
    root = weights_dir()
    target = root / f"{key}.pt"
    removed = False
    with _locked(target):
        for path in (target, target.with_name(target.name + ".part"), _record_path(target), *_exports(root, key)):
            if path.is_file():
                path.unlink()
                removed = True
    return removed
