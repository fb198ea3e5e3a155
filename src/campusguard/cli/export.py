"""`campusguard export MODEL`: ONNX export (static/dynamic), FP16 and INT8, each checked against FP32."""

from __future__ import annotations

from pathlib import Path

import typer

from campusguard.backends.registry import BACKENDS, DEFAULT_BACKEND, choices
from campusguard.errors import InvalidInputError


def register(app: typer.Typer) -> None:
    @app.command()
    def export(
        model: str = typer.Argument(
            ...,
            help=".pt checkpoint, official weights (yolov8n..x, yolo11n..x, yolo26n..x), an architecture with random "
            "weights (NAME.yaml) or .onnx (for --half/--int8).",
        ),
        fmt: str = typer.Option("onnx", "--format", help="Export format (onnx)."),
        imgsz: list[str] = typer.Option(
            ["640"], "--imgsz", help="N or H,W; repeat for several shapes, e.g. --imgsz 640 --imgsz 384,640."
        ),
        batch: int = typer.Option(1, help="Static batch size."),
        dynamic: bool = typer.Option(False, help="Dynamic batch and image size."),
        half: bool = typer.Option(False, help="Also write an FP16 model."),
        int8: bool = typer.Option(
            False,
            help="Also write an INT8 model (needs --data), the --backend's own file: "
            + ", ".join(f"{s.name}: NAME.{s.int8_tag}{s.int8_suffix}" for s in BACKENDS.values() if s.int8_export)
            + ".",
        ),
        backend: str = typer.Option(
            DEFAULT_BACKEND,
            "--backend",
            help=f"The engine the INT8 file is made for and every file is checked on: "
            f"{choices(tuple(s.name for s in BACKENDS.values() if 'onnx' in s.reads))}.",
        ),
        data: Path = typer.Option(None, help="Folder (or data.yaml) of calibration/check images."),
        calib_images: int = typer.Option(64, help="Calibration images used for INT8."),
        int8_per_channel: bool = typer.Option(
            False,
            "--int8-per-channel/--int8-per-tensor",
            help="INT8 weight scales per output channel (more accurate on small, low-contrast objects) or one per tensor.",
        ),
        simplify: bool = typer.Option(True, help="Simplify the graph with onnxslim."),
        opset: int = typer.Option(17, help="ONNX opset."),
        head: str = typer.Option(
            None,
            "--head",
            help="end2end or classic: the head to export (YOLO26: end2end, NMS-free, by default; classic: NMS in "
            "CampusGuard, the boxes of Ultralytics' default predict).",
        ),
        out: Path = typer.Option(Path("runs/export"), "--out", "-o", help="Output folder."),
    ) -> None:
        """Export to ONNX and optionally FP16/INT8; print size and parity against FP32 for each."""
        from campusguard.backends.registry import backend_spec
        from campusguard.models.aliases import alias_for
        from campusguard.models.export import convert_fp16, export_onnx, pick_images, stamp_alias
        from campusguard.models.families import head_end_to_end
        from campusguard.models.info import check_imgsz
        from campusguard.models.resolve import parse_model_ref

        if fmt != "onnx":
            raise InvalidInputError(f"--format {fmt!r} is not supported; use onnx")
        if batch < 1:
            raise InvalidInputError(f"--batch {batch} must be at least 1")
        if int8 and data is None:
            raise InvalidInputError("--int8 needs --data with calibration images")
        engine = backend_spec(backend)
        if "onnx" not in engine.reads:
            raise InvalidInputError(f"--backend {backend}: export writes ONNX files; {engine.name} does not run them")
        if (missing := engine.missing()) is not None:
            raise InvalidInputError(missing)
        if int8 and engine.int8_export is None:
            raise InvalidInputError(f"--backend {backend} has no INT8 quantiser")
        end_to_end = head_end_to_end(head)
        ref = parse_model_ref(model)
        alias = alias_for(model)
        check_images = (
            pick_images(data, calib_images, on_skip=lambda reason: typer.echo(f"skipped: {reason}", err=True))
            if data is not None
            else _sample_images()
        )
        out.mkdir(parents=True, exist_ok=True)
        for size in imgsz:
            hw = check_imgsz(size, name="--imgsz")
            base = ref.name if ref.name else Path(model).stem
            base += "-random" if ref.kind == "arch" else ""
            tag = (
                f"{hw[0]}x{hw[1]}"
                + ("-dynamic" if dynamic else f"-b{batch}")
                + ("-classic" if end_to_end is False else "")
            )
            fp32 = out / f"{base}.{tag}.onnx"
            if ref.path is not None and ref.kind == "onnx":
                fp32 = ref.path
            else:
                export_onnx(
                    ref,
                    fp32,
                    imgsz_hw=hw,
                    batch=batch,
                    dynamic=dynamic,
                    simplify=simplify,
                    opset=opset,
                    end_to_end=end_to_end,
                )
                _report(fp32, None, check_images, hw, backend)
            if half:
                p16 = out / f"{base}.{tag}.fp16.onnx"
                convert_fp16(fp32, p16)
                _report(p16, fp32, check_images, hw, backend)
                stamp_alias(p16, alias)  # after the parity check, which compares the raw classes
            if int8:
                quantiser = engine.int8_quantiser()
                assert quantiser is not None
                p8 = out / f"{base}.{tag}.{engine.int8_tag}{engine.int8_suffix}"
                quantiser(fp32, p8, check_images, per_channel=int8_per_channel, calib_hw=hw)
                _report(p8, fp32, check_images, hw, backend)
                stamp_alias(p8, alias)


def _sample_images() -> list[Path]:
    """Ultralytics' two sample photos, when no --data is given (parity check only)."""
    try:
        import ultralytics

        assets = Path(ultralytics.__file__).parent / "assets"
        return sorted(assets.glob("*.jpg"))
    except ImportError:
        return []


def _report(
    path: Path, reference: Path | None, images: list[Path], hw: tuple[int, int], backend: str = DEFAULT_BACKEND
) -> None:
    """Print a file's size and head, and (with a reference) its parity with the FP32 reference on ONNX Runtime,
    the candidate run on ``backend`` at its FP32 (an INT8 file is INT8 by itself)."""
    from campusguard.detector import Detector
    from campusguard.io.images import read_image
    from campusguard.models.parity import PARITY_THRESHOLDS, compare_detections

    weights = path.with_suffix(".bin")  # an OpenVINO IR keeps its weights beside the .xml
    size_mb = (
        path.stat().st_size + (weights.stat().st_size if path.suffix == ".xml" and weights.is_file() else 0)
    ) / 1e6
    cand = Detector(path, device="cpu", imgsz=hw, backend=backend, precision="fp32")
    head = f"NMS {cand.info.nms}"
    if reference is None or not images:
        typer.echo(f"{path} ({size_mb:.1f} MB, {head})")
        return
    frames = [read_image(p) for p in images]
    ref = Detector(reference, device="cpu", imgsz=hw)
    report = compare_detections(ref.predict_batch(frames), cand.predict_batch(frames))
    bar = PARITY_THRESHOLDS.get(cand.info.precision)
    if bar is None:
        verdict = ""
    elif not bar.conclusive(report):
        verdict = f"; too few boxes to check ({report.reference_boxes} < {bar.min_reference_boxes}): pass more --data"
    else:
        failure = bar.failure(report)
        verdict = "; check passed" if failure is None else f"; CHECK FAILED: {failure}"
    typer.echo(f"{path} ({size_mb:.1f} MB, {head}); vs FP32 {report.line()}{verdict}")
