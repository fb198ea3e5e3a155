"""`export_case`: incidents into one signed evidence bundle (a ZIP; see `campusguard.app.evidence.bundle`).

Layout of a bundle::

    manifest.json            every other file with its SHA-256 and size, who exported, when and why
    manifest.sig             Ed25519 signature of manifest.json (base64)
    public_key.pem           the signer's public key
    case.json                the selection, software version, models with their SHA-256
    config/watch.yaml        the config file in force at export (zones, lines, rules, privacy), its secrets
                             (passwords, credentials in URLs, tokens, headers) shown ``***``
    config/cameras.json      per camera: id, resolution, privacy policy, zones, lines, rules
    audit.json               the audit entries about the incidents
    incidents/<id>/incident.json   the record, review state, checklist, timeline, audit entries
    incidents/<id>/snapshot.jpg    the sharp snapshot; clip.mp4: the sharp clip
    recordings/<name>.mp4    the camera recordings whose time covers an incident
    report.html              the incident report (`campusguard.app.evidence.report`)

Media are stored uncompressed (JPEG and H.264 do not shrink), text deflated. The bundle is
written beside ``out`` under a temporary name (mode ``0600``: it holds sharp media) and renamed
when complete. Every exported incident
is then marked kept (legal hold) until someone releases it.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from campusguard import __version__
from campusguard.app.events.records import EventRecord, utc_iso
from campusguard.app.evidence.bundle import FORMAT, MANIFEST, PUBLIC_KEY, SIGNATURE, fingerprint, public_pem, sign
from campusguard.app.evidence.case import CaseSource, IncidentCase
from campusguard.app.infra.secrets import redact_config_yaml
from campusguard.errors import InvalidInputError

__all__ = ["ExportResult", "default_user", "export_case"]

_STORED = {".jpg", ".jpeg", ".mp4", ".png", ".pdf"}


def default_user() -> str:
    """``cli:<login name>``: who exports from the command line."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


@dataclass(frozen=True)
class ExportResult:
    """What `export_case` wrote."""

    path: Path
    incidents: list[str]
    files: int
    size: int
    signer: str
    manifest_sha256: str
    seconds: float


class _Writer:
    """A ZIP being written, hashing each file as it goes in."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.files: list[dict[str, Any]] = []

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=time.gmtime()[:6])
        info.compress_type = zipfile.ZIP_STORED if Path(name).suffix.lower() in _STORED else zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        return info

    def add_bytes(self, name: str, data: bytes, *, listed: bool = True) -> None:
        self.zf.writestr(self._info(name), data)
        if listed:
            self.files.append({"path": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})

    def add_json(self, name: str, value: Any) -> None:
        self.add_bytes(name, (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode())

    def add_file(self, name: str, path: Path) -> None:
        h = hashlib.sha256()
        size = 0
        with open(path, "rb") as src, self.zf.open(self._info(name), "w", force_zip64=True) as dst:
            while chunk := src.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
                dst.write(chunk)
        self.files.append({"path": name, "sha256": h.hexdigest(), "size": size})


def export_case(
    source: CaseSource,
    records: Sequence[EventRecord],
    out: Path,
    *,
    key: Ed25519PrivateKey,
    user: str,
    reason: str,
    selection: dict[str, Any] | None = None,
    keep: bool = True,
) -> ExportResult:
    """Write the evidence bundle of ``records`` to ``out`` and mark them kept.

    Args:
        source: the site (store, media, config, audit log).
        records: the incidents (`CaseSource.select`).
        out: the ZIP to write (replaced if it exists).
        key: the site's evidence key (`campusguard.app.evidence.keys.load_or_create_key`).
        user: who exports (a console user, or ``cli:<login>``); reason: why (required).
        selection: how the incidents were chosen, recorded in ``case.json``.
        keep: mark every exported incident kept (legal hold).

    Raises:
        InvalidInputError: no incidents, an empty reason, or ``out`` cannot be written.
    """
    t0 = time.perf_counter()
    if not records:
        raise InvalidInputError("no incidents to export")
    if not reason.strip():
        raise InvalidInputError("an evidence export needs a reason (who asked for it, what for)")
    incidents = source.incidents(records)
    created_at = utc_iso(datetime.now(UTC))
    signer = fingerprint(key.public_key())
    out = Path(out)
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", allowZip64=True) as zf:
            w = _Writer(zf)
            _write_case(w, source, incidents, public_pem(key.public_key()), created_at, user, reason, selection or {})
            files = sorted(w.files, key=lambda f: f["path"])
            manifest: dict[str, Any] = {
                "format": FORMAT,
                "created_at": created_at,
                "created_by": user,
                "reason": reason,
                "signer": signer,
                "legal_hold": keep,
                "incidents": [i.event_id for i in incidents],
                "files": files,
            }
            manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
            w.add_bytes(MANIFEST, manifest_bytes, listed=False)
            w.add_bytes(SIGNATURE, sign(key, manifest_bytes), listed=False)
        os.replace(part, out)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise InvalidInputError(f"cannot write the evidence bundle {out}: {exc.strerror or exc}") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if keep:
        for case in incidents:
            if not case.record.kept:
                source.store.keep(case.event_id, True, user=user)
    return ExportResult(
        path=out,
        incidents=[i.event_id for i in incidents],
        files=len(files),
        size=sum(int(f["size"]) for f in files),
        signer=signer,
        manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
        seconds=time.perf_counter() - t0,
    )


def _write_case(
    w: _Writer,
    source: CaseSource,
    incidents: list[IncidentCase],
    key_pem: bytes,
    created_at: str,
    user: str,
    reason: str,
    selection: dict[str, Any],
) -> None:
    """Every listed file of the bundle (all but the manifest and its signature)."""
    from campusguard.app.evidence.report import incident_report_html

    w.add_bytes(PUBLIC_KEY, key_pem)
    w.add_json(
        "case.json",
        {
            "created_at": created_at,
            "created_by": user,
            "reason": reason,
            "selection": selection,
            "incidents": [i.event_id for i in incidents],
            "software": {
                "campusguard": __version__,
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "models": source.models(),
        },
    )
    config_text = redact_config_yaml(source.config_text).encode()  # never the site's passwords or tokens
    w.add_bytes("config/watch.yaml", config_text)
    cameras = [i.record.event.camera_id for i in incidents]
    w.add_json(
        "config/cameras.json",
        {
            "config_sha256": hashlib.sha256(config_text).hexdigest(),
            "cameras": source.camera_facts(cameras, incidents),
        },
    )
    audit: list[dict[str, Any]] = []
    recordings: dict[str, Path] = {}
    for case in incidents:
        folder = f"incidents/{case.event_id}"
        media: dict[str, str | None] = {"snapshot": None, "clip": None}
        if case.snapshot is not None:
            media["snapshot"] = name = f"{folder}/snapshot.jpg"
            w.add_file(name, case.snapshot)
        if case.clip is not None:
            media["clip"] = name = f"{folder}/clip.mp4"
            w.add_file(name, case.clip)
        for rec in case.recordings:
            recordings.setdefault(rec.name, rec)
        w.add_json(
            f"{folder}/incident.json",
            {**case.to_dict(), "files": media, "recordings": [f"recordings/{r.name}" for r in case.recordings]},
        )
        audit.extend(case.audit)
    for name, path in sorted(recordings.items()):
        w.add_file(f"recordings/{name}", path)
    w.add_json("audit.json", sorted(audit, key=lambda e: (str(e.get("time")), str(e.get("id")))))
    hashes = {f["path"]: f["sha256"] for f in w.files}
    w.add_bytes("report.html", incident_report_html(source, incidents, hashes=hashes).encode())
