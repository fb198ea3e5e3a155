"""What an export or a report reads about incidents: records, checklists, audit entries, media files.

`CaseSource` is the site as the config file describes it (its event store, its media folders,
optionally its audit log); `CaseSource.incidents` gathers an `IncidentCase` per incident: the
record with its review state, its checklist, the audit entries about it, its sharp snapshot and
clip, and the recordings whose time covers it. `IncidentCase.history` is the incident's
timeline (raised, ended, acknowledged, checklist ticks, resolved, kept).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from campusguard.app.config.root import LoadedConfig, load_config
from campusguard.app.events.checklist import Checklist, sop_of
from campusguard.app.events.factory import open_event_store
from campusguard.app.events.records import EventFilter, EventRecord
from campusguard.app.events.store import UpsertingEventStore
from campusguard.app.media.annotate import recording_segments
from campusguard.errors import InvalidInputError

__all__ = ["AuditReader", "CaseSource", "IncidentCase", "MAX_CASE_INCIDENTS", "sha256_file"]

AuditReader = Callable[[Sequence[str]], list[dict[str, Any]]]
"""Event ids -> the audit entries whose target is one of them (``time``, ``user``, ``action``, ``target``, ``details``)."""

MAX_CASE_INCIDENTS = 1000
"""The most incidents one export or report holds."""
_SEGMENT = re.compile(r"_(\d{8}T\d{6}Z)_\d+\.mp4$")


def sha256_file(path: Path) -> tuple[str, int]:
    """``(hex SHA-256, size)`` of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _time(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)


@dataclass
class IncidentCase:
    """One incident as an export or a report shows it."""

    record: EventRecord
    checklist: Checklist
    audit: list[dict[str, Any]] = field(default_factory=list)
    snapshot: Path | None = None
    clip: Path | None = None
    recordings: list[Path] = field(default_factory=list)

    @property
    def event_id(self) -> str:
        return self.record.event.event_id

    def history(self) -> list[dict[str, Any]]:
        """The incident's timeline, oldest first: ``{"at", "what", "by", "detail"}`` rows (times ISO 8601 UTC)."""
        r = self.record
        data = r.to_dict()
        rows: list[dict[str, Any]] = [
            {"at": data["started_at"], "what": "raised", "by": "pipeline", "detail": r.event.rule_name}
        ]
        if data["ended_at"]:
            rows.append({"at": data["ended_at"], "what": "ended", "by": "pipeline", "detail": ""})
        if r.acknowledged_at:
            rows.append({"at": r.acknowledged_at, "what": "acknowledged", "by": r.acknowledged_by, "detail": ""})
        for step in self.checklist.to_dict()["steps"]:
            if step["at"]:
                rows.append(
                    {
                        "at": step["at"],
                        "what": "step ticked" if step["checked"] else "step unticked",
                        "by": step["by"],
                        "detail": step["step"],
                    }
                )
        if r.resolved_at:
            rows.append({"at": r.resolved_at, "what": "resolved", "by": r.resolved_by, "detail": r.note or ""})
        if r.outcome and r.outcome_at:
            rows.append({"at": r.outcome_at, "what": f"outcome: {r.outcome}", "by": r.outcome_by, "detail": ""})
        if r.kept and r.kept_at:
            rows.append({"at": r.kept_at, "what": "kept (legal hold)", "by": r.kept_by, "detail": ""})
        for entry in self.audit:  # notes given with each review action, as audited
            note = (entry.get("details") or {}).get("note")
            if note and entry.get("action") in ("event.acknowledge", "event.resolve"):
                rows.append({"at": entry["time"], "what": "note", "by": entry.get("user"), "detail": note})
        return sorted(rows, key=lambda row: str(row["at"]))

    def to_dict(self) -> dict[str, Any]:
        """``incident.json`` of a bundle: the record, its checklist, timeline and audit entries."""
        return {
            **self.record.to_dict(),
            "checklist": self.checklist.to_dict(),
            "history": self.history(),
            "audit": self.audit,
        }


@dataclass
class CaseSource:
    """A site's incidents and media, read the way `serve` writes them.

    Attributes:
        loaded: the config in force; config_text: its file's text (the revision exported).
        store: the event store (SQLite or PostgreSQL).
        snapshot_roots: folders a snapshot may be in (a row naming a file elsewhere is not trusted).
        clips_dir: ``<event_id>.mp4`` clips; recordings_dir: annotated recordings, if any.
        audit: reads the audit entries about incidents (``None``: no audit log available).
    """

    loaded: LoadedConfig
    config_text: str
    store: UpsertingEventStore
    snapshot_roots: tuple[Path, ...]
    clips_dir: Path | None
    recordings_dir: Path | None = None
    audit: AuditReader | None = None
    owns_store: bool = False

    @classmethod
    def from_config(cls, config_path: Path, *, audit: AuditReader | None = None) -> CaseSource:
        """The site of a config file: its store and `serve`'s default media folders beside the SQLite file.

        Raises:
            ConfigError: the config is invalid; InvalidInputError: the store cannot be opened.
        """
        loaded = load_config(config_path)
        config = loaded.config
        store = open_event_store(config.storage)
        if not isinstance(store, UpsertingEventStore):
            store.close()
            raise InvalidInputError("this event store cannot export evidence")
        media = Path(config.storage.sqlite).parent / "media"
        snapshots = Path(config.outputs.snapshots_dir) if config.outputs.snapshots_dir else media / "snapshots"
        recordings = config.outputs.annotated_video_dir
        return cls(
            loaded=loaded,
            config_text=Path(config_path).read_text(encoding="utf-8"),
            store=store,
            snapshot_roots=(snapshots, media),
            clips_dir=media / "clips",
            recordings_dir=Path(recordings) if recordings else None,
            audit=audit,
            owns_store=True,
        )

    def close(self) -> None:
        if self.owns_store:
            self.store.close()

    def select(
        self,
        event_ids: Sequence[str] = (),
        *,
        camera: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[EventRecord]:
        """The incidents named by id (each must exist), else those of ``camera`` (any when ``None``)
        started in ``[since, until)``, oldest first.

        Raises:
            InvalidInputError: an unknown id, nothing selected, or more than `MAX_CASE_INCIDENTS`.
        """
        if event_ids:
            ids = list(dict.fromkeys(event_ids))
            if len(ids) > MAX_CASE_INCIDENTS:
                raise InvalidInputError(f"at most {MAX_CASE_INCIDENTS} incidents per case, got {len(ids)}")
            records = []
            for eid in ids:
                record = self.store.get_record(eid)
                if record is None:
                    raise InvalidInputError(f"no incident {eid!r} in the event store")
                records.append(record)
            return records
        where = EventFilter(camera_id=camera, since=since, until=until)
        records, total = self.store.query_records(where, limit=MAX_CASE_INCIDENTS + 1, newest_first=False)
        if total > MAX_CASE_INCIDENTS:
            raise InvalidInputError(f"{total} incidents match; at most {MAX_CASE_INCIDENTS} per case (narrow the time)")
        return records

    def incidents(self, records: Sequence[EventRecord]) -> list[IncidentCase]:
        """An `IncidentCase` per record (same order)."""
        ids = [r.event.event_id for r in records]
        marks = self.store.checklists(ids)
        audit = self.audit(ids) if self.audit is not None and ids else []
        by_target: dict[str, list[dict[str, Any]]] = {}
        for entry in audit:
            by_target.setdefault(str(entry.get("target")), []).append(entry)
        config = self.loaded.config
        out = []
        for r in records:
            ev = r.event
            eid = ev.event_id
            out.append(
                IncidentCase(
                    record=r,
                    checklist=Checklist(sop_of(config, ev.camera_id, ev.rule_name), marks.get(eid, {})),
                    audit=sorted(by_target.get(eid, []), key=lambda e: str(e.get("time"))),
                    snapshot=self._snapshot(eid, ev.snapshot_path),
                    clip=self._clip(eid),
                    recordings=self._recordings(r),
                )
            )
        return out

    def _snapshot(self, event_id: str, stored: str | None) -> Path | None:
        candidates = [Path(stored)] if stored else []
        candidates += [root / "cluster-snapshots" / f"{event_id}.jpg" for root in self.snapshot_roots]
        roots = [root.resolve() for root in self.snapshot_roots]
        for path in candidates:
            resolved = path.resolve()
            if any(resolved.is_relative_to(root) for root in roots) and resolved.is_file():
                return resolved
        return None

    def _clip(self, event_id: str) -> Path | None:
        if self.clips_dir is None or not re.fullmatch(r"[A-Za-z0-9_.:-]+", event_id):
            return None
        path = self.clips_dir / f"{event_id}.mp4"
        return path if path.is_file() else None

    def _recordings(self, record: EventRecord) -> list[Path]:
        """The camera's finished recording segments whose time overlaps the incident's."""
        if self.recordings_dir is None:
            return []
        data = record.to_dict()
        start = _time(data["started_at"])
        if start is None:
            return []
        end = _time(data["ended_at"]) or datetime.now(UTC)
        length = timedelta(seconds=self.loaded.config.outputs.annotated_segment_s)
        found = []
        for path in recording_segments(self.recordings_dir, record.event.camera_id):
            m = _SEGMENT.search(path.name)
            if m is None:
                continue
            seg_start = datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            if seg_start <= end and seg_start + length >= start:
                found.append(path)
        return found

    def camera_facts(self, camera_ids: Sequence[str], incidents: Sequence[IncidentCase]) -> list[dict[str, Any]]:
        """Per camera: id, resolution (declared, else the snapshot's), privacy policy, zones, lines and rules in force."""
        facts = []
        for cid in dict.fromkeys(camera_ids):
            cam = next((c for c in self.loaded.config.cameras if c.id == cid), None)
            resolution: list[int] | None = list(cam.resolution_wh) if cam and cam.resolution_wh else None
            if resolution is None:
                snap = next((i.snapshot for i in incidents if i.record.event.camera_id == cid and i.snapshot), None)
                if snap is not None:
                    import cv2

                    image = cv2.imread(str(snap))
                    if image is not None:
                        resolution = [int(image.shape[1]), int(image.shape[0])]
            facts.append(
                {
                    "id": cid,
                    "in_config": cam is not None,
                    "resolution_wh": resolution,
                    "privacy": cam.privacy.model_dump(mode="json") if cam else None,
                    "zones": [z.model_dump(mode="json") for z in cam.zones] if cam else [],
                    "lines": [ln.model_dump(mode="json") for ln in cam.lines] if cam else [],
                    "rules": [{"kind": r.kind, **r.model_dump(mode="json")} for r in cam.rules] if cam else [],
                }
            )
        return facts

    def models(self) -> list[dict[str, Any]]:
        """The detector models the config names, with their files' SHA-256 where the file is here."""
        from campusguard.models.aliases import resolve_alias
        from campusguard.models.resolve import DEFAULT_MODEL

        config = self.loaded.config
        names = [config.detector.model, *(c.model for c in config.cameras if c.model)]
        out = []
        for name in dict.fromkeys(names):
            path = DEFAULT_MODEL if name is None else (resolve_alias(name) or Path(name))
            entry: dict[str, Any] = {"model": name or "bundled default", "file": str(path)}
            if path.is_file():
                entry["sha256"], entry["size"] = sha256_file(path)
            else:
                entry["sha256"] = None
            out.append(entry)
        return out
