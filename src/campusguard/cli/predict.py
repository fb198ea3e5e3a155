"""`campusguard predict [MODEL] SOURCE`: detect on images, folders, globs and videos."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from campusguard.errors import InvalidInputError


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
            help="Optional model (.onnx, .pt, yolov8n..x; default: the bundled model), then an image, folder, glob or video.",
        ),
        out: Path = typer.Option(Path("runs/predict"), "--out", "-o", help="Output folder."),
        conf: float = typer.Option(0.25, help="Confidence threshold 0..1."),
        iou: float = typer.Option(0.7, help="NMS IoU threshold 0..1."),
        imgsz: str = typer.Option(None, help="Input size: N or H,W (multiples of 32); default: the model's own (640 if unknown)."),
        classes: str = typer.Option(None, help="Keep only these class ids, e.g. 0,2."),
        max_det: int = typer.Option(300, "--max-det", help="Maximum detections per image."),
        device: str = typer.Option("auto", help="auto, cpu, cuda:N or rocm:N."),
        backend: str = typer.Option(None, help="onnxruntime (default) or torch."),
        batch: int = typer.Option(1, help="Frames per inference call."),
        agnostic: bool = typer.Option(False, help="Class-agnostic NMS."),
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
        )
        summary = run_predict(det, files, out, batch, save_media, save_txt)
        typer.echo(
            f"{summary['frames']} frame(s) from {summary['files']} file(s), {summary['detections']} detection(s) on "
            f"{det.provider}; mean ms/frame pre {summary['pre_ms']:.1f}, infer {summary['infer_ms']:.1f}, post {summary['post_ms']:.1f}; results in {out}"
        )
        if det.random_weights:
            typer.echo(
                "warning: this model has RANDOM weights (architecture only): the boxes are meaningless", err=True
            )
        if summary["failed"]:
            typer.echo(f"{summary['failed']} file(s) failed", err=True)
            raise typer.Exit(1)


def _batches(items: Iterator, size: int) -> Iterator[list]:
    buf: list = []
    for item in items:
        buf.append(item)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf


def run_predict(det, files: list[Path], out: Path, batch: int, save_media: bool, save_txt: bool) -> dict:  # type: ignore[no-untyped-def]
    """Stream every frame of ``files`` through ``det`` and write results; returns a summary dict."""
    import cv2
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from campusguard.adapters import to_records, to_yolo_txt
    from campusguard.io.draw import draw_detections
    from campusguard.io.sources import iter_media, open_video_writer

    out.mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(exist_ok=True) if save_txt else None
    stats = {
        "files": len(files),
        "frames": 0,
        "detections": 0,
        "failed": 0,
        "pre_ms": 0.0,
        "infer_ms": 0.0,
        "post_ms": 0.0,
    }
    writers: dict[Path, cv2.VideoWriter] = {}
    first = True
    with (
        open(out / "predictions.json", "w") as js,
        Progress(
            TextColumn("[bold]predict"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeRemainingColumn(),
            transient=not sys.stderr.isatty(),
            disable=not sys.stderr.isatty(),
        ) as progress,
    ):
        task = progress.add_task("", total=None)
        js.write("[\n")
        for path in files:
            progress.update(task, description=path.name)
            for chunk in _batches(iter_media(path), batch):
                good = [it for it in chunk if it.frame is not None]
                for it in chunk:
                    if it.error:
                        stats["failed"] += 1
                        typer.echo(f"skipped: {it.error}", err=True)
                if not good:
                    continue
                results = det.predict_batch([it.frame for it in good])
                t = det.timings
                stats["pre_ms"] += t.preprocess_ms
                stats["infer_ms"] += t.inference_ms
                stats["post_ms"] += t.postprocess_ms
                for it, d in zip(good, results, strict=True):
                    stats["frames"] += 1
                    stats["detections"] += len(d)
                    h, w = it.frame.shape[:2]
                    rec = {
                        "file": str(it.path),
                        "frame": it.frame_index,
                        "width": w,
                        "height": h,
                        "detections": to_records(d, det.names),
                    }
                    js.write(("" if first else ",\n") + json.dumps(rec))
                    first = False
                    stem = it.path.stem if not it.is_video else f"{it.path.stem}_{it.frame_index:06d}"
                    if save_txt:
                        (out / "labels" / f"{stem}.txt").write_text(to_yolo_txt(d, (w, h)))
                    if save_media:
                        drawn = draw_detections(it.frame, d, det.names, copy=False)
                        if it.is_video:
                            key = it.path
                            if key not in writers:
                                writers[key] = open_video_writer(out / f"{it.path.stem}.mp4", it.fps or 30.0, (w, h))
                            writers[key].write(drawn)
                        else:
                            cv2.imwrite(str(out / f"{it.path.stem}.jpg"), drawn)
                progress.advance(task, len(good))
            if path in writers:
                writers.pop(path).release()
        js.write("\n]\n")
    for w in writers.values():
        w.release()
    n = max(stats["frames"], 1)
    for k in ("pre_ms", "infer_ms", "post_ms"):
        stats[k] /= n
    return stats
