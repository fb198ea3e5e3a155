"""Scoring detected incidents against scripted ground truth: precision, recall, F1, start error.

Public API:
    `Incident`: one incident interval (camera, kind, zone, start_s, end_s, track ids).
    `load_truth(path) -> list[Incident]`: a ground-truth JSON of `campusguard.data.synth`
        (keys ``camera_id``, ``zones``, ``lines``, ``params``, ``frames``, ``incidents``; each
        incident ``{"kind", "zone", "start_s", "end_s", "track_ids"}``).
    `incidents_from_events(events) -> list[Incident]`: predicted incidents from stored `Event`s.
    `evaluate_events(truth, predicted, tolerance_s=2.0, camera_id=None) -> EventScores`.
    `precision_recall_f1(tp, fp, fn)`: the three scores of counts (also of counts pooled over runs).

Matching: a truth and a predicted incident can match when they share camera, rule kind and
zone (line name for ``line_crossing``), and their time intervals overlap once the truth
interval is widened by ``tolerance_s`` on both sides. Matching is one-to-one, maximising the
number of matches and then minimising the summed start-time difference (Hungarian
assignment). Unmatched truths are false negatives, unmatched predictions false positives.
Predictions from cameras that have no ground truth are ignored (a truth file per camera).
Open predicted events (no ``end_s``) count as instantaneous at ``start_s``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.app.events.types import Event
from campusguard.errors import InvalidInputError

__all__ = [
    "Incident",
    "KindScore",
    "EventScores",
    "load_truth",
    "load_truth_file",
    "incidents_from_events",
    "evaluate_events",
    "precision_recall_f1",
]


@dataclass(frozen=True)
class Incident:
    """One incident interval, truth or predicted; times in stream seconds."""

    camera_id: str
    kind: str
    zone: str
    start_s: float
    end_s: float
    track_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class KindScore:
    """Counts and scores of one rule kind (or ``"overall"``).

    ``precision`` is 1.0 with no predictions and ``recall`` 1.0 with no truth, so a kind
    nobody scripted and nobody raised never appears as a failure. Start errors are absolute
    seconds over matched pairs (``nan`` without matches).
    """

    kind: str
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float
    start_error_mean_s: float
    start_error_median_s: float


@dataclass(frozen=True)
class EventScores:
    """Result of `evaluate_events`."""

    per_kind: dict[str, KindScore]
    overall: KindScore
    matches: list[tuple[Incident, Incident]] = field(default_factory=list)
    false_negatives: list[Incident] = field(default_factory=list)
    false_positives: list[Incident] = field(default_factory=list)
    tolerance_s: float = 2.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (``nan`` as ``None``)."""

        def clean(score: KindScore) -> dict[str, Any]:
            return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(score).items()}

        return {
            "tolerance_s": self.tolerance_s,
            "overall": clean(self.overall),
            "per_kind": {k: clean(v) for k, v in self.per_kind.items()},
            "matches": [{"truth": asdict(t), "predicted": asdict(p)} for t, p in self.matches],
            "false_negatives": [asdict(i) for i in self.false_negatives],
            "false_positives": [asdict(i) for i in self.false_positives],
        }


def _read_truth_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InvalidInputError(f"ground-truth file {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"ground-truth file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or "camera_id" not in data or "incidents" not in data:
        raise InvalidInputError(f"ground-truth file {path} needs keys 'camera_id' and 'incidents'")
    return data


def load_truth(path: str | Path) -> list[Incident]:
    """Read a ground-truth JSON file into incidents.

    Raises:
        InvalidInputError: missing file, bad JSON, or a missing key, naming the file.
    """
    return load_truth_file(path)[1]


def load_truth_file(path: str | Path) -> tuple[str, list[Incident]]:
    """The camera id a ground-truth JSON file describes, and its incidents (see `load_truth`)."""
    path = Path(path)
    data = _read_truth_json(path)
    camera = str(data["camera_id"])
    out = []
    for i, inc in enumerate(data["incidents"]):
        try:
            start = float(inc["start_s"])
            end = float(inc["end_s"]) if inc.get("end_s") is not None else start
            out.append(
                Incident(
                    camera_id=camera,
                    kind=str(inc["kind"]),
                    zone=str(inc["zone"]),
                    start_s=start,
                    end_s=max(end, start),
                    track_ids=tuple(int(t) for t in inc.get("track_ids", ())),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"ground-truth file {path}: incidents[{i}] is invalid ({exc!r})") from exc
    return camera, out


def incidents_from_events(events: Iterable[Event]) -> list[Incident]:
    """Predicted incidents from the latest state of stored events (one per ``event_id``)."""
    latest: dict[str, Event] = {}
    for ev in events:
        latest[ev.event_id] = ev
    return [
        Incident(
            camera_id=e.camera_id,
            kind=e.rule_kind,
            zone=e.zone,
            start_s=e.start_s,
            end_s=e.start_s if e.end_s is None else max(e.end_s, e.start_s),
            track_ids=e.tracker_ids,
        )
        for e in latest.values()
    ]


def precision_recall_f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and F1 of match counts; precision is 1.0 without predictions and recall
    1.0 without truth (see `KindScore`)."""
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _score(kind: str, tp: int, fp: int, fn: int, errors: Sequence[float]) -> KindScore:
    precision, recall, f1 = precision_recall_f1(tp, fp, fn)
    err = np.asarray(errors, dtype=np.float64)
    mean = float(err.mean()) if len(err) else math.nan
    median = float(np.median(err)) if len(err) else math.nan
    return KindScore(kind, tp, fp, fn, precision, recall, f1, mean, median)


def _match_group(truth: Sequence[Incident], predicted: Sequence[Incident], tolerance_s: float) -> list[tuple[int, int]]:
    """One-to-one feasible pairs (truth index, predicted index) of one camera/kind/zone."""
    if not truth or not predicted:
        return []
    from scipy.optimize import linear_sum_assignment

    t_start = np.array([t.start_s for t in truth])[:, None]
    t_end = np.array([t.end_s for t in truth])[:, None]
    p_start = np.array([p.start_s for p in predicted])[None, :]
    p_end = np.array([p.end_s for p in predicted])[None, :]
    feasible = (p_start <= t_end + tolerance_s) & (p_end >= t_start - tolerance_s)
    diff = np.abs(p_start - t_start)
    # an infeasible pair costs more than all feasible ones together, so the number of
    # feasible matches is maximised first and the start differences minimised second
    big = float(diff[feasible].sum()) + 1.0 if feasible.any() else 1.0
    cost = np.where(feasible, diff, big * (len(truth) + len(predicted)))
    rows, cols = linear_sum_assignment(cost)
    return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if feasible[r, c]]


def evaluate_events(
    truth: Sequence[Incident],
    predicted: Sequence[Incident],
    *,
    tolerance_s: float = 2.0,
    camera_id: str | None = None,
) -> EventScores:
    """Match predicted incidents to ground truth and score them per kind and overall.

    Args:
        truth: scripted incidents (`load_truth`).
        predicted: detected incidents (`incidents_from_events`).
        tolerance_s: seconds the truth interval is widened on each side for matching (>= 0).
        camera_id: score only this camera.

    Raises:
        InvalidInputError: negative tolerance, or ``camera_id`` absent from the ground truth.
    """
    if not (tolerance_s >= 0 and math.isfinite(tolerance_s)):
        raise InvalidInputError(f"tolerance must be a finite number >= 0 seconds, got {tolerance_s}")
    cameras = {t.camera_id for t in truth}
    if camera_id is not None:
        if camera_id not in cameras and truth:
            raise InvalidInputError(f"camera {camera_id!r} has no ground truth; cameras: {sorted(cameras)}")
        cameras = {camera_id}
    truth = [t for t in truth if t.camera_id in cameras]
    predicted = [p for p in predicted if p.camera_id in cameras]

    groups: dict[tuple[str, str, str], tuple[list[Incident], list[Incident]]] = defaultdict(lambda: ([], []))
    for t in truth:
        groups[(t.camera_id, t.kind, t.zone)][0].append(t)
    for p in predicted:
        groups[(p.camera_id, p.kind, p.zone)][1].append(p)

    matches: list[tuple[Incident, Incident]] = []
    fns: list[Incident] = []
    fps: list[Incident] = []
    for key in sorted(groups):
        ts, ps = groups[key]
        pairs = _match_group(ts, ps, tolerance_s)
        matched_t = {r for r, _ in pairs}
        matched_p = {c for _, c in pairs}
        matches += [(ts[r], ps[c]) for r, c in pairs]
        fns += [t for i, t in enumerate(ts) if i not in matched_t]
        fps += [p for i, p in enumerate(ps) if i not in matched_p]

    kinds = sorted({t.kind for t in truth} | {p.kind for p in predicted})
    per_kind = {}
    for kind in kinds:
        errors = [abs(p.start_s - t.start_s) for t, p in matches if t.kind == kind]
        per_kind[kind] = _score(
            kind,
            tp=len(errors),
            fp=sum(p.kind == kind for p in fps),
            fn=sum(t.kind == kind for t in fns),
            errors=errors,
        )
    overall = _score("overall", len(matches), len(fps), len(fns), [abs(p.start_s - t.start_s) for t, p in matches])
    return EventScores(per_kind, overall, matches, fns, fps, tolerance_s)
