"""`campusguard replay`: what a changed config's rules would have raised over the stored tracks."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from campusguard.errors import InvalidInputError


def parse_moment(text: str, option: str, now: datetime | None = None) -> datetime:
    """A point in time: a duration before now (``7d``, ``12h``, ``30m``) or an ISO 8601 time (naive = local).

    Raises:
        InvalidInputError: neither, naming ``option``.
    """
    from campusguard.app.config.retention import parse_duration

    now = now or datetime.now(UTC)
    try:
        return now - timedelta(seconds=parse_duration(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{option}: {text!r} is neither a duration (7d, 12h, 30m) nor a time (2026-12-01T08:00)"
        ) from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        config: Path = typer.Argument(..., help="A watch/serve config: its rules and zones (changed or new) are replayed."),
        since: str = typer.Option("7d", "--since", help="Start of the period: a duration before now (7d, 12h) or a time."),
        until: str = typer.Option(None, "--until", help="End of the period (default: now): a duration before now or a time."),
        camera: list[str] = typer.Option(None, "--camera", help="Only this camera (repeat for several)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object: incidents, gone, comparison."),
    ) -> None:
        """Run CONFIG's rules over the stored tracks and compare with the stored incidents and their outcomes."""
        import time

        from campusguard.app.config import load_config
        from campusguard.app.tracks.replay import run_replay

        t0 = time.perf_counter()
        loaded = load_config(config)
        start = parse_moment(since, "--since")
        end = None if until is None else parse_moment(until, "--until")
        if end is not None and end <= start:
            raise InvalidInputError("--until must be after --since")

        def note(line: str) -> None:
            print(f"replay: {line}", file=sys.stderr)

        result = run_replay(loaded, since=start, until=end, cameras=set(camera) if camera else None, note=note)
        elapsed = time.perf_counter() - t0
        if as_json:
            data = result.to_dict()
            data["seconds"] = round(elapsed, 3)
            typer.echo(json.dumps(data))
            return
        for inc in result.incidents:
            end_s = "" if inc.end_s is None or inc.end_s == inc.start_s else f"..{inc.end_s:.2f}"
            status = "kept" if inc.stored_id else "new"
            typer.echo(
                f"[{status}] {inc.camera_id} {inc.rule_name}({inc.rule_kind}) zone={inc.zone} "
                f"t={inc.start_s:.2f}{end_s}s ids={list(inc.tracker_ids)}"
            )
        for r in result.comparison.gone:
            ev = r.event
            typer.echo(
                f"[gone] {ev.camera_id} {ev.rule_name}({ev.rule_kind}) zone={ev.zone} t={ev.start_s:.2f}s "
                f"ids={list(ev.tracker_ids)} outcome={r.outcome or 'none'} id={ev.event_id}"
            )
        typer.echo(
            f"replay: {result.segments} segment(s), {result.frames} frames, {result.stream_seconds:.0f} stream s "
            f"in {elapsed:.2f} s; {result.comparison.summary()}"
        )
