"""`campusguard synth`: write the deterministic synthetic campus data set."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from campusguard.errors import InvalidInputError

__all__ = ["register", "parse_size_wh", "parse_lighting_weights"]


def parse_size_wh(text: str, option: str = "--video-size") -> tuple[int, int]:
    """Parse ``"640x360"`` into ``(640, 360)``; raise `InvalidInputError` naming ``option``."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise InvalidInputError(f"{option} must look like WIDTHxHEIGHT (e.g. 640x360), got {text!r}")
    return int(parts[0]), int(parts[1])


def parse_lighting_weights(text: str, option: str = "--lighting") -> tuple[float, ...]:
    """Parse ``"day=1,night=3"`` into weights in `LIGHTINGS` order (lightings not named weigh 0);
    raise `InvalidInputError` naming ``option``."""
    from campusguard.data.synth.lighting import LIGHTINGS

    names = [li.name for li in LIGHTINGS]
    weights = dict.fromkeys(names, 0.0)
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in weights:
            raise InvalidInputError(
                f"{option} must look like NAME=WEIGHT,... with NAME one of {', '.join(names)}, got {text!r}"
            )
        try:
            weights[name] = float(value)
        except ValueError:
            raise InvalidInputError(f"{option}: weight of {name!r} must be a number, got {value.strip()!r}") from None
    return tuple(weights[n] for n in names)


def synth(
    out: Path = typer.Option(
        ..., "--out", help="Output folder (created; existing files with the same names are replaced)."
    ),
    images: int = typer.Option(1000, "--images", help="Number of still images (train + val)."),
    videos: int = typer.Option(0, "--videos", help="Number of videos with ground-truth JSON."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same bytes."),
    imgsz: int = typer.Option(640, "--imgsz", help="Side of the square still images in pixels."),
    video_size: str = typer.Option("640x360", "--video-size", help="Video frame size WIDTHxHEIGHT."),
    video_seconds: float = typer.Option(40.0, "--video-seconds", help="Length of each video in seconds."),
    fps: int = typer.Option(10, "--fps", help="Video frame rate."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Fraction of the images in the val split."),
    lying_fraction: float | None = typer.Option(
        None,
        "--lying-fraction",
        help="Share of people drawn lying on the ground in the still images (0..1; default: the generator's, "
        "campusguard.data.synth.images.ImageParams).",
    ),
    lighting: str | None = typer.Option(
        None,
        "--lighting",
        help="Relative weights of the still images' lightings, e.g. day=1,overcast=2,dusk=1,night=3 "
        "(lightings not named: 0; default day=0.4,overcast=0.25,dusk=0.15,night=0.2).",
    ),
    view_effect: list[str] = typer.Option(
        [],
        "--view-effect",
        help="Something that happens to every video's view, KIND:START-END[:knob=value,...] in seconds, repeatable: "
        "the camera-health problems cover, defocus (sigma), turn (angle_deg, zoom, shift_px) and freeze, in the truth "
        "as camera_health incidents, and the harmless dusk (level), flash (level), shade (area) and shake (shift_px). "
        "E.g. --view-effect cover:40-80 --view-effect defocus:110-170:sigma=5.",
    ),
) -> None:
    """Render synthetic campus images (YOLO format, data.yaml) and videos with ground truth."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from campusguard.data.synth.dataset import generate_dataset, validate_generate_args
    from campusguard.data.synth.images import ImageParams
    from campusguard.data.synth.view_effects import parse_view_effect

    effects = [parse_view_effect(text) for text in view_effect]
    size_wh = parse_size_wh(video_size)
    validate_generate_args(images, videos, seed, imgsz, size_wh, video_seconds, fps, val_fraction)
    if lying_fraction is not None and not 0.0 <= lying_fraction <= 1.0:
        raise InvalidInputError(f"--lying-fraction must be in [0, 1], got {lying_fraction}")
    knobs: dict[str, object] = {}
    if lying_fraction is not None:
        knobs["lying_fraction"] = lying_fraction
    if lighting is not None:
        knobs["lighting_weights"] = parse_lighting_weights(lighting)
    params = ImageParams(**knobs) if knobs else None  # type: ignore[arg-type]
    t0 = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=False
    ) as bar:
        tasks = {"images": bar.add_task("images", total=images)}
        if videos:
            tasks["videos"] = bar.add_task("videos", total=videos)

        def progress(stage: str, done: int) -> None:
            bar.update(tasks[stage], completed=done)

        summary = generate_dataset(
            out,
            images=images,
            videos=videos,
            seed=seed,
            imgsz=imgsz,
            video_size_wh=size_wh,
            video_seconds=video_seconds,
            fps=fps,
            val_fraction=val_fraction,
            params=params,
            progress=progress,
            view_effects=effects,
        )
    dt = time.perf_counter() - t0
    typer.echo(
        f"wrote {summary.n_train} train + {summary.n_val} val images ({summary.n_objects} objects), "
        f"{len(summary.videos)} videos to {summary.out_dir} in {dt:.1f} s"
    )
    typer.echo(f"data: {summary.data_yaml}")


def register(app: typer.Typer) -> None:
    """Add the ``synth`` command to the CLI."""
    app.command("synth")(synth)
