"""`campusguard bench`, `compare` and `profile`: measure, merge across machines, and see where time goes."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from campusguard.backends.registry import BACKENDS, BENCH_VARIANTS, DEFAULT_BACKEND, PRECISIONS, choices
from campusguard.errors import InvalidInputError

_PROFILED = tuple(spec.name for spec in BACKENDS.values() if spec.profiler)  # backends with an operator profiler

if TYPE_CHECKING:
    from campusguard.bench.harness import BenchSettings, Combination


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(t) for t in _split(text)]
    except ValueError:
        raise InvalidInputError(f"--{name} {text!r} must be comma-separated integers") from None


def _command(ctx: typer.Context) -> str:
    """The command line as given: options from the command line (not defaults), in declaration order."""
    parts = ["campusguard", ctx.info_name or "bench"]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params[param.name]
        if getattr(param, "param_type_name", "") != "option":
            parts += [shlex.quote(str(v)) for v in (value if isinstance(value, (list, tuple)) else [value])]
        elif getattr(param, "is_flag", False):
            parts.append(param.opts[0] if value else (getattr(param, "secondary_opts", None) or param.opts)[0])
        else:
            parts += [param.opts[0], shlex.quote(str(value))]
    return " ".join(parts)


def bench(
    ctx: typer.Context,
    models: str = typer.Option(
        "yolov8n.yaml",
        "--models",
        help="Comma-separated: architectures with random weights (yolov8n.yaml, yolo11n.yaml, yolo26n.yaml ... x: speed only), official weights (yolov8n, yolo26n.pt ...), .pt or .onnx files.",
    ),
    backends: str = typer.Option(
        "onnxruntime",
        "--backends",
        help=f"Comma-separated: {', '.join(BENCH_VARIANTS)}. A plain name: host pre/post-processing; -device: "
        "letterbox and NMS where the model runs (I/O bound on the device); -graphs: the same with CUDA graphs.",
    ),
    precisions: str = typer.Option("fp32", "--precisions", help=f"Comma-separated: {', '.join(PRECISIONS)}."),
    batch: str = typer.Option("1", "--batch", help="Comma-separated batch sizes."),
    imgsz: str = typer.Option("640", "--imgsz", help="Network input: 640 or H,W."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda:N, rocm:N."),
    data: Path = typer.Option(None, "--data", help="YOLO data set yaml for accuracy (mAP) and INT8 calibration."),
    split: str = typer.Option("val", "--split", help="Data set split for accuracy."),
    accuracy_images: int = typer.Option(None, "--accuracy-images", help="Evaluate on at most N images."),
    calib: Path = typer.Option(
        None, "--calib", help="Folder of INT8 calibration images (default: --data images, else built-in)."
    ),
    calib_count: int = typer.Option(32, "--calib-count", help="Calibration images for INT8."),
    images: Path = typer.Option(None, "--images", help="Folder of frames to time on (default: data set or samples)."),
    warmup: int = typer.Option(3, "--warmup", help="Untimed calls after the first inference."),
    iters: int = typer.Option(20, "--iters", help="Minimum timed calls per repeat."),
    min_seconds: float = typer.Option(5.0, "--min-seconds", help="Minimum timed seconds per repeat."),
    repeat: int = typer.Option(1, "--repeat", help="Back-to-back timed phases; 2 checks repeatability."),
    repeat_tolerance: float = typer.Option(
        0.10, "--repeat-tolerance", help="Largest spread of repeat medians that counts as agreement."
    ),
    price_per_hour: float = typer.Option(
        None, "--price-per-hour", help="Machine price in USD per hour (cost per million images)."
    ),
    scenarios: str = typer.Option("single-stream,offline", "--scenarios", help="single-stream, offline, multi-stream."),
    streams: int = typer.Option(4, "--streams", help="Concurrent sources of the multi-stream scenario."),
    dynamic: bool = typer.Option(
        False, "--dynamic", help="ONNX export with dynamic batch (default: static per batch size)."
    ),
    torch_threads: int = typer.Option(None, "--torch-threads", help="PyTorch intra-op threads (default: PyTorch's)."),
    ort_threads: int = typer.Option(0, "--ort-threads", help="ONNX Runtime intra-op threads (0: one per core)."),
    ort_spinning: bool = typer.Option(
        True,
        "--ort-spinning/--no-ort-spinning",
        help="ONNX Runtime threads spin-wait (off: steadier on shared machines).",
    ),
    int8_per_channel: bool = typer.Option(False, "--int8-per-channel/--int8-per-tensor", help="INT8 weight scales."),
    int8_reduce_range: bool = typer.Option(True, "--int8-reduce-range/--int8-full-range", help="INT8 7-bit weights."),
    conf: float = typer.Option(0.25, "--conf", help="Confidence threshold while timing."),
    head: str = typer.Option(
        None,
        "--head",
        help="end2end or classic: the head of .pt and architecture models (YOLO26: end2end by default); "
        "every result records the head that ran.",
    ),
    machine: str = typer.Option(None, "--machine", help="Machine name in results (default: from GPU or CPU name)."),
    notes: str = typer.Option(None, "--notes", help="Free text stored in the result (run conditions)."),
    out: Path = typer.Option(Path("bench-results"), "--out", help="Output folder for the JSON and CSV."),
) -> None:
    """Benchmark models x backends x precisions x batch sizes: latency, throughput, memory, accuracy, cost."""
    import datetime as dt
    import logging

    from campusguard.backends.devices import resolve_device
    from campusguard.bench.environment import default_machine_name, environment_fingerprint
    from campusguard.bench.harness import BenchSettings, build_result, plan_matrix
    from campusguard.bench.timing import measure_timer_overhead
    from campusguard.models.families import head_end_to_end
    from campusguard.models.info import check_imgsz

    head_end_to_end(head)  # an unknown head is one error before anything runs
    _check_bench_numbers(warmup, iters, repeat, calib_count, min_seconds, price_per_hour)
    started = dt.datetime.now(dt.UTC)
    model_list, backend_list, precision_list = _split(models), _split(backends), _split(precisions)
    batches = _ints(batch, "batch")
    combos = plan_matrix(model_list, backend_list, precision_list, batches, _split(scenarios), streams)
    imgsz_hw = check_imgsz(imgsz, name="--imgsz")
    resolve_device(device)  # a missing device is one error before anything runs
    n_calib = max(calib_count, max(batches), streams) if "int8" in precision_list else 0
    dataset, frames, frames_from, calibration = _bench_inputs(data, split, images, calib, n_calib)
    settings = BenchSettings(
        imgsz_hw=imgsz_hw, device=device, warmup=warmup, iters=iters, min_seconds=min_seconds, repeat=repeat,
        repeat_tolerance=repeat_tolerance, price_per_hour=price_per_hour, conf=conf, accuracy_images=accuracy_images,
        dynamic=dynamic, int8_per_channel=int8_per_channel, int8_reduce_range=int8_reduce_range,
        torch_threads=torch_threads, ort_threads=ort_threads, ort_spinning=ort_spinning, head=head,
    )  # fmt: skip
    logging.getLogger("campusguard.detector").setLevel(logging.ERROR)  # the RANDOM-weights warning is per load
    env = environment_fingerprint()
    name = machine or default_machine_name(env)
    overhead = measure_timer_overhead()
    console = Console(stderr=True)
    records = _run_with_progress(console, combos, settings, frames, dataset, calibration)
    config = {
        "models": model_list, "backends": backend_list, "precisions": precision_list, "batch": batches,
        "scenarios": _split(scenarios), "streams": streams, "data": str(data) if data else None,
        "frames": frames_from, "calibration_images": len(calibration) if calibration else None,
    }  # fmt: skip
    result = build_result(records, settings, config, name, _command(ctx), env, overhead, notes, started)
    json_path, csv_path = _write_outputs(result, records, name, out)
    _print_summary(console, result)
    for line in _auto_choices():
        typer.echo(line)
    typer.echo(f"wrote {json_path} and {csv_path}")


def _auto_choices() -> list[str]:
    """What ``precision: auto`` (the engine trial) chose on this CPU, per stored trial, one line each."""
    from campusguard.doctor import cpu_name
    from campusguard.precision_cache import cached_calibrations

    cpu = cpu_name()
    lines = []
    for c in cached_calibrations():
        if c.key.cpu == cpu:
            lines.append(f"precision: auto on this CPU ({c.measured_at}): {c.result.line()}")
    return lines or ["precision: auto: no engine trial stored for this CPU (`campusguard doctor --calibrate`)"]


def _check_bench_numbers(
    warmup: int, iters: int, repeat: int, calib_count: int, min_seconds: float, price_per_hour: float | None
) -> None:
    for name, value, low in (
        ("warmup", warmup, 0),
        ("iters", iters, 1),
        ("repeat", repeat, 1),
        ("calib-count", calib_count, 1),
    ):
        if value < low:
            raise InvalidInputError(f"--{name} {value} must be at least {low}")
    if min_seconds < 0:
        raise InvalidInputError(f"--min-seconds {min_seconds} must not be negative")
    if price_per_hour is not None and price_per_hour < 0:
        raise InvalidInputError(f"--price-per-hour {price_per_hour} must not be negative")


def _bench_inputs(
    data: Path | None, split: str, images: Path | None, calib: Path | None, calib_count: int
) -> tuple[Any, list[np.ndarray], str, list[Path] | None]:
    """The data set (``--data``), the frames to time on and their origin, and ``calib_count`` INT8
    calibration images (none when 0): ``--images``/``--calib`` folders first, else the data set, else built-in."""
    from campusguard.bench.inputs import calibration_images, list_images, load_frames
    from campusguard.models.registry import cache_dir

    dataset = None
    if data is not None:
        from campusguard.eval import load_yolo_dataset

        dataset = load_yolo_dataset(data, split=split)
    frame_paths = list_images(images) if images is not None else (dataset.image_paths[:8] if dataset else None)
    frames, frames_from = load_frames(frame_paths)
    calibration = None
    if calib_count:
        sources = list_images(calib) if calib is not None else (dataset.image_paths if dataset else None)
        calibration = calibration_images(cache_dir(), calib_count, sources)
    return dataset, frames, frames_from, calibration


def _run_with_progress(
    console: Console,
    combos: list[Combination],
    settings: BenchSettings,
    frames: list[np.ndarray],
    dataset: Any,
    calibration: list[Path] | None,
) -> list[dict[str, Any]]:
    """`run_matrix` under a progress bar naming the combination being measured."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from campusguard.bench.harness import run_matrix

    with Progress(
        TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}"), console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("", total=len(combos))
        return run_matrix(
            combos, settings, frames, dataset, calibration,
            on_start=lambda i, c: progress.update(task, description=escape(c.label)),
            on_result=lambda i, c, r: progress.advance(task),
        )  # fmt: skip


def _write_outputs(result: dict[str, Any], records: list[dict[str, Any]], machine: str, out: Path) -> tuple[Path, Path]:
    """``bench-<run id>.json`` (the full result) and ``.csv`` (one row per combination) in ``out``."""
    from campusguard.bench.results import flatten_combination, write_csv, write_result

    stem = f"bench-{result['run_id']}"
    json_path = write_result(result, out / f"{stem}.json")
    csv_path = write_csv((flatten_combination(machine, r) for r in records), out / f"{stem}.csv")
    return json_path, csv_path


def compare(
    paths: list[Path] = typer.Argument(..., help="Result JSON files or folders holding them (any machines)."),
    baseline: str = typer.Option(None, "--baseline", help="Machine name to compare against (default: the first)."),
    out: Path = typer.Option(Path("bench-report"), "--out", help="Report folder (report.md, report.html, plots/)."),
    repeat_tolerance: float = typer.Option(
        0.10, "--repeat-tolerance", help="Spread of repeat medians called repeatable."
    ),
) -> None:
    """Merge results from several machines into one matrix with deltas, plots and conclusions."""
    from campusguard.bench.compare import compare as do_compare
    from campusguard.bench.compare import conclusions
    from campusguard.bench.report import write_report

    cmp = do_compare(paths, baseline)
    files = write_report(cmp, out, repeat_tolerance=repeat_tolerance)
    for sentence in conclusions(cmp, repeat_tolerance=repeat_tolerance):
        typer.echo(f"- {sentence}")
    typer.echo(f"wrote {files['markdown']} and {files['html']}")


def profile(
    model: str = typer.Argument(
        ...,
        help="Architecture with random weights (yolov8n.yaml ... yolo26x.yaml), official weights (yolov8n ...), .pt or .onnx file.",
    ),
    backend: str = typer.Option(DEFAULT_BACKEND, "--backend", help=f"{choices(_PROFILED)}."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda:N, rocm:N."),
    imgsz: str = typer.Option("640", "--imgsz", help="Network input: 640 or H,W."),
    batch: int = typer.Option(1, "--batch", help="Images per call."),
    precision: str = typer.Option("fp32", "--precision", help=f"{', '.join(PRECISIONS)} (as the backend runs)."),
    runs: int = typer.Option(10, "--runs", help="Profiled calls."),
    warmup: int = typer.Option(2, "--warmup", help="Calls before profiling."),
    calib: Path = typer.Option(None, "--calib", help="INT8 calibration image folder (default: built-in)."),
    top: int = typer.Option(15, "--top", help="Operators shown."),
    out: Path = typer.Option(Path("bench-profile"), "--out", help="Folder for profile.json, CSVs and profile.png."),
) -> None:
    """Where the time goes: per operator type and node, plus pre- and post-processing."""
    from campusguard.bench.inputs import calibration_images, list_images
    from campusguard.bench.profile import profile_model, write_profile
    from campusguard.models.info import check_imgsz
    from campusguard.models.registry import cache_dir

    calibration = None
    if precision == "int8":
        calibration = calibration_images(cache_dir(), max(32, batch), list_images(calib) if calib else None)
    res = profile_model(
        model, backend=backend, device=device, imgsz_hw=check_imgsz(imgsz, name="--imgsz"), batch=batch, precision=precision,
        runs=runs, warmup=warmup, calibration=calibration,
    )  # fmt: skip
    files = write_profile(res, out, top=top)
    table = Table(title=f"{escape(res.model)} {res.backend} ({escape(res.provider)}) batch {res.batch}: top operators")
    for col in ("operator type", "category", "ms / call", "share", "calls"):
        table.add_column(col, justify="left" if col in ("operator type", "category") else "right")
    for o in res.op_types[:top]:
        table.add_row(escape(o.op_type), o.category, f"{o.ms:.2f}", f"{o.share:.1%}", f"{o.calls:g}")
    Console().print(table)
    typer.echo(
        f"pre-processing {res.preprocess_ms:.2f} ms, inference {res.inference_ms:.2f} ms, "
        f"post-processing {res.postprocess_ms:.2f} ms per call"
    )
    typer.echo(f"verdict: {res.verdict}")
    typer.echo(f"wrote {files['json']}, {files['op_types']}, {files['nodes']} and {files['plot']}")


def register(app: typer.Typer) -> None:
    app.command()(bench)
    app.command()(compare)
    app.command()(profile)


def _print_summary(console: Console, result: dict) -> None:
    table = Table(title=f"bench on {escape(result['machine'])}")
    for col in (
        "model",
        "backend",
        "prec",
        "batch",
        "status",
        "img/s",
        "p50 ms",
        "p99 ms",
        "first ms",
        "RSS MiB",
        "mAP50-95",
        "head",
    ):
        table.add_column(col)
    for r in result["results"]:
        if r["status"] != "ok":
            table.add_row(r["model"], r["backend"], r["precision"], str(r["batch"]), r["status"])
            continue
        acc = r.get("accuracy") or {}
        table.add_row(
            r["model"], r["backend"], r["precision"],
            f"{r['batch']}" + (" streams" if r["scenario"] == "multi-stream" else ""), "ok",
            f"{r['throughput_ips']:.1f}", f"{r['latency_ms']['p50']:.1f}", f"{r['latency_ms']['p99']:.1f}",
            f"{r['first_inference_ms']['total_ms']:.0f}", f"{r['memory']['host_rss_peak_mb']:.0f}",
            f"{acc['map50_95'] * 100:.1f}" if acc.get("map50_95") is not None else "n/a",
            str(r.get("head", "")),
        )  # fmt: skip
    console.print(table)
    for r in result["results"]:
        if r["status"] != "ok":
            console.print(
                f"{r['status']}: {escape(r['model'])} {r['backend']} {r['precision']} b{r['batch']}: {escape(str(r['reason']))}"
            )
