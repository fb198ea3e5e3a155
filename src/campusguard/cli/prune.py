"""`campusguard prune`: apply the config's retention now, by hand (the cleanup thread's pass)."""

from __future__ import annotations

from pathlib import Path

import typer

from campusguard.app.infra.private import private_files


def register(app: typer.Typer) -> None:
    @app.command()
    @private_files
    def prune(
        config: Path = typer.Argument(..., help="The watch/serve config file (its storage, outputs and retention)."),
        older_than: str = typer.Option(
            None,
            "--older-than",
            help="Use this duration (45s, 12h, 30d) for every kind instead of the config's; "
            "0s removes every incident ended before now and its media (kept incidents excepted).",
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be deleted; change nothing."),
    ) -> None:
        """Delete incidents, media and log lines past their retention; print what was freed (rows, files, bytes)."""
        from campusguard.app.config import load_config
        from campusguard.app.config.retention import parse_duration
        from campusguard.app.events import open_event_store
        from campusguard.app.events.factory import storage_backend
        from campusguard.app.retention import MediaLayout, PrunableStore, Pruner, RetentionPolicy
        from campusguard.errors import CampusGuardError, InvalidInputError

        loaded = load_config(config)
        cfg = loaded.config
        policy = RetentionPolicy.from_config(cfg)
        if older_than is not None:
            try:
                policy = policy.with_older_than(parse_duration(older_than))
            except ValueError as exc:
                raise InvalidInputError(f"--older-than: {exc}") from None
        try:
            store = open_event_store(cfg.storage)
        except CampusGuardError as exc:
            raise loaded.error(("storage", storage_backend(cfg.storage)), str(exc)) from None
        try:
            layout = MediaLayout.from_config(cfg, serve_defaults=True)
            pruner = Pruner(
                policy, layout, store if isinstance(store, PrunableStore) else None, [c.id for c in cfg.cameras]
            )
            plan = pruner.plan()
            report = plan.report() if dry_run else pruner.apply(plan, vacuum=True)
        finally:
            store.close()
        for line in report.lines_of_text():
            typer.echo(line)
