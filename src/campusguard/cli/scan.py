"""`campusguard scan SOURCES... --config CONFIG`: recorded footage through the watch pipeline."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import typer

from campusguard.app.infra.private import private_files
from campusguard.cli.logs import apply_log_level, log_level_option, quiet_decoder_logs


def _default_workers() -> int:
    """One worker per CPU this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def register(app: typer.Typer) -> None:
    @app.command()
    @private_files
    def scan(
        sources: list[str] = typer.Argument(
            ..., help="Video files, folders or globs (quote globs: 'archive/**/*.mp4')."
        ),
        config: Path = typer.Option(
            ..., "--config", "-c", help="Watch configuration YAML: detector, camera, store, alerts."
        ),
        camera: str | None = typer.Option(
            None, "--camera", help="Camera section whose zones and rules apply (default: the config's only camera)."
        ),
        workers: int = typer.Option(
            0, "--workers", "-w", min=0, help="Recordings scanned at once, one process each (0: one per CPU)."
        ),
        ray: str | None = typer.Option(
            None, "--ray", help="Run the recordings as Ray tasks: 'auto' (this machine's cluster) or a cluster ADDRESS."
        ),
        detections: Path | None = typer.Option(
            None, "--detections", help="Also write each recording's per-frame detections as Parquet into this folder."
        ),
        state: Path | None = typer.Option(
            None, "--state", help="Scan state file (default: beside the event store, NAME.scan-state.db)."
        ),
        rescan: bool = typer.Option(False, "--rescan", help="Scan every recording again, also those already done."),
        log_level: str | None = log_level_option(),
    ) -> None:
        """Scan recorded footage with a camera's zones and rules; resumable, in parallel, with a progress bar.

        SIGTERM or SIGINT stops it cleanly (exit 0): what finished is committed and sent, the rest is
        scanned by the next run; a second signal exits at once."""
        from campusguard.app.config import load_config
        from campusguard.app.scan import LocalExecutor, RayExecutor, run_scan
        from campusguard.app.scan.executors import UnitExecutor
        from campusguard.app.signals import stop_signals

        apply_log_level(log_level)
        quiet_decoder_logs()  # a broken file is reported on one line by the scan (workers inherit this)
        loaded = load_config(config)
        executor: UnitExecutor = RayExecutor(ray) if ray is not None else LocalExecutor(workers or _default_workers())
        stop = threading.Event()
        with stop_signals(stop.set, "ending the recordings being scanned (they are scanned again next time)"):
            summary = run_scan(
                loaded,
                sources,
                executor,
                camera_id=camera,
                state_path=state,
                detections_dir=detections,
                rescan=rescan,
                warn_synthetic_model=True,
                stop=stop,
            )
        typer.echo(summary.line())
        if not summary.clean:
            raise typer.Exit(1)


__all__ = ["register"]
