"""`campusguard plan`: machines or GPUs and cost per day of a camera deployment, from `bench` results."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from campusguard.bench.host_cost import HostCost
from campusguard.bench.plan import (
    DEFAULT_EFFICIENCY,
    DEFAULT_HEADROOM,
    CapacityPlan,
    Deployment,
    HostWork,
    MachinePlan,
    PlanSettings,
    host_work,
    parse_resolution,
    plan_from_results,
)
from campusguard.bench.results import read_json
from campusguard.errors import InvalidInputError

_PRECISIONS = ("fp32", "fp16", "int8")
COST_KIND = "campusguard-cost"
"""The ``kind`` of a `benchmarks/cost.py` file, whose ``host_cost`` section `--host-cost` also reads."""


def _host(deployment: Deployment, path: Path | None, ms: float | None, cores: float | None) -> HostWork:
    """Host work from a host-cost file, a cost file's ``host_cost`` section, a given figure, or none."""
    if path is None or ms is not None:
        return host_work(deployment, path, ms, cores)
    doc = read_json(path, "host-cost file")
    if not (isinstance(doc, dict) and doc.get("kind") == COST_KIND):
        return host_work(deployment, path, ms, cores)
    section = doc.get("host_cost")
    if not isinstance(section, dict):
        raise InvalidInputError(
            f"{path}: a cost file without a host_cost section (run benchmarks/cost.py with the app)"
        )
    cost = HostCost.from_document(section, f"{path} (host_cost)")
    total, parts = cost.ms_per_frame(deployment.resolution_wh, gated=deployment.active_fraction < 1)
    notes = f"; {cost.notes}" if cost.notes else ""
    return HostWork(total, f"measured: {cost.source} ({cost.cpu}{notes})", cores, parts)


def _watch_batch_size() -> int:
    """The watch app's default cross-camera batch (``detector.batch_size``): the batch a deployment forms."""
    from campusguard.app.config.detector import DetectorConfig

    return int(DetectorConfig.model_fields["batch_size"].default)


def plan(
    ctx: typer.Context,
    cameras: int = typer.Option(..., "--cameras", help="Number of cameras."),
    fps: float = typer.Option(..., "--fps", help="Frames per second per camera."),
    resolution: str = typer.Option(..., "--resolution", help="Frame size WIDTHxHEIGHT, e.g. 1280x720."),
    results: list[Path] = typer.Option(
        ..., "--results", help="Bench result files or folders (repeat the option or list several)."
    ),
    model: str = typer.Option("yolov8n", "--model", help="Model as recorded by bench: yolov8n, or a file name."),
    backend: str = typer.Option(None, "--backend", help="onnxruntime, torch ... (default: fastest measured)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, fp16 or int8."),
    batch: int = typer.Option(None, "--batch", help="Frames per inference call (default: watch's batch_size)."),
    imgsz: int = typer.Option(None, "--imgsz", help="Network input long side wanted (default: any measured)."),
    active_fraction: float = typer.Option(
        1.0, "--active-fraction", help="Share of frames reaching the detector with motion gating, (0, 1]."
    ),
    efficiency: float = typer.Option(
        None,
        "--efficiency",
        help=f"Watch pipeline / model-only throughput (default: the measured {DEFAULT_EFFICIENCY:g}; 1 on CPU machines "
        "with host work counted, which that figure already held).",
    ),
    headroom: float = typer.Option(DEFAULT_HEADROOM, "--headroom", help="Spare share of each unit, [0, 1)."),
    price_per_hour: float = typer.Option(
        None, "--price-per-hour", help="USD per machine- or GPU-hour where the results carry no price."
    ),
    host_cost: Path = typer.Option(
        None,
        "--host-cost",
        help="Measured host work per frame (decode, motion, tracking and rules, events): a JSON file of "
        "benchmarks/host_cost.py, or of benchmarks/cost.py (its host_cost section).",
    ),
    host_ms_per_frame: float = typer.Option(
        None, "--host-ms-per-frame", help="Host work per frame in core-milliseconds, instead of --host-cost."
    ),
    host_cores: float = typer.Option(
        None,
        "--host-cores",
        help="CPU cores per unit for host work (default: the bench record's logical cores; a GPU machine's "
        "divided among its GPUs). On a CPU machine the detector shares them.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """How many machines or GPUs a camera deployment needs and what it costs per day, from bench results.

    Every assumption is printed with its source: a measured result file, the user, or a default.
    """
    if precision not in _PRECISIONS:
        raise InvalidInputError(f"--precision {precision!r} must be one of {', '.join(_PRECISIONS)}")
    given = [
        name
        for name in ("model", "backend", "precision", "batch", "imgsz", "active_fraction", "efficiency", "headroom")
        if (src := ctx.get_parameter_source(name)) is not None and src.name == "COMMANDLINE"
    ]
    deployment = Deployment(cameras, fps, parse_resolution(resolution), active_fraction)
    host = _host(deployment, host_cost, host_ms_per_frame, host_cores)
    settings = PlanSettings(
        model=model,
        backend=backend,
        precision=precision,
        batch=batch if batch is not None else _watch_batch_size(),
        imgsz=imgsz,
        efficiency=efficiency,
        headroom=headroom,
        price_per_hour=price_per_hour,
    )
    result = plan_from_results(list(results), deployment, settings, given, host)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    print_plan(Console(width=200), result)


def print_plan(console: Console, result: CapacityPlan) -> None:
    """The deployment's load, one row per machine, then every assumption with its source."""
    d = result.deployment
    console.print(
        f"{d.cameras:,} camera{'s' if d.cameras != 1 else ''} x {d.fps:g} fps at "
        f"{d.resolution_wh[0]}x{d.resolution_wh[1]}: {d.frames_per_second:,.1f} frames/s, "
        f"{d.frames_per_day:,.0f} frames/day; detector: {d.detector_images_per_second:,.1f} images/s, "
        f"{d.detector_images_per_day:,.0f} images/day (active fraction {d.active_fraction:g})"
    )
    table = Table(title="capacity plan")
    table.add_column("machine", no_wrap=True)
    table.add_column("result used", no_wrap=True)
    table.add_column("input h x w", no_wrap=True)
    for col in ("img/s", "usable img/s", "cameras/unit", "units", "utilisation", "bottleneck", "USD/h", "USD/day"):
        table.add_column(col)
    for p in result.machines:
        r = p.choice.row
        hw = f"{r.input_hw[0]}x{r.input_hw[1]}" if r.input_hw else "?"
        table.add_row(
            escape(p.machine),
            escape(r.label),
            f"{hw} ({p.choice.shape})",
            f"{p.measured_ips:.1f}",
            f"{p.usable_ips:.1f}",
            f"{p.cameras_per_unit:.2f}",
            f"{p.units:,} {p.unit}{'s' if p.units != 1 else ''}",
            f"{p.utilisation:.0%}",
            _bottleneck(p),
            f"{p.price_per_hour:g}" if p.price_per_hour is not None else "unknown",
            f"{p.cost_per_day:,.2f}" if p.cost_per_day is not None else "unknown",
        )
    console.print(table)
    host = result.host
    if host.ms_per_frame is None:
        console.print(f"[bold]host work per frame: not counted[/bold] ({escape(host.source)})", soft_wrap=True)
    else:
        detail = f" = {host.detail}" if host.detail else ""
        console.print(
            f"host work per frame: {host.ms_per_frame:.2f} core-ms{escape(detail)} ({escape(host.source)}); "
            "bottleneck: on a CPU machine the larger share of its core time, on a GPU the resource that runs out first",
            soft_wrap=True,
        )
    for machine, why in result.unmatched.items():
        console.print(f"not planned on {escape(machine)}: {escape(why)}", soft_wrap=True)
    console.print("assumptions:")
    for a in result.assumptions:
        console.print(f"  {escape(a.name)}: {escape(a.value)}  [dim]({escape(a.source)})[/dim]", soft_wrap=True)


def _bottleneck(p: MachinePlan) -> str:
    """``host 71%`` (share of a CPU machine's core time), ``GPU`` or ``host CPU``, or ``detector only``."""
    if p.host_ms_per_frame is None:
        return "detector only"
    if p.host_share is not None:
        return f"{p.bottleneck} {p.host_share if p.bottleneck == 'host' else 1 - p.host_share:.0%}"
    return "host CPU" if p.bottleneck == "host" else "GPU"


def register(app: typer.Typer) -> None:
    app.command()(plan)
