"""`campusguard report CONFIG`: the shift handover report, or the incident report of given incidents (PDF or HTML)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer

from campusguard.errors import InvalidInputError


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        config: Path = typer.Argument(..., help="The watch/serve config file."),
        out: Path = typer.Option(..., "--out", help="The report to write: .pdf (the `reports` extra) or .html."),
        since: str = typer.Option("8h", "--since", help="Shift start: ISO time or a duration ago (8h)."),
        until: str | None = typer.Option(None, "--until", help="Shift end: ISO time or a duration ago (default: now)."),
        event: list[str] = typer.Option(
            [], "--event", help="Instead of the shift: the incident report of these incidents."
        ),
        users_db: Path | None = typer.Option(
            None,
            "--users-db",
            help="Users database with the audit log (default: serve's; with a PostgreSQL storage, the site's).",
        ),
    ) -> None:
        """The shift handover report (counts by kind, camera and hour with charts, open and kept incidents,
        who acknowledged what), or with --event the incident report (snapshot with its zone, timeline,
        notes, checklist, media hashes)."""
        from campusguard.app.evidence.case import CaseSource
        from campusguard.app.evidence.report import (
            incident_report_html,
            incident_report_pdf,
            shift_report,
            write_report,
        )
        from campusguard.cli.events import parse_since
        from campusguard.cli.evidence import users_audit

        if out.suffix.lower() not in (".pdf", ".html", ".htm"):
            raise InvalidInputError(f"--out {out}: a report is written as .pdf or .html")
        users = users_audit(users_db, config)
        source = CaseSource.from_config(config, audit=None if users is None else users.audit_about)
        try:
            if event:
                cases = source.incidents(source.select(event))
                write_report(
                    out,
                    html=lambda: incident_report_html(source, cases),
                    pdf=lambda p: incident_report_pdf(source, cases, p),
                )
                typer.echo(f"incident report of {len(cases)} incident(s) written to {out}")
                return
            lo = parse_since(since)
            hi = datetime.now(UTC) if until is None else parse_since(until)
            if hi <= lo:
                raise InvalidInputError(f"--until {until} is not after --since {since}")
            shift = shift_report(source, lo, hi)
            write_report(out, html=shift.html, pdf=shift.pdf)
            typer.echo(f"shift report of {len(shift.incidents)} incident(s) from {lo:%Y-%m-%d %H:%M} written to {out}")
        finally:
            source.close()
            if users is not None:
                users.close()
