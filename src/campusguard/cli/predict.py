"""`campusguard predict [MODEL] SOURCE`: detect on images, folders, globs and videos."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from campusguard.backends.registry import DEFAULT_BACKEND, backend_help, choices
from campusguard.errors import InvalidInputError

if TYPE_CHECKING:
    from campusguard.detector import Detector
    from campusguard.io.predict import PredictSummary


def parse_classes(text: str | None) -> list[int] | None:
    """``"0,2,5"`` to ``[0, 2, 5]``; ``None`` stays ``None``."""
    if text is None or text == "":
        return None
    try:
        return [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise InvalidInputError(f"--classes {text!r} must be comma-separated class ids") from None


def register(app: typer.Typer) -> None:
    @app.command()
    def predict(
        args: list[str] = typer.Argument(
            ...,
            metavar="[MODEL] SOURCE",
            help="Optional model (.onnx, .pt, official weights yolov8n..x, yolo11n..x, yolo26n..x, or NAME.yaml for "
            "random weights; default: the bundled model), then an image, folder, glob or video.",
        ),
        out: Path = typer.Option(Path("runs/predict"), "--out", "-o", help="Output folder."),
        conf: float = typer.Option(0.25, help="Confidence threshold 0..1."),
        iou: float = typer.Option(0.7, help="NMS IoU threshold 0..1."),
        imgsz: str = typer.Option(
            None, help="Input size: N or H,W (multiples of 32); default: the model's own (640 if unknown)."
        ),
        classes: str = typer.Option(None, help="Keep only these class ids, e.g. 0,2."),
        max_det: int = typer.Option(300, "--max-det", help="Maximum detections per image."),
        device: str = typer.Option("auto", help="auto, cpu, cuda:N or rocm:N (OpenVINO: auto, cpu, gpu, npu)."),
        backend: str = typer.Option(None, help=f"{choices()} (default {DEFAULT_BACKEND}): {backend_help()}"),
        precision: str = typer.Option(
            None, "--precision", help="The engine's compiled precision (OpenVINO: fp32 or bf16; default: its own)."
        ),
        batch: int = typer.Option(1, help="Frames per inference call."),
        agnostic: bool = typer.Option(False, help="Class-agnostic NMS."),
        head: str = typer.Option(
            None,
            "--head",
            help="end2end or classic: the head a .pt or architecture model runs (YOLO26: end2end by default; "
            "classic gives Ultralytics' default predict boxes).",
        ),
        save_media: bool = typer.Option(
            True, "--save-media/--no-save-media", help="Write annotated images and videos."
        ),
        save_txt: bool = typer.Option(True, "--save-txt/--no-save-txt", help="Write YOLO txt labels."),
    ) -> None:
        """Run detection and write annotated media, predictions.json and YOLO txt labels into --out."""
        if len(args) == 1:
            model, source = None, args[0]
        elif len(args) == 2:
            model, source = args
        else:
            raise InvalidInputError("predict takes [MODEL] SOURCE")
        if batch < 1:
            raise InvalidInputError(f"--batch {batch} must be at least 1")
        from campusguard.detector import Detector
        from campusguard.io.sources import list_media
        from campusguard.models.synthetic_warning import warn_if_synthetic_model_on_real

        files = list_media(source)  # fail early on a missing source
        warn_if_synthetic_model_on_real(model, [source])
        det = Detector(
            model,
            device=device,
            imgsz=imgsz,
            conf=conf,
            iou=iou,
            max_det=max_det,
            classes=parse_classes(classes),
            backend=backend,
            agnostic=agnostic,
            head=head,
            precision=precision,
        )
        typer.echo(det.info.head_line(), err=True)
        summary = _predict_with_progress(det, files, out, batch, save_media, save_txt)
        typer.echo(
            f"{summary.frames} frame(s) from {summary.files} file(s), {summary.detections} detection(s) on "
            f"{det.provider}; mean ms/frame pre {summary.pre_ms:.1f}, infer {summary.infer_ms:.1f}, "
            f"post {summary.post_ms:.1f}; results in {out}"
        )
        if det.random_weights:
            typer.echo(
                "warning: this model has RANDOM weights (architecture only): the boxes are meaningless", err=True
            )
        if summary.failed:
            typer.echo(f"{summary.failed} file(s) failed", err=True)
            raise typer.Exit(1)


def _predict_with_progress(
    det: Detector, files: list[Path], out: Path, batch: int, save_media: bool, save_txt: bool
) -> PredictSummary:
    """`predict_to_files` with a progress bar on a terminal and a ``skipped:`` line per unreadable file."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from campusguard.io.predict import predict_to_files
    from campusguard.io.sources import MediaItem

    with Progress(
        TextColumn("[bold]predict"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeRemainingColumn(),
        transient=not sys.stderr.isatty(),
        disable=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("", total=None)

        def on_item(item: MediaItem) -> None:
            if item.error:
                typer.echo(f"skipped: {item.error}", err=True)
                return
            progress.update(task, description=item.path.name, advance=1)

        return predict_to_files(det, files, out, batch=batch, save_media=save_media, save_txt=save_txt, on_item=on_item)
