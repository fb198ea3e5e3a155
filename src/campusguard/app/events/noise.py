"""Where the noise comes from: incidents per day and the share of false and nuisance alarms, per rule,
zone, camera and hour of day, worst first (the console's noise page, ``GET /api/v1/noise``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from campusguard.app.events.records import EventRecord

__all__ = ["NoiseRow", "noise_rows"]


@dataclass(frozen=True)
class NoiseRow:
    """One rule, zone, camera and hour of day (local time) over a period.

    Attributes:
        incidents: incidents raised; per_day: the same per day of the period.
        false_alarm, nuisance, confirmed: incidents resolved with that outcome.
        noise_share: false alarms and nuisance over the incidents with an outcome (None: none has one).
        noise_per_day: false alarms and nuisance per day: the order of the list, worst first.
    """

    rule: str
    kind: str
    zone: str
    camera: str
    hour: int
    incidents: int
    per_day: float
    false_alarm: int
    nuisance: int
    confirmed: int
    noise_share: float | None
    noise_per_day: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _local_hour(record: EventRecord) -> int:
    ev = record.event
    when = ev.started_at if ev.started_at is not None else datetime.fromisoformat(record.time_utc)
    return when.astimezone().hour


def noise_rows(records: Iterable[EventRecord], days: float) -> list[NoiseRow]:
    """The groups of ``records`` (a period of ``days`` days), worst first: most false and nuisance
    alarms per day, then the highest share of them, then most incidents per day."""
    groups: dict[tuple[str, str, str, str, int], list[EventRecord]] = {}
    for r in records:
        ev = r.event
        groups.setdefault((ev.rule_name, ev.rule_kind, ev.zone, ev.camera_id, _local_hour(r)), []).append(r)
    days = max(days, 1e-9)
    rows = []
    for (rule, kind, zone, camera, hour), rs in groups.items():
        fa = sum(1 for r in rs if r.outcome == "false_alarm")
        nu = sum(1 for r in rs if r.outcome == "nuisance")
        co = sum(1 for r in rs if r.outcome == "confirmed")
        judged = fa + nu + co
        rows.append(
            NoiseRow(
                rule=rule,
                kind=kind,
                zone=zone,
                camera=camera,
                hour=hour,
                incidents=len(rs),
                per_day=round(len(rs) / days, 3),
                false_alarm=fa,
                nuisance=nu,
                confirmed=co,
                noise_share=None if not judged else round((fa + nu) / judged, 3),
                noise_per_day=round((fa + nu) / days, 3),
            )
        )
    rows.sort(key=lambda r: (-r.noise_per_day, -(r.noise_share or 0.0), -r.per_day, r.rule, r.camera, r.hour))
    return rows
