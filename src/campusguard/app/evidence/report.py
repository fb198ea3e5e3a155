"""Incident and shift reports, as self-contained HTML and as PDF (ReportLab).

- the incident report: per incident its snapshot with the rule's zone or line drawn on the frame,
  its timeline, notes, checklist and the SHA-256 of its media (`incident_report_html`,
  `incident_report_pdf`); a bundle holds its HTML as ``report.html``;
- the shift report (`shift_report`): the incidents of a period, counted by kind, camera and hour
  (charts drawn with matplotlib), the open and kept ones, and who acknowledged and resolved what.

PDF: ReportLab (the ``reports`` extra) rather than WeasyPrint: ReportLab is a wheel with no system
libraries, where WeasyPrint needs Pango, HarfBuzz and fontconfig from the OS (a burden on an edge
box and on Windows); the reports are tables, images and charts, which ReportLab's layout covers.
"""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from campusguard.app.evidence.case import CaseSource, IncidentCase, sha256_file
from campusguard.errors import MissingDependencyError

__all__ = [
    "ShiftReport",
    "annotated_snapshot_jpeg",
    "incident_report_html",
    "incident_report_pdf",
    "shift_report",
    "write_report",
]


def annotated_snapshot_jpeg(source: CaseSource, case: IncidentCase, max_width: int = 960) -> bytes | None:
    """The incident's snapshot with its rule's zone (red) or line drawn on it, as JPEG; ``None`` without one."""
    import cv2
    import numpy as np

    from campusguard.app.media.annotate import draw_overlay
    from campusguard.detections import Detections
    from campusguard.zones.polygon import to_pixels

    if case.snapshot is None:
        return None
    image = cv2.imread(str(case.snapshot))
    if image is None:
        return None
    h, w = image.shape[:2]
    ev = case.record.event
    cam = next((c for c in source.loaded.config.cameras if c.id == ev.camera_id), None)
    zones: list[tuple[str, np.ndarray]] = []
    lines: list[tuple[str, np.ndarray]] = []
    if cam is not None:
        for z in cam.zones:
            if z.name == ev.zone:
                zones.append((z.name, to_pixels(np.asarray(z.polygon, float), (w, h), z.units, z.name)))
        for ln in cam.lines:
            if ln.name == ev.zone:
                lines.append((ln.name, to_pixels(np.asarray(ln.points, float), (w, h), ln.units, ln.name)))
    draw_overlay(image, Detections.empty(), {}, zones=zones, lines=lines, alert_zones=[ev.zone], header=ev.rule_name)
    if w > max_width:
        image = cv2.resize(image, (max_width, round(h * max_width / w)), interpolation=cv2.INTER_AREA)
    ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 85])
    return jpeg.tobytes() if ok else None


def _media_hashes(case: IncidentCase, hashes: dict[str, str] | None) -> list[tuple[str, str]]:
    out = []
    for kind, path, name in (("snapshot", case.snapshot, "snapshot.jpg"), ("clip", case.clip, "clip.mp4")):
        if path is None:
            continue
        known = (hashes or {}).get(f"incidents/{case.event_id}/{name}")
        out.append((kind, known or sha256_file(path)[0]))
    for rec in case.recordings:
        out.append((f"recording {rec.name}", (hashes or {}).get(f"recordings/{rec.name}") or sha256_file(rec)[0]))
    return out


def _facts(case: IncidentCase) -> list[tuple[str, str]]:
    d = case.record.to_dict()
    return [
        ("Incident", d["id"]),
        ("Camera", d["camera"]),
        ("Rule", f"{d['rule']} ({d['kind']}, {d['zone']})"),
        ("State", d["state"] + (", kept (legal hold)" if d["kept"] else "")),
        ("Started", str(d["started_at"])),
        ("Ended", str(d["ended_at"] or "still open")),
        ("Objects", ", ".join(d["class_names"]) or "-"),
        ("Outcome", _outcome_text(d)),
        ("Note", d["note"] or "-"),
    ]


def _outcome_text(d: dict[str, Any]) -> str:
    """``false_alarm (otto, 2026-...)`` or ``-``: what the operator who resolved it found."""
    if not d.get("outcome"):
        return "-"
    return f"{d['outcome']} ({d.get('outcome_by') or '?'}, {d.get('outcome_at') or '?'})"


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#111}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top;font-size:.9em}
img{max-width:100%}code{font-size:.85em;word-break:break-all}section{page-break-after:always}
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    h = "".join(f"<th>{_esc(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def _img(jpeg_or_png: bytes, mime: str, alt: str) -> str:
    return f'<img alt="{_esc(alt)}" src="data:{mime};base64,{base64.b64encode(jpeg_or_png).decode()}">'


def _checklist_rows(case: IncidentCase) -> list[list[str]]:
    return [
        ["[x]" if s["checked"] else "[ ]", s["step"], s["by"] or "", s["at"] or ""]
        for s in case.checklist.to_dict()["steps"]
    ]


def incident_report_html(
    source: CaseSource, incidents: Sequence[IncidentCase], *, hashes: dict[str, str] | None = None
) -> str:
    """The incident report of ``incidents`` as one self-contained HTML page (images inline)."""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Incident report</title><style>{_CSS}</style></head><body>"
    ]
    parts.append(f"<h1>Incident report: {len(incidents)} incident(s)</h1>")
    for case in incidents:
        parts.append(f"<section><h2>Incident {_esc(case.event_id)}</h2>")
        parts.append(_table(["", ""], _facts(case)))
        jpeg = annotated_snapshot_jpeg(source, case)
        if jpeg is not None:
            parts.append(_img(jpeg, "image/jpeg", f"snapshot of {case.event_id} with its zone"))
        parts.append(
            "<h3>Timeline</h3>"
            + _table(
                ["time (UTC)", "what", "by", "detail"],
                [[r["at"], r["what"], r["by"], r["detail"]] for r in case.history()],
            )
        )
        if case.checklist.total or case.checklist.marks:
            parts.append(f"<h3>Checklist: {case.checklist.done} of {case.checklist.total} steps</h3>")
            parts.append(_table(["", "step", "by", "at"], _checklist_rows(case)))
        parts.append(
            "<h3>Media (SHA-256)</h3>"
            + _table(["file", "sha256"], [[k, f"{v}"] for k, v in _media_hashes(case, hashes)])
        )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# PDF ---------------------------------------------------------------------------------------------
def _reportlab() -> Any:
    try:
        import reportlab  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "PDF reports need ReportLab; install it with: pip install 'campusguard[reports]'"
        ) from None
    from reportlab import platypus
    from reportlab.lib import colors, pagesizes, styles, units

    return colors, pagesizes, styles, units, platypus


class _Pdf:
    """A ReportLab story with the few styles the reports use."""

    def __init__(self) -> None:
        self.colors, self.pagesizes, styles, self.units, self.pl = _reportlab()
        sheet = styles.getSampleStyleSheet()
        self.h1, self.h2, self.h3, self.body = (
            sheet["Heading1"],
            sheet["Heading2"],
            sheet["Heading3"],
            sheet["BodyText"],
        )
        self.small = styles.ParagraphStyle("small", parent=self.body, fontSize=7.5, leading=9, wordWrap="CJK")
        self.story: list[Any] = []
        self.width = self.pagesizes.A4[0] - 2 * 15 * self.units.mm

    def text(self, value: Any, style: Any = None) -> Any:
        return self.pl.Paragraph(_esc(value), style or self.small)

    def add(self, value: Any, style: Any) -> None:
        self.story.append(self.text(value, style))

    def table(self, head: Sequence[str] | None, rows: Sequence[Sequence[Any]], widths: Sequence[float]) -> None:
        data = ([[self.text(c) for c in head]] if head else []) + [[self.text(c) for c in r] for r in rows]
        if not data:
            return
        t = self.pl.Table(data, colWidths=[w * self.width for w in widths], repeatRows=1 if head else 0)
        style = [("GRID", (0, 0), (-1, -1), 0.4, self.colors.grey), ("VALIGN", (0, 0), (-1, -1), "TOP")]
        if head:
            style.append(("BACKGROUND", (0, 0), (-1, 0), self.colors.lightgrey))
        t.setStyle(self.pl.TableStyle(style))
        self.story.append(t)
        self.story.append(self.pl.Spacer(1, 6))

    def image(self, data: bytes, width_px: int, height_px: int) -> None:
        w = min(self.width, width_px * 0.75)
        self.story.append(self.pl.Image(io.BytesIO(data), width=w, height=w * height_px / max(1, width_px)))

    def write(self, out: Path, title: str) -> None:
        mm = self.units.mm
        doc = self.pl.SimpleDocTemplate(
            str(out),
            pagesize=self.pagesizes.A4,
            leftMargin=15 * mm,
            rightMargin=15 * mm,
            topMargin=15 * mm,
            bottomMargin=15 * mm,
            title=title,
            author="CampusGuard",
        )
        doc.build(self.story)


def _image_size(data: bytes) -> tuple[int, int]:
    import cv2
    import numpy as np

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    return (int(image.shape[1]), int(image.shape[0])) if image is not None else (640, 360)


def _incident_pdf(pdf: _Pdf, source: CaseSource, case: IncidentCase, hashes: dict[str, str] | None) -> None:
    pdf.add(f"Incident {case.event_id}", pdf.h2)
    pdf.table(None, _facts(case), (0.2, 0.8))
    jpeg = annotated_snapshot_jpeg(source, case)
    if jpeg is not None:
        pdf.image(jpeg, *_image_size(jpeg))
    pdf.add("Timeline", pdf.h3)
    pdf.table(
        ["time (UTC)", "what", "by", "detail"],
        [[r["at"], r["what"], r["by"], r["detail"]] for r in case.history()],
        (0.3, 0.15, 0.15, 0.4),
    )
    if case.checklist.total or case.checklist.marks:
        pdf.add(f"Checklist: {case.checklist.done} of {case.checklist.total} steps", pdf.h3)
        pdf.table(["", "step", "by", "at"], _checklist_rows(case), (0.06, 0.5, 0.14, 0.3))
    pdf.add("Media (SHA-256)", pdf.h3)
    pdf.table(["file", "sha256"], _media_hashes(case, hashes), (0.25, 0.75))


def incident_report_pdf(source: CaseSource, incidents: Sequence[IncidentCase], out: Path) -> None:
    """The incident report as a PDF file (one incident after another)."""
    pdf = _Pdf()
    pdf.add(f"Incident report: {len(incidents)} incident(s)", pdf.h1)
    for i, case in enumerate(incidents):
        if i:
            pdf.story.append(pdf.pl.PageBreak())
        _incident_pdf(pdf, source, case, None)
    pdf.write(out, "CampusGuard incident report")


# shift report ------------------------------------------------------------------------------------
@dataclass
class ShiftReport:
    """The incidents of a period and what was done about them."""

    since: datetime
    until: datetime
    incidents: list[IncidentCase]
    by_kind: Counter[str] = field(default_factory=Counter)
    by_camera: Counter[str] = field(default_factory=Counter)
    by_hour: Counter[str] = field(default_factory=Counter)
    by_outcome: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        for case in self.incidents:
            d = case.record.to_dict()
            self.by_outcome[d.get("outcome") or "none"] += 1
            self.by_kind[d["kind"]] += 1
            self.by_camera[d["camera"]] += 1
            started = datetime.fromisoformat(d["started_at"]).astimezone(self.since.tzinfo)
            self.by_hour[started.strftime("%m-%d %H:00")] += 1

    def open_ones(self) -> list[IncidentCase]:
        return [c for c in self.incidents if c.record.state != "resolved"]

    def kept_ones(self) -> list[IncidentCase]:
        return [c for c in self.incidents if c.record.kept]

    def who_did_what(self) -> list[list[str]]:
        """``[user, action, incident, at]`` rows: every acknowledge and resolve of the period's incidents."""
        rows = []
        for c in self.incidents:
            r = c.record
            if r.acknowledged_by:
                rows.append([r.acknowledged_by, "acknowledged", c.event_id, r.acknowledged_at or ""])
            if r.resolved_by:
                rows.append([r.resolved_by, "resolved", c.event_id, r.resolved_at or ""])
        return sorted(rows)

    def chart_png(self) -> bytes:
        """Bar charts of the counts by kind, camera and hour, one PNG (matplotlib, Agg)."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 3.2), dpi=110)
        for ax, (title, counts) in zip(
            fig.subplots(1, 3),
            (("by kind", self.by_kind), ("by camera", self.by_camera), ("by hour", self.by_hour)),
            strict=True,
        ):
            keys = sorted(counts) if title == "by hour" else [k for k, _ in counts.most_common(12)]
            ax.bar(range(len(keys)), [counts[k] for k in keys], color="#3b6fb6")
            ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right", fontsize=7)
            ax.set_title(f"Incidents {title}", fontsize=9)
            ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()

    def _rows(self, cases: Sequence[IncidentCase]) -> list[list[str]]:
        rows = []
        for c in cases:
            d = c.record.to_dict()
            rows.append(
                [
                    d["id"],
                    d["started_at"],
                    d["camera"],
                    d["rule"],
                    d["state"] + (" kept" if d["kept"] else ""),
                    d.get("outcome") or "-",
                    c.checklist.summary() or "-",
                ]
            )
        return rows

    _HEAD = ("incident", "started (UTC)", "camera", "rule", "state", "outcome", "checklist")
    _WIDTHS = (0.3, 0.17, 0.09, 0.16, 0.09, 0.1, 0.09)

    def html(self) -> str:
        p = [
            f"<!doctype html><html><head><meta charset='utf-8'><title>Shift report</title><style>{_CSS}</style></head><body>"
        ]
        p.append(
            f"<h1>Shift report {_esc(self.since.isoformat(timespec='minutes'))} to {_esc(self.until.isoformat(timespec='minutes'))}</h1>"
        )
        p.append(
            f"<p>{len(self.incidents)} incident(s); {len(self.open_ones())} not resolved; {len(self.kept_ones())} kept.</p>"
        )
        p.append(_img(self.chart_png(), "image/png", "incidents by kind, camera and hour"))
        for title, rows in (
            ("Counts by kind", self.by_kind),
            ("Counts by camera", self.by_camera),
            ("Outcomes (what the operators found)", self.by_outcome),
        ):
            p.append(f"<h2>{title}</h2>" + _table(["", "incidents"], sorted(rows.items())))
        p.append("<h2>Not resolved</h2>" + _table(self._HEAD, self._rows(self.open_ones())))
        p.append("<h2>Kept (legal hold)</h2>" + _table(self._HEAD, self._rows(self.kept_ones())))
        p.append(
            "<h2>Who acknowledged and resolved what</h2>"
            + _table(["user", "action", "incident", "at"], self.who_did_what())
        )
        p.append("<h2>Every incident of the period</h2>" + _table(self._HEAD, self._rows(self.incidents)))
        p.append("</body></html>")
        return "\n".join(p)

    def pdf(self, out: Path) -> None:
        pdf = _Pdf()
        pdf.add(
            f"Shift report {self.since.isoformat(timespec='minutes')} to {self.until.isoformat(timespec='minutes')}",
            pdf.h1,
        )
        pdf.add(
            f"{len(self.incidents)} incident(s); {len(self.open_ones())} not resolved; {len(self.kept_ones())} kept.",
            pdf.body,
        )
        chart = self.chart_png()
        pdf.image(chart, *_image_size(chart))
        for title, counts in (
            ("Counts by kind", self.by_kind),
            ("Counts by camera", self.by_camera),
            ("Outcomes (what the operators found)", self.by_outcome),
        ):
            pdf.add(title, pdf.h2)
            pdf.table(["", "incidents"], sorted(counts.items()), (0.5, 0.2))
        pdf.add("Not resolved", pdf.h2)
        pdf.table(self._HEAD, self._rows(self.open_ones()), self._WIDTHS)
        pdf.add("Kept (legal hold)", pdf.h2)
        pdf.table(self._HEAD, self._rows(self.kept_ones()), self._WIDTHS)
        pdf.add("Who acknowledged and resolved what", pdf.h2)
        pdf.table(["user", "action", "incident", "at"], self.who_did_what(), (0.15, 0.15, 0.4, 0.3))
        pdf.add("Every incident of the period", pdf.h2)
        pdf.table(self._HEAD, self._rows(self.incidents), self._WIDTHS)
        pdf.write(out, "CampusGuard shift report")


def shift_report(source: CaseSource, since: datetime, until: datetime) -> ShiftReport:
    """The shift report of incidents started in ``[since, until)``."""
    records = source.select(since=since, until=until)
    return ShiftReport(since, until, source.incidents(records))


def write_report(out: Path, *, html: Callable[[], str], pdf: Callable[[Path], None]) -> None:
    """Write ``html()`` to an ``.html`` ``out``, or call ``pdf(out)`` for a ``.pdf`` one.

    Raises:
        InvalidInputError: ``out`` ends in neither.
    """
    from campusguard.errors import InvalidInputError

    suffix = out.suffix.lower()
    if suffix not in (".pdf", ".html", ".htm"):
        raise InvalidInputError(f"--out {out}: a report is written as .pdf or .html")
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".pdf":
        pdf(out)
    else:
        out.write_text(html(), encoding="utf-8")
