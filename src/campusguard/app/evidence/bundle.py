"""The evidence bundle: a ZIP whose ``manifest.json`` lists every other file with its SHA-256 and
size, signed with Ed25519 (``manifest.sig``) by the key whose public half is ``public_key.pem``.

`verify_bundle` checks a bundle (the ZIP, or the folder it was extracted into) offline: the signature (by the embedded key, and by a key the
recipient got another way when given one), then every file against the manifest: a changed,
missing or added file is named. It imports only the standard library and ``cryptography``,
so `campusguard evidence verify` runs on a machine with nothing but the core install.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from campusguard.errors import InvalidInputError

__all__ = [
    "FORMAT",
    "MANIFEST",
    "PUBLIC_KEY",
    "SIGNATURE",
    "BundleCheck",
    "fingerprint",
    "load_public_key",
    "public_pem",
    "sign",
    "verify_bundle",
]

FORMAT = "campusguard-evidence/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
PUBLIC_KEY = "public_key.pem"
_UNLISTED = frozenset({MANIFEST, SIGNATURE})  # every other file of a bundle is in its manifest
_CHUNK = 1 << 20


def public_pem(key: Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo), as ``public_key.pem`` holds it."""
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def fingerprint(key: Ed25519PublicKey) -> str:
    """``SHA256:<hex>`` of the raw 32-byte public key: what a recipient compares by telephone or letter."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + hashlib.sha256(raw).hexdigest()


def load_public_key(pem: bytes, where: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (a private key's PEM gives its public half).

    Raises:
        InvalidInputError: not a PEM Ed25519 key (``where`` names it in the message).
    """
    try:
        key: Any = serialization.load_pem_public_key(pem)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(pem, password=None).public_key()
        except (ValueError, TypeError):
            raise InvalidInputError(f"{where} is not a PEM Ed25519 key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInputError(f"{where} is not an Ed25519 key")
    return key


def sign(key: Ed25519PrivateKey, manifest: bytes) -> bytes:
    """``manifest.sig``: the base64 Ed25519 signature of the manifest's exact bytes, and a newline."""
    return base64.b64encode(key.sign(manifest)) + b"\n"


@dataclass
class BundleCheck:
    """What `verify_bundle` found.

    Attributes:
        problems: one line per fault (``changed: incidents/x/clip.mp4 ...``); empty when the bundle is intact.
        manifest: the manifest as read (empty when it could not be read).
        signer: fingerprint of the key that signed it (the embedded one), or ``None``.
        files: files the manifest lists; size: their bytes in all.
    """

    problems: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    signer: str | None = None
    files: int = 0
    size: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """The lines `campusguard evidence verify` prints for an intact bundle."""
        m = self.manifest
        incidents = m.get("incidents") or []
        return "\n".join(
            [
                f"verified: {len(incidents)} incident(s), {self.files} files, {self.size:,} bytes",
                f"signed by: {self.signer}",
                f"exported at: {m.get('created_at')} by {m.get('created_by')}",
                f"reason: {m.get('reason')}",
                f"incidents: {', '.join(map(str, incidents))}",
            ]
        )


Opener = Callable[[], IO[bytes]]
_DAMAGED = (zipfile.BadZipFile, OSError, ValueError)  # a CRC error: bytes changed inside the ZIP


def _open_binary(path: Path) -> IO[bytes]:
    return path.open("rb")


def _digest(open_file: Opener) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open_file() as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def verify_bundle(path: str | Path, key_pem: bytes | None = None, *, key_name: str = "the given key") -> BundleCheck:
    """Check a bundle: its signature, then every file against the manifest.

    Args:
        path: the ZIP, or the folder it was extracted into.
        key_pem: the signer's public key as the recipient got it (PEM); the bundle must be signed
            by it. Without it the embedded ``public_key.pem`` is used and its fingerprint reported,
            to be compared with the one the site gave.
        key_name: how problems name ``key_pem`` (its file name).

    Raises:
        InvalidInputError: ``path`` is missing, or neither a ZIP nor a folder (a ``key_pem`` that is no
            Ed25519 key is a problem of the check, not an error).
    """
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"evidence bundle {path} does not exist")
    check = BundleCheck()
    expected = None
    if key_pem is not None:
        try:
            expected = load_public_key(key_pem, key_name)
        except InvalidInputError as exc:  # an RSA key, or no key: the bundle is not signed by it
            check.problems.append(f"signature: {exc}; the bundle cannot be signed by it")
    if path.is_dir():
        files: dict[str, Opener] = {
            f.relative_to(path).as_posix(): partial(_open_binary, f) for f in sorted(path.rglob("*")) if f.is_file()
        }
        _check(check, files, expected, key_name)
        return check
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidInputError(f"{path} is not a ZIP evidence bundle: {exc}") from None
    with zf:
        for name, n in sorted(Counter(i.filename for i in zf.infolist()).items()):
            if n > 1:
                check.problems.append(f"added: {name} ({n - 1} more cop{'y' if n == 2 else 'ies'} under the same name)")
        files = {i.filename: partial(zf.open, i) for i in zf.infolist() if not i.is_dir()}
        _check(check, files, expected, key_name)
    return check


def _check(check: BundleCheck, files: dict[str, Opener], expected: Ed25519PublicKey | None, key_name: str) -> None:
    manifest_bytes = _read(files, MANIFEST, check)
    sig_text = _read(files, SIGNATURE, check)
    embedded_pem = _read(files, PUBLIC_KEY, check)
    if manifest_bytes is None:
        return
    try:
        check.manifest = json.loads(manifest_bytes)
        if not isinstance(check.manifest, dict) or check.manifest.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest")
    except ValueError as exc:
        check.problems.append(f"changed: {MANIFEST} (not a readable manifest: {exc})")
        check.manifest = {}
        return
    _check_signature(check, manifest_bytes, sig_text, embedded_pem, expected, key_name)
    _check_files(check, files)


def _read(files: dict[str, Opener], name: str, check: BundleCheck) -> bytes | None:
    open_file = files.get(name)
    if open_file is None:
        check.problems.append(f"missing: {name}")
        return None
    try:
        with open_file() as fh:
            return fh.read()
    except _DAMAGED as exc:
        check.problems.append(f"changed: {name} (damaged: {exc})")
        return None


def _check_signature(
    check: BundleCheck,
    manifest: bytes,
    sig_text: bytes | None,
    embedded_pem: bytes | None,
    expected: Ed25519PublicKey | None,
    key_name: str,
) -> None:
    embedded = None
    if embedded_pem is not None:
        try:
            embedded = load_public_key(embedded_pem, PUBLIC_KEY)
        except InvalidInputError as exc:
            check.problems.append(f"changed: {exc}")
    if embedded is not None:
        check.signer = fingerprint(embedded)
        if check.manifest.get("signer") not in (None, check.signer):
            check.problems.append(
                f"changed: {PUBLIC_KEY} (its fingerprint {check.signer} is not the manifest's signer {check.manifest.get('signer')})"
            )
    if expected is not None and check.signer is not None and fingerprint(expected) != check.signer:
        check.problems.append(
            f"signature: the bundle is signed by {check.signer}, not by {key_name} ({fingerprint(expected)})"
        )
    if sig_text is None:
        return
    try:
        signature = base64.b64decode(sig_text.strip(), validate=True)
    except ValueError:
        check.problems.append(f"changed: {SIGNATURE} (not base64)")
        return
    for key, name in ((embedded, PUBLIC_KEY), (expected, key_name)):
        if key is None:
            continue
        try:
            key.verify(signature, manifest)
        except InvalidSignature:
            check.problems.append(f"signature: {MANIFEST} is not signed by {name} ({fingerprint(key)})")


def _check_files(check: BundleCheck, files: dict[str, Opener]) -> None:
    listed: dict[str, dict[str, Any]] = {}
    for entry in check.manifest.get("files") or []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            listed[entry["path"]] = entry
    check.files = len(listed)
    check.size = sum(int(e.get("size") or 0) for e in listed.values())
    for name in sorted(listed):
        entry = listed[name]
        open_file = files.get(name)
        if open_file is None:
            check.problems.append(f"missing: {name}")
            continue
        try:
            sha, size = _digest(open_file)
        except _DAMAGED as exc:
            check.problems.append(f"changed: {name} (damaged: {exc})")
            continue
        if sha != entry.get("sha256") or size != entry.get("size"):
            check.problems.append(
                f"changed: {name} (sha256 {sha[:16]}..., {size} bytes; the manifest says "
                f"{str(entry.get('sha256'))[:16]}..., {entry.get('size')} bytes)"
            )
    for name in sorted(set(files) - set(listed) - _UNLISTED):
        check.problems.append(f"added: {name} (not in the manifest)")
