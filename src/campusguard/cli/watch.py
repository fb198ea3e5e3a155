"""`campusguard watch CONFIG`, `campusguard demo`, and `campusguard config schema|check`."""

from __future__ import annotations

from pathlib import Path

import typer

from campusguard.app.infra.private import private_files
from campusguard.cli.logs import apply_log_level, log_level_option, quiet_decoder_logs, repair_option

config_app = typer.Typer(name="config", help="The watch configuration: JSON Schema and checks.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    @app.command()
    @private_files
    def watch(
        config: Path = typer.Argument(..., help="Watch configuration YAML (see `campusguard config schema`)."),
        seconds: float = typer.Option(
            None,
            "--seconds",
            min=0,
            help="Stop after this many seconds (default: run until the sources end or Ctrl-C).",
        ),
        log_level: str | None = log_level_option(),
        ray: str | None = typer.Option(
            None,
            "--ray",
            metavar="auto|ADDRESS",
            help="Run camera groups on Ray actors of this cluster (auto: the one on this machine); "
            "see the config's cluster section. Needs the ray extra.",
        ),
        repair: bool = repair_option(),
    ) -> None:
        """Watch camera streams: detect, track, apply the zone rules, store and report incidents."""
        from campusguard.app.config import load_config
        from campusguard.app.engine.wiring import check_storage_files
        from campusguard.app.event_side import EventSide
        from campusguard.app.model_warning import warn_for_config
        from campusguard.app.service import WatchService
        from campusguard.app.signals import StoppableService, run_until_stopped

        apply_log_level(log_level)
        quiet_decoder_logs()  # a camera's outage is logged by the app, once when it starts and once when it ends
        loaded = load_config(config)
        check_storage_files(loaded, repair=repair)  # an empty or damaged store: one line, exit 2
        warn_for_config(loaded.config)
        service: StoppableService
        if ray is None:
            service = WatchService(loaded, events=EventSide.owned(loaded))
        else:
            from campusguard.app.cluster.ray_executor import ray_watch

            service = ray_watch(loaded, ray)
        if not run_until_stopped(service, seconds, stop_timeout_s=loaded.config.service.stop_timeout_s):
            raise typer.Exit(1)

    @app.command()
    def demo(
        seed: int = typer.Option(
            0, "--seed", help="Scenario seed: each seed scripts a different campus scene and incidents."
        ),
        out: Path = typer.Option(
            Path("campusguard-demo"), "--out", help="Folder for the video, config, events, annotated video and summary."
        ),
        seconds: float = typer.Option(
            40.0, "--seconds", min=5, max=600, help="Length of the generated video in seconds."
        ),
        model: str = typer.Option(None, "--model", help="Model to use instead of the bundled default."),
        falls: bool = typer.Option(
            False, "--falls", help="Also script people who fall, and watch them with a fall rule."
        ),
        idle_fraction: float = typer.Option(
            0.0,
            "--idle-fraction",
            min=0.0,
            max=0.95,
            help="Share of the video in which nobody is in view and nothing moves (quiet stretches of a campus "
            "day and night), e.g. 0.75; 0 keeps the busy scene.",
        ),
        log_level: str | None = log_level_option(),
        serve: bool = typer.Option(
            False, "--serve", help="Open the operators' console on the video (looped in real time) instead of scoring."
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="With --serve: address to listen on."),
        port: int = typer.Option(8080, "--port", min=1, max=65535, help="With --serve: TCP port."),
    ) -> None:
        """Generate a synthetic campus video with scripted incidents, watch it, and score what was found."""
        from campusguard.app.demo import run_demo

        apply_log_level(log_level)
        if serve:
            from campusguard.app.demo import demo_console_config
            from campusguard.cli.serve import demo_admin, serve_console
            from campusguard.errors import require

            for module in ("fastapi", "uvicorn", "argon2"):  # say what is missing before making the video
                require(module, "console")

            config_path = demo_console_config(seed, out, seconds, model)
            users_db = out / "users.db"
            serve_console(config_path, host=host, port=port, users_db=users_db, banner=demo_admin(users_db))
            return
        result = run_demo(
            seed=seed, out_dir=out, seconds=seconds, model=model, falls=falls, idle_fraction=idle_fraction
        )
        if not result.clean:
            raise typer.Exit(1)

    @config_app.command("schema")
    def schema(
        out: Path = typer.Option(None, "--out", help="Write the schema to this file instead of stdout."),
    ) -> None:
        """Print the JSON Schema of the watch configuration."""
        from campusguard.app.config import config_schema

        text = config_schema()
        if out is None:
            typer.echo(text)
        else:
            out.write_text(text + "\n", encoding="utf-8")

    @config_app.command("check")
    def check(
        config: Path = typer.Argument(..., help="Watch configuration YAML."),
        probe: bool = typer.Option(
            False, "--probe", help="Also open every source and load the models (checks frame size and class names)."
        ),
    ) -> None:
        """Validate a watch configuration; with --probe also the sources, models, zones and classes."""
        from campusguard.app.config import load_config

        loaded = load_config(config)
        cfg = loaded.config
        if probe:
            from campusguard.app.service import WatchService

            WatchService(loaded).check()
        rules = sum(len(c.rules) for c in cfg.cameras)
        typer.echo(
            f"{config}: OK ({len(cfg.cameras)} camera(s), {rules} rule(s), {len(cfg.alerts)} alert sink(s){', sources and models probed' if probe else ''})"
        )

    app.add_typer(config_app)


__all__ = ["register"]
