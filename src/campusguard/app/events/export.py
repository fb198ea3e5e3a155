"""The CSV export of incidents (the console's ``GET /api/v1/events.csv``): one row per incident, text a
spreadsheet would run as a formula defused."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from campusguard.app.events.records import EventRecord

__all__ = ["CSV_FIELDS", "csv_lines", "write_csv"]


CSV_FIELDS: tuple[str, ...] = (
    "id",
    "camera",
    "rule",
    "kind",
    "zone",
    "state",
    "started_at",
    "ended_at",
    "start_s",
    "end_s",
    "tracker_ids",
    "class_names",
    "count",
    "direction",
    "acknowledged_by",
    "acknowledged_at",
    "resolved_by",
    "resolved_at",
    "note",
    "outcome",
)
_SPREADSHEET_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> str:
    """One CSV cell; text a spreadsheet would run as a formula is prefixed with a quote."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        value = " ".join(map(str, value))
    text = str(value)
    if isinstance(value, str) and text.startswith(_SPREADSHEET_FORMULA):
        return "'" + text
    return text


def csv_lines(records: Iterable[EventRecord]) -> Iterator[str]:
    """The CSV export of incidents, one line at a time (header first; `CSV_FIELDS` columns)."""

    class _Line:
        value = ""

        def write(self, text: str) -> None:
            self.value = text

    line = _Line()
    writer = csv.writer(line)
    writer.writerow(CSV_FIELDS)
    yield line.value
    for record in records:
        data = record.to_dict()
        writer.writerow([_csv_cell(data[k]) for k in CSV_FIELDS])
        yield line.value


def write_csv(records: Iterable[EventRecord], fh: TextIO) -> None:
    """Write the CSV export of incidents to an open text file."""
    for line in csv_lines(records):
        fh.write(line)
