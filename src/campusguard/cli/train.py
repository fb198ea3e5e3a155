"""`campusguard train` and `campusguard val`: training through Ultralytics, validation through CampusGuard."""

from __future__ import annotations

import json
import os
import sys

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from campusguard.eval.metrics import DetectionMetrics


def metrics_table(metrics: DetectionMetrics, names: dict[int, str], title: str) -> Table:
    """Rich table: one row for all classes, then one per class with ground truth."""
    t = Table(title=title)
    for col in ("class", "images", "instances", "P", "R", "mAP50", "mAP50-95"):
        t.add_column(col, justify="left" if col == "class" else "right")
    t.add_row(
        "all",
        str(metrics.num_images),
        str(metrics.num_instances),
        f"{metrics.precision:.3f}",
        f"{metrics.recall:.3f}",
        f"{metrics.map50:.3f}",
        f"{metrics.map50_95:.3f}",
        style="bold",
    )
    for cid, c in sorted(metrics.per_class.items()):
        t.add_row(
            escape(names.get(cid, str(cid))),
            "",
            str(c.num_instances),
            f"{c.precision:.3f}",
            f"{c.recall:.3f}",
            f"{c.ap50:.3f}",
            f"{c.ap50_95:.3f}",
        )
    return t


# Ultralytics arguments that campusguard train sets itself, and the option that sets each
_OWN_OPTIONS = {
    **{k: f"--{k}" for k in ("data", "epochs", "imgsz", "batch", "device", "workers", "resume", "seed", "cache", "amp", "patience")},
    "project": "--out",
    "name": "--out",
    "nbs": "--accumulate",  # nbs = batch x accumulate
}  # fmt: skip


def parse_settings(settings: list[str]) -> dict[str, object]:
    """``["close_mosaic=2", "lr0=0.0005"]`` -> Ultralytics training arguments (values read as YAML scalars).

    Raises:
        InvalidInputError: not ``KEY=VALUE``, or a key that has its own option here.
    """
    import yaml

    from campusguard.errors import InvalidInputError

    out: dict[str, object] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InvalidInputError(f"--set {item!r} must look like KEY=VALUE (e.g. close_mosaic=2)")
        if key in _OWN_OPTIONS:
            raise InvalidInputError(f"--set {key}: use the {_OWN_OPTIONS[key]} option of campusguard train")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[key] = value
    return out


def register(app: typer.Typer) -> None:
    @app.command()
    def val(
        model: str = typer.Option(None, "--model", "-m", help="Model: .onnx, .pt, or omit for the bundled default."),
        data: str = typer.Option(..., "--data", help="data.yaml of a YOLO-format data set."),
        split: str = typer.Option("val", "--split", help="Split to score (train, val, test)."),
        imgsz: int = typer.Option(
            None, "--imgsz", help="Network input size in pixels (default: the size the model was trained at, else 640)."
        ),
        conf: float = typer.Option(0.001, "--conf", help="Confidence threshold before NMS (Ultralytics val default)."),
        iou: float = typer.Option(0.7, "--iou", help="NMS IoU threshold."),
        max_det: int = typer.Option(300, "--max-det", help="Detections kept per image."),
        device: str = typer.Option("auto", "--device", help="auto, cpu, cuda:N, rocm:N."),
        backend: str = typer.Option(None, "--backend", help="onnxruntime or torch (default: by model file)."),
        batch: int = typer.Option(1, "--batch", help="Images per backend call."),
        half: bool = typer.Option(False, "--half", help="FP16 inference (GPU)."),
        as_json: bool = typer.Option(False, "--json", help="Print metrics as JSON instead of a table."),
    ) -> None:
        """Score a model on a YOLO data set through CampusGuard's own pipeline: mAP50-95, mAP50, per-class AP, P and R (COCO protocol, faster-coco-eval)."""
        from rich.progress import Progress

        from campusguard.eval.validate import validate_model

        with Progress(transient=True, disable=as_json or not sys.stderr.isatty()) as bar:
            task = bar.add_task("val", total=None)
            result = validate_model(
                model,
                data,
                split=split,
                imgsz=imgsz,
                conf=conf,
                iou=iou,
                max_det=max_det,
                device=device,
                backend=backend,
                batch=batch,
                half=half,
                progress=lambda n, total: bar.update(task, completed=n, total=total),
            )
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "model": result.model,
                        "provider": result.provider,
                        "imgsz": result.imgsz,
                        **result.metrics.to_dict(),
                    },
                    indent=2,
                )
            )
            return
        ms = 1000 * result.seconds / max(len(result.dataset), 1)
        title = f"{result.model} on {result.dataset.data_yaml} [{split}], {result.provider}, imgsz {result.imgsz[0]}x{result.imgsz[1]}, {ms:.1f} ms/image"
        Console().print(metrics_table(result.metrics, result.dataset.names, escape(title)))

    @app.command()
    def train(
        model: str = typer.Option(
            "yolov8n",
            "--model",
            "-m",
            help="yolov8n..x, yolo11n..x, yolo26n..x (the official COCO-trained weights, pulled on first use) or "
            "NAME.yaml (random init); a .pt, an Ultralytics .onnx export or 'default' (the bundled model) to fine-tune.",
        ),
        data: str = typer.Option(..., "--data", help="data.yaml of a YOLO-format data set (train and val splits)."),
        epochs: int = typer.Option(100, "--epochs", help="Passes over the train split."),
        imgsz: int = typer.Option(640, "--imgsz", help="Square training image size, multiple of 32."),
        batch: int = typer.Option(16, "--batch", help="Images per forward pass, total over all devices."),
        device: str = typer.Option("auto", "--device", help="cpu, auto, 0, or a DDP list 0,1,2,3."),
        accumulate: int = typer.Option(
            1, "--accumulate", help="Forward passes per optimiser step (effective batch = batch x accumulate)."
        ),
        amp: bool = typer.Option(True, "--amp/--no-amp", help="Mixed precision on GPUs."),
        workers: int = typer.Option(8, "--workers", help="Data loader workers per device."),
        resume: bool = typer.Option(False, "--resume", help="Continue OUT/weights/last.pt."),
        out: str = typer.Option("runs/train", "--out", help="Run folder: weights, logs, ONNX export."),
        seed: int = typer.Option(0, "--seed", help="Random seed."),
        patience: int = typer.Option(100, "--patience", help="Epochs without improvement before stopping early."),
        cache: str = typer.Option(None, "--cache", help="Keep decoded training images in 'ram' or on 'disk'."),
        onnx: bool = typer.Option(True, "--onnx/--no-onnx", help="Export the best weights to ONNX after training."),
        threads: int = typer.Option(
            None,
            "--threads",
            help="PyTorch threads on the CPU (default: Ultralytics', one core fewer than the machine).",
        ),
        settings: list[str] = typer.Option(
            [],
            "--set",
            help="Another Ultralytics training argument as KEY=VALUE (repeatable), e.g. --set close_mosaic=2.",
        ),
    ) -> None:
        """Train a YOLOv8 detector with Ultralytics' trainer (one device or DDP), then export the best weights to ONNX."""
        if "ultralytics" not in sys.modules:
            os.environ.setdefault("YOLO_VERBOSE", "true")  # show Ultralytics' epoch progress
        from campusguard.train.trainer import train as run_training

        r = run_training(
            model,
            data,
            epochs=epochs,
            imgsz=imgsz,
            batch=batch,
            device=device,
            accumulate=accumulate,
            amp=amp,
            workers=workers,
            resume=resume,
            out=out,
            seed=seed,
            patience=patience,
            cache=cache,
            export_onnx=onnx,
            overrides=parse_settings(settings),
            threads=threads,
        )
        t = Table(title="CampusGuard training summary", show_header=False)
        t.add_row("data", f"{escape(str(data))}: {r.train_images} train / {r.val_images} val images")
        t.add_row(
            "model", f"{escape(model)}, {r.epochs} epochs at imgsz {imgsz}, batch {batch} x accumulate {accumulate}"
        )
        t.add_row("time", f"{r.seconds / 60:.1f} min on {escape(device)}")
        if r.metrics:
            m = r.metrics
            t.add_row(
                "val (best.pt)",
                f"mAP50-95 {m.get('map50_95', 0):.3f}  mAP50 {m.get('map50', 0):.3f}  P {m.get('precision', 0):.3f}  R {m.get('recall', 0):.3f}",
            )
        t.add_row("best weights", escape(str(r.best_pt)))
        if r.onnx is not None:
            t.add_row("ONNX", escape(str(r.onnx)))
        t.add_row("next", escape(f"campusguard val --model {r.onnx or r.best_pt} --data {data} --imgsz {imgsz}"))
        Console().print(t)
