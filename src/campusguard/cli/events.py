"""`campusguard events` (query the event store) and `campusguard eval-events` (score incidents)."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from campusguard.errors import InvalidInputError

DEFAULT_DB = "campusguard-events.db"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since`` as an aware datetime: ISO 8601 (naive = local time) or a duration ago (``30m``, ``2h``, ``1d``).

    Raises:
        InvalidInputError: neither form, naming the value.
    """
    now = now or datetime.now(UTC)
    m = _DURATION.match(text.strip())
    if m:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        return now - timedelta(seconds=seconds)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise InvalidInputError(
            f"--since {text!r} is neither an ISO date/time (2026-01-31T22:00) nor a duration (30m, 2h, 1d)"
        ) from exc
    return value if value.tzinfo is not None else value.astimezone()


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _note_spool(path: Path) -> None:
    """Say on stderr when a spool holds event updates the store does not have yet."""
    from campusguard.app.events.spool import EventSpool

    spool = EventSpool(path)
    if spool.exists():
        n = len(spool.read())
        typer.echo(
            f"note: {n} event update(s) in the spool {path} are not in the store yet (it was unavailable when "
            "CampusGuard stopped); `campusguard watch` or `serve` replays them at start",
            err=True,
        )


def register(app: typer.Typer) -> None:
    from campusguard.app.rules.registry import RULES  # the kinds for --kind's help and check

    @app.command()
    def events(
        db: str = typer.Option(
            DEFAULT_DB, "--db", help="SQLite event database written by `watch`, or a postgresql:// URL."
        ),
        camera: str = typer.Option(None, "--camera", help="Only this camera id."),
        since: str = typer.Option(
            None, "--since", help="Only events from this time: ISO date/time or 30m, 2h, 1d ago."
        ),
        rule: str = typer.Option(None, "--rule", help="Only this rule name."),
        kind: str = typer.Option(None, "--kind", help=f"Only this rule kind: {RULES.kinds_text()}."),
        limit: int = typer.Option(None, "--limit", min=1, help="At most this many events."),
        fmt: str = typer.Option("table", "--format", help="table or json."),
        spool: Path = typer.Option(
            None,
            "--spool",
            help="Event spool to check for updates not in the store yet (default: storage.spool's default "
            f"beside the SQLite file, or beside {DEFAULT_DB} for a PostgreSQL URL).",
        ),
    ) -> None:
        """List incidents from the event store, oldest first."""
        from campusguard.app.config import StorageConfig
        from campusguard.app.events import open_event_store
        from campusguard.app.events.urls import is_postgres_url, redact_url

        if fmt not in ("table", "json"):
            raise InvalidInputError(f"--format must be 'table' or 'json', got {fmt!r}")
        if kind is not None:
            RULES.check_kind(kind)  # UnknownRuleKindError names the kinds there are
        since_dt = None if since is None else parse_since(since)
        store = open_event_store(db, read_only=True)
        try:
            found = store.query(camera_id=camera, since=since_dt, rule=rule, kind=kind, limit=limit)
        finally:
            store.close()
        spool = spool or StorageConfig(sqlite=DEFAULT_DB if is_postgres_url(db) else db).spool_path()
        if fmt == "json":
            typer.echo(json.dumps([e.to_dict() for e in found], indent=2, default=str))
            _note_spool(spool)
            return
        table = Table(title=f"{len(found)} events in {redact_url(db)}")
        for col in (
            "started (UTC)",
            "camera",
            "rule",
            "kind",
            "zone",
            "start s",
            "end s",
            "ids",
            "classes",
            "event id",
        ):
            table.add_column(col)
        for e in found:
            started = "-" if e.started_at is None else e.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
            classes = ",".join(e.class_names) or ",".join(map(str, e.class_ids))
            table.add_row(
                started,
                e.camera_id,
                e.rule_name,
                e.rule_kind,
                e.zone,
                _fmt(e.start_s),
                "open" if e.end_s is None else _fmt(e.end_s),
                ",".join(map(str, e.tracker_ids)),
                classes,
                e.event_id[:8],
            )
        Console(width=200).print(table)
        _note_spool(spool)

    @app.command("eval-events")
    def eval_events(
        truth: list[Path] = typer.Option(..., "--truth", help="Ground-truth JSON (repeat for several cameras)."),
        events_path: Path = typer.Option(..., "--events", help="SQLite event database or JSON-lines file of events."),
        camera: str = typer.Option(None, "--camera", help="Score only this camera."),
        tolerance: float = typer.Option(2.0, "--tolerance", help="Seconds of slack when matching intervals."),
        as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
    ) -> None:
        """Precision, recall and F1 of detected incidents against ground truth, and the start-time error."""
        from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth_file
        from campusguard.app.events import read_events

        gt = []
        owner: dict[str, Path] = {}
        for path in truth:
            camera_id, incidents = load_truth_file(path)
            if camera_id in owner:
                raise InvalidInputError(
                    f"ground-truth files {owner[camera_id]} and {path} both describe camera {camera_id!r}; "
                    "give one truth file per camera"
                )
            owner[camera_id] = path
            gt += incidents
        predicted = incidents_from_events(read_events(events_path))
        scores = evaluate_events(gt, predicted, tolerance_s=tolerance, camera_id=camera)
        if as_json:
            typer.echo(json.dumps(scores.to_dict(), indent=2))
            return
        table = Table(title=f"incidents vs ground truth (tolerance {tolerance:g} s)")
        for col in (
            "kind",
            "truth",
            "found",
            "TP",
            "FP",
            "FN",
            "precision",
            "recall",
            "F1",
            "start err mean s",
            "median s",
        ):
            table.add_column(col, justify="left" if col == "kind" else "right")
        for s in [*scores.per_kind.values(), scores.overall]:
            table.add_row(
                s.kind,
                str(s.tp + s.fn),
                str(s.tp + s.fp),
                str(s.tp),
                str(s.fp),
                str(s.fn),
                f"{s.precision:.3f}",
                f"{s.recall:.3f}",
                f"{s.f1:.3f}",
                _fmt(s.start_error_mean_s),
                _fmt(s.start_error_median_s),
            )
        Console(width=160).print(table)
