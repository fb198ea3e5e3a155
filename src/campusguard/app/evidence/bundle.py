"""The evidence bundle: a ZIP whose ``manifest.json`` lists every other file with its SHA-256 and
size, signed with Ed25519 (``manifest.sig``) by the key whose public half is ``public_key.pem``.

`verify_bundle` checks a bundle (the ZIP, or the folder it was extracted into) offline: the signature (by the embedded key, and by a key the
recipient got another way when given one), then every file against the manifest: a changed,
missing or added file is named. It imports only the standard library and ``cryptography``,
so `campusguard evidence verify` runs on a machine with nothing but the core install.

A signature proves nothing until the signer is known: anyone can rebuild a manifest and sign it
with a key of their own. A check is `BundleCheck.trusted` only when it was pinned to the site's
key (``key_pem``) or fingerprint (``pin``) and matched; an intact bundle without a pin is
`BundleCheck.ok` but not trusted, and the CLI gives it a different exit code (3), as minisign and
Sigstore refuse to call a signature good without a trust anchor.

What an attacker controls is read carefully: the manifest, signature and key are read with a size
limit before they are parsed, a folder's symbolic links are refused (never followed), at most
`MAX_ENTRIES` files are looked at, and every name in a message is escaped (`shown`), so a crafted
entry name cannot write terminal escape codes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
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
    "MAX_ENTRIES",
    "MAX_MANIFEST_BYTES",
    "FORMAT",
    "MANIFEST",
    "PUBLIC_KEY",
    "SIGNATURE",
    "BundleCheck",
    "fingerprint",
    "load_public_key",
    "parse_fingerprint",
    "public_pem",
    "shown",
    "sign",
    "verify_bundle",
]

FORMAT = "campusguard-evidence/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
PUBLIC_KEY = "public_key.pem"
_UNLISTED = frozenset({MANIFEST, SIGNATURE})  # every other file of a bundle is in its manifest
_CHUNK = 1 << 20
MAX_MANIFEST_BYTES = 32 << 20
"""The most a manifest may hold (a case of 200 incidents with all their files is well under 1 MiB)."""
_MAX_SMALL = {MANIFEST: MAX_MANIFEST_BYTES, SIGNATURE: 4096, PUBLIC_KEY: 4096}
MAX_ENTRIES = 100_000
"""The most files a bundle may hold."""
_FINGERPRINT = re.compile(r"^SHA256:([0-9a-fA-F]{64})$")


def shown(text: object) -> str:
    """``text`` safe to print: every character that is not printable (control codes, escapes, line
    and bidi separators) written as a Python escape (``\\x1b``)."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in value)


def parse_fingerprint(text: str) -> str:
    """A ``SHA256:<64 hex>`` fingerprint, normalised (hex in lower case).

    Raises:
        InvalidInputError: not such a fingerprint.
    """
    found = _FINGERPRINT.match(text.strip().removeprefix("fingerprint:").strip())
    if found is None:
        raise InvalidInputError(
            f"--fingerprint must be SHA256: and 64 hex digits, as `campusguard evidence key` prints it, got {shown(text)!r}"
        )
    return "SHA256:" + found.group(1).lower()


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
        problems: one line per fault (``changed: incidents/x/clip.mp4 ...``), names escaped; empty
            when the bundle is intact.
        manifest: the manifest as read (empty when it could not be read).
        signer: fingerprint of the key that signed it (the embedded one), or ``None``.
        pinned: the check was given the signer to expect (a key or a fingerprint).
        files: files the manifest lists; size: their bytes in all.
    """

    problems: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    signer: str | None = None
    pinned: bool = False
    files: int = 0
    size: int = 0

    @property
    def ok(self) -> bool:
        """Intact: signed by the key it carries, every file as the manifest says (whoever signed it)."""
        return not self.problems

    @property
    def trusted(self) -> bool:
        """Intact and signed by the pinned key: the only answer that says the site made it."""
        return self.ok and self.pinned and self.signer is not None

    def summary(self) -> str:
        """The lines `campusguard evidence verify` prints for an intact bundle."""
        m = self.manifest
        incidents = m.get("incidents") or []
        head = "verified" if self.trusted else "intact"
        count = len(incidents) if isinstance(incidents, list) else 0
        shown_ids = ", ".join(shown(i) for i in incidents) if isinstance(incidents, list) else ""
        return "\n".join(
            [
                f"{head}: {count} incident(s), {self.files} files, {self.size:,} bytes",
                f"signed by: {self.signer}" + ("" if self.pinned else " (signer not pinned)"),
                f"exported at: {shown(m.get('created_at'))} by {shown(m.get('created_by'))}",
                f"reason: {shown(m.get('reason'))}",
                f"incidents: {shown_ids}",
            ]
        )


Opener = Callable[[], IO[bytes]]
_DAMAGED = (zipfile.BadZipFile, OSError, ValueError)  # a CRC error: bytes changed inside the ZIP


def _open_binary(path: Path) -> IO[bytes]:
    """Open a folder bundle's file, never through a symbolic link (``O_NOFOLLOW``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    return os.fdopen(fd, "rb")


def _folder_files(root: Path, check: BundleCheck) -> dict[str, Opener]:
    """The files under ``root``; symbolic links and other non-regular entries are refused (problems), not followed."""
    files: dict[str, Opener] = {}
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in sorted([*dirs, *names]):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                check.problems.append(f"refused: {shown(rel)} is a symbolic link")
            elif stat.S_ISREG(mode):
                files[rel] = partial(_open_binary, path)
            elif not stat.S_ISDIR(mode):
                check.problems.append(f"refused: {shown(rel)} is not a regular file")
            if len(files) > MAX_ENTRIES:
                raise InvalidInputError(f"{root} holds more than {MAX_ENTRIES} files; not an evidence bundle")
    return files


def _digest(open_file: Opener) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open_file() as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def verify_bundle(
    path: str | Path,
    key_pem: bytes | None = None,
    *,
    key_name: str = "the given key",
    pin: str | None = None,
) -> BundleCheck:
    """Check a bundle: its signature, then every file against the manifest.

    Args:
        path: the ZIP, or the folder it was extracted into.
        key_pem: the signer's public key as the recipient got it (PEM); the bundle must be signed
            by it. Without it (and without ``pin``) the embedded ``public_key.pem`` is used and its
            fingerprint reported, to be compared with the one the site gave: the check is then
            never `BundleCheck.trusted`.
        key_name: how problems name ``key_pem`` (its file name).
        pin: the signer's fingerprint (``SHA256:<hex>``, `parse_fingerprint`) as the site published it.

    Raises:
        InvalidInputError: ``path`` is missing, or neither a ZIP nor a folder, or far too big a
            folder (a ``key_pem`` that is no Ed25519 key is a problem of the check, not an error).
    """
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"evidence bundle {shown(path)} does not exist")
    check = BundleCheck(pinned=key_pem is not None or pin is not None)
    expected = None
    if key_pem is not None:
        try:
            expected = load_public_key(key_pem, key_name)
        except InvalidInputError as exc:  # an RSA key, or no key: the bundle is not signed by it
            check.problems.append(f"signature: {exc}; the bundle cannot be signed by it")
    if path.is_dir():
        files = _folder_files(path, check)
        _check(check, files, expected, key_name)
        _check_pin(check, pin)
        return check
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidInputError(f"{shown(path)} is not a ZIP evidence bundle: {shown(exc)}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            check.problems.append(f"added: {len(infos)} entries, more than any bundle holds ({MAX_ENTRIES})")
            return check
        for name, n in sorted(Counter(i.filename for i in infos).items()):
            if n > 1:
                copies = f"{n - 1} more cop{'y' if n == 2 else 'ies'} under the same name"
                check.problems.append(f"added: {shown(name)} ({copies})")
        for info in infos:
            limit = _MAX_SMALL.get(info.filename)
            if limit is not None and info.file_size > limit:
                check.problems.append(f"changed: {info.filename} ({info.file_size:,} bytes, more than {limit:,})")
                return check
        entries: dict[str, Opener] = {i.filename: partial(zf.open, i) for i in infos if not i.is_dir()}
        _check(check, entries, expected, key_name)
    _check_pin(check, pin)
    return check


def _check_pin(check: BundleCheck, pin: str | None) -> None:
    if pin is not None and check.signer is not None and check.signer != pin:
        check.problems.append(f"signature: the bundle is signed by {check.signer}, not by the pinned {pin}")
    if check.pinned and check.signer is None and not check.problems:
        check.problems.append(f"missing: {PUBLIC_KEY} (the signer cannot be compared with the pinned one)")


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
        check.problems.append(f"changed: {MANIFEST} (not a readable manifest: {shown(exc)})")
        check.manifest = {}
        return
    _check_signature(check, manifest_bytes, sig_text, embedded_pem, expected, key_name)
    _check_files(check, files)


def _read(files: dict[str, Opener], name: str, check: BundleCheck) -> bytes | None:
    open_file = files.get(name)
    if open_file is None:
        check.problems.append(f"missing: {name}")
        return None
    limit = _MAX_SMALL.get(name, MAX_MANIFEST_BYTES)
    try:
        with open_file() as fh:
            data = fh.read(limit + 1)
    except _DAMAGED as exc:
        check.problems.append(f"changed: {name} (damaged: {shown(exc)})")
        return None
    if len(data) > limit:
        check.problems.append(f"changed: {name} (more than {limit:,} bytes)")
        return None
    return data


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
                f"changed: {PUBLIC_KEY} (its fingerprint {check.signer} is not the manifest's signer "
                f"{shown(check.manifest.get('signer'))})"
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
    check.size = sum(e["size"] for e in listed.values() if isinstance(e.get("size"), int))
    for name in sorted(listed):
        entry = listed[name]
        open_file = files.get(name)
        if open_file is None:
            check.problems.append(f"missing: {shown(name)}")
            continue
        try:
            sha, size = _digest(open_file)
        except _DAMAGED as exc:
            check.problems.append(f"changed: {shown(name)} (damaged: {shown(exc)})")
            continue
        if sha != entry.get("sha256") or size != entry.get("size"):
            check.problems.append(
                f"changed: {shown(name)} (sha256 {sha[:16]}..., {size} bytes; the manifest says "
                f"{shown(str(entry.get('sha256'))[:16])}..., {shown(entry.get('size'))} bytes)"
            )
    for name in sorted(set(files) - set(listed) - _UNLISTED):
        check.problems.append(f"added: {shown(name)} (not in the manifest)")
