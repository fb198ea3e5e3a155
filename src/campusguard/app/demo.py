"""`campusguard demo`: a synthetic campus video with scripted incidents, watched and scored.

Steps (each printed as it happens):

1. generate the video and its ground truth with `campusguard.data.synth.video.generate_video`;
2. write a watch config: the bundled example (``assets/watch-example.yaml``: detector, tracker
   and rule tuning shared by every scenario) with the video's source, zones, lines and rule
   thresholds filled in;
3. run the watch pipeline on it (every frame, deterministic), printing incidents as they are
   raised, writing the annotated video and event snapshots;
4. score the stored incidents against the scripted ones (`campusguard.app.eval_events`) and
   print precision, recall and F1; write a small self-contained HTML summary.
"""

from __future__ import annotations

import base64
import html
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import cv2
import numpy as np
import yaml

from campusguard.app.config import parse_config
from campusguard.app.engine.analytics import TRIGGER_BOXES
from campusguard.app.engine.wiring import DetectorFactory
from campusguard.app.eval_events import EventScores, evaluate_events, incidents_from_events, load_truth
from campusguard.app.event_side import EventSide
from campusguard.app.events import read_events
from campusguard.app.events.types import Event
from campusguard.app.media.annotate import draw_overlay, recording_segments
from campusguard.app.service import WatchService
from campusguard.app.signals import run_until_stopped
from campusguard.detections import Detections

__all__ = ["EXAMPLE_CONFIG", "DemoResult", "demo_config", "demo_console_config", "run_demo", "write_summary_html"]

EXAMPLE_CONFIG = Path(__file__).parent / "assets" / "watch-example.yaml"


@dataclass
class DemoResult:
    """What a demo run produced, and its scores."""

    out_dir: Path
    video: Path
    truth: Path
    config: Path
    database: Path
    annotated_video: Path
    summary_html: Path
    scores: EventScores
    events: list[Event] = field(default_factory=list)
    clean: bool = True


def demo_config(
    truth: dict[str, Any],
    video: Path,
    out_dir: Path,
    model: str | None = None,
    example_text: str | None = None,
    motion: bool | dict[str, Any] | None = None,
    precision: Literal["auto", "fp32", "int8"] | None = None,
    imgsz: int | None = None,
) -> dict[str, Any]:
    """The watch config of a demo video: the example config with the video's geometry and thresholds.

    Args:
        truth: the ground-truth JSON of `generate_video` (``camera_id``, ``resolution_wh``,
            ``zones``, ``lines``, ``params``).
        video: the video file.
        out_dir: where the database, events, annotated video and snapshots go.
        model: a model instead of the example's (the bundled default).
        example_text: the example config YAML (default: the bundled one).
        motion: turn the camera's motion gating on or off, or give its ``motion`` section (none keeps
            the example's setting).
        precision: the detector's ``precision`` (none keeps the example's, ``auto``).
        imgsz: the detector's input size (long side; none keeps the example's).

    Returns:
        The config as a plain dict (dump it with ``yaml.safe_dump``). Example rules whose zone or
        line the video does not have are dropped.
    """
    data = yaml.safe_load(example_text if example_text is not None else EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    cam = data["cameras"][0]
    cam.update(id=str(truth["camera_id"]), source=str(video), resolution_wh=list(truth["resolution_wh"]))
    cam["zones"] = [{"name": name, "polygon": z["polygon"]} for name, z in truth["zones"].items()]
    cam["lines"] = [
        {"name": name, "points": ln["points"], "in_side": ln["in_side"]} for name, ln in truth.get("lines", {}).items()
    ]
    params = truth.get("params", {})
    rules = []
    for rule in cam.get("rules", []):
        kind = rule["kind"]
        if kind == "line_crossing":
            if rule.get("line") in truth.get("lines", {}):
                rules.append(rule)
            continue
        if rule.get("zone") not in truth["zones"]:
            continue
        p = params.get(kind, {})
        if "min_seconds" in p:
            rule["min_seconds"] = float(p["min_seconds"])
        if kind == "crowd" and "min_count" in p:
            rule["min_count"] = int(p["min_count"])
        if kind == "fire_lane":
            if "stationary_frac" in p:
                rule["max_movement"] = float(p["stationary_frac"])
            if "stationary_window_s" in p:
                rule["stationary_window_s"] = float(p["stationary_window_s"])
        rules.append(rule)
    if "fall" in params:  # videos with scripted falls: the fall rule, anywhere in the frame, as the truth counts them
        p = params["fall"]
        rules.append(
            {
                "kind": "fall",
                "classes": ["person"],
                "min_duration_s": float(p["min_seconds"]),
                "down_aspect": float(p["down_aspect"]),
                "upright_aspect": float(p["upright_aspect"]),
                "max_movement": float(p["stationary_frac"]),
                "stationary_window_s": float(p["stationary_window_s"]),
                "inertia": 2,
                "max_gap_s": 1.0,
                "end_grace_s": 1.0,
            }
        )
    cam["rules"] = rules
    if motion is not None:
        cam["motion"] = {**cam.get("motion", {}), **(motion if isinstance(motion, dict) else {"enabled": motion})}
    detector = data.setdefault("detector", {})
    if model is not None:
        detector["model"] = str(model)
    if precision is not None:
        detector["precision"] = precision
    if imgsz is not None:
        detector["imgsz"] = int(imgsz)
    data["storage"] = {"sqlite": str(out_dir / "events.db")}
    data["alerts"] = [
        {"kind": "stdout", "phases": ["start", "end"]},
        {"kind": "jsonl", "path": str(out_dir / "events.jsonl"), "phases": ["start", "update", "end"]},
    ]
    data["outputs"] = {
        "annotated_video_dir": str(out_dir / "annotated"),
        "snapshots_dir": str(out_dir / "snapshots"),
        "metrics_interval_s": 0,
    }
    return data


def demo_console_config(seed: int, out_dir: Path, seconds: float, model: str | None) -> Path:
    """Generate the demo video and a watch config that loops it in real time (for `demo --serve`)."""
    from campusguard.data.synth.video import generate_video

    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"[demo] generating a {seconds:.0f} s synthetic campus video, seed {seed} ...", flush=True)
    truth = generate_video(seed, out_dir, seconds=seconds, name=f"campus-seed{seed}")
    data = demo_config(truth.to_dict(), out_dir / truth.video, out_dir, model)
    data["cameras"][0].update(realtime=True, loop=True)
    data["alerts"] = [{"kind": "stdout", "phases": ["start", "end"]}]
    data["outputs"] = {"snapshots_dir": str(out_dir / "snapshots"), "metrics_interval_s": 0}
    path = out_dir / "console.yaml"
    path.write_text(
        "# written by `campusguard demo --serve`: the demo video, looped in real time\n"
        + yaml.safe_dump(data, sort_keys=False),
        encoding="utf-8",
    )
    return path


def _fresh(out_dir: Path) -> None:
    """Remove the outputs of an earlier demo in ``out_dir`` so scores cover this run only."""
    for name in ("events.db", "events.db-wal", "events.db-shm", "events.jsonl", "summary.html"):
        (out_dir / name).unlink(missing_ok=True)
    for sub, pattern in (("snapshots", "*.jpg"), ("annotated", "*.mp4")):
        folder = out_dir / sub
        if folder.is_dir():
            for p in folder.glob(pattern):
                p.unlink()


def _print_scores(scores: EventScores, out: TextIO) -> None:
    o = scores.overall
    print(
        f"[demo] incidents against the script: precision {o.precision:.3f}, recall {o.recall:.3f}, F1 {o.f1:.3f} (TP {o.tp}, FP {o.fp}, FN {o.fn})",
        file=out,
    )
    for kind, k in sorted(scores.per_kind.items()):
        err = "-" if k.start_error_mean_s != k.start_error_mean_s else f"{k.start_error_mean_s:.2f} s"
        print(
            f"[demo]   {kind:14s} P {k.precision:.2f}  R {k.recall:.2f}  F1 {k.f1:.2f}  (TP {k.tp}, FP {k.fp}, FN {k.fn}; start error {err})",
            file=out,
        )


def run_demo(
    seed: int = 0,
    out_dir: str | Path = "campusguard-demo",
    seconds: float = 40.0,
    model: str | None = None,
    out: TextIO | None = None,
    detector_factory: DetectorFactory | None = None,
    size_wh: tuple[int, int] = (640, 360),
    fps: int = 10,
    falls: bool = False,
    motion: bool | dict[str, Any] | None = None,
    precision: Literal["auto", "fp32", "int8"] | None = None,
    imgsz: int | None = None,
    idle_fraction: float = 0.0,
) -> DemoResult:
    """Generate, watch, score and summarise one synthetic scenario (see the module docstring).

    ``falls``: the video also scripts people who fall, and the config gets a fall rule.
    ``motion``: motion gating on or off for the camera, or its ``motion`` section (none: the
    example config's setting). ``precision``: the detector's (none: the example's ``auto``).
    ``imgsz``: the detector's input size (none: the example's). ``idle_fraction``: share of the video,
    in [0, 1), in which nobody is in view and nothing moves (quiet stretches of a campus day and
    night, before and after the busy spans; the truth scores them as any other time)."""
    from campusguard.data.synth.video import generate_video

    out = out or sys.stdout
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _fresh(out_dir)
    idle = f", idle {idle_fraction:.0%} of the time" if idle_fraction > 0 else ""
    print(
        f"[demo] generating a {seconds:.0f} s synthetic campus video, seed {seed}, {size_wh[0]}x{size_wh[1]} at {fps} fps{idle} ...",
        file=out,
        flush=True,
    )
    truth = generate_video(
        seed,
        out_dir,
        size_wh=size_wh,
        seconds=seconds,
        fps=fps,
        name=f"campus-seed{seed}" + (f"-idle{round(idle_fraction * 100)}" if idle_fraction > 0 else ""),
        falls=falls,
        idle_fraction=idle_fraction,
    )
    video = out_dir / truth.video
    truth_path = video.with_suffix(".json")
    truth_dict = truth.to_dict()
    scripted = ", ".join(f"{i['kind']}@{i['start_s']:.1f}s" for i in truth_dict["incidents"]) or "none"
    print(f"[demo] scripted incidents: {scripted}", file=out)
    if truth.active_windows:
        spans = ", ".join(f"{a:.0f}-{b:.0f} s" for a, b in truth.active_windows)
        print(f"[demo] active spans {spans}; nobody in view and nothing moving outside them", file=out)
    config_path = out_dir / "watch.yaml"
    config_path.write_text(
        "# written by `campusguard demo` from the bundled example config\n"
        + yaml.safe_dump(
            demo_config(truth_dict, video, out_dir, model, motion=motion, precision=precision, imgsz=imgsz),
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    print(f"[demo] config {config_path}; watching {video} ...", file=out, flush=True)
    loaded = parse_config(config_path.read_text(encoding="utf-8"), str(config_path))
    service = WatchService(loaded, detector_factory=detector_factory, out=out, events=EventSide.owned(loaded, out))
    clean = run_until_stopped(service)
    db = Path(loaded.config.storage.sqlite)
    events = read_events(db)
    scores = evaluate_events(load_truth(truth_path), incidents_from_events(events))
    _print_scores(scores, out)
    segments = recording_segments(loaded.config.outputs.annotated_video_dir or out_dir, truth_dict["camera_id"])
    annotated = segments[0] if segments else out_dir / "annotated"  # a demo shorter than a segment: one file
    summary = write_summary_html(out_dir / "summary.html", seed, truth_dict, events, scores, annotated, video)
    (out_dir / "scores.json").write_text(json.dumps(scores.to_dict(), indent=2, default=str) + "\n", encoding="utf-8")
    print(f"[demo] annotated video {annotated}; summary {summary}; events {db}", file=out, flush=True)
    print(
        f"[demo] next: open {summary} in a browser (each incident with the boxes and zone that raised it, the videos); "
        "`campusguard demo --serve` runs the operators' console on this video; "
        f"`campusguard watch {config_path}` runs the same pipeline from its config",
        file=out,
        flush=True,
    )
    return DemoResult(out_dir, video, truth_path, config_path, db, annotated, summary, scores, events, clean)


_WHY_BGR = (0, 0, 255)  # the rule's zone or line and the boxes that raised the incident


def incident_picture(event: Event, truth: dict[str, Any]) -> np.ndarray | None:
    """The incident's snapshot with why it is one drawn on it: the zone or line of its rule (red),
    the camera's other zones and lines, and the boxes of the tracks that raised it
    (`TRIGGER_BOXES`); None without a readable snapshot."""
    image = cv2.imread(event.snapshot_path) if event.snapshot_path else None
    if image is None:
        return None
    w0, h0 = (int(v) for v in truth["resolution_wh"])
    if (image.shape[1], image.shape[0]) != (w0, h0):
        image = cv2.resize(image, (w0, h0), interpolation=cv2.INTER_AREA)
    zones = [(name, np.asarray(z["polygon"], np.float32)) for name, z in truth.get("zones", {}).items()]
    lines = [(name, np.asarray(ln["points"], np.float32)) for name, ln in truth.get("lines", {}).items()]
    boxes = event.details.get(TRIGGER_BOXES) or []
    detections = Detections(
        np.asarray([b["xyxy"] for b in boxes], np.float32).reshape(-1, 4),
        np.ones(len(boxes), np.float32),
        np.asarray([b["class_id"] for b in boxes], np.int64),
        np.asarray([b["tracker_id"] for b in boxes], np.int64),
    )
    names = dict(zip(event.class_ids, event.class_names, strict=False))
    draw_overlay(image, detections, names, zones=zones, lines=lines, alert_zones=[event.zone])
    thick = max(3, round(min(w0, h0) / 120))  # what raised it, drawn again thick: it must read in a thumbnail
    for name, pts in [*zones, *lines]:
        if name == event.zone:
            cv2.polylines(image, [np.round(pts).astype(np.int32).reshape(-1, 1, 2)], len(pts) > 2, _WHY_BGR, thick)
    for x1, y1, x2, y2 in np.round(detections.xyxy).astype(int):
        cv2.rectangle(image, (int(x1), int(y1)), (int(x2), int(y2)), _WHY_BGR, thick)
    return image


def _thumbnail_data_uri(image: np.ndarray | None, width: int = 320) -> str | None:
    """A small JPEG of ``image`` as a ``data:`` URI (so the HTML needs no other files)."""
    if image is None:
        return None
    h, w = image.shape[:2]
    small = cv2.resize(image, (width, max(1, round(h * width / w))), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 75])
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode() if ok else None


def write_summary_html(
    path: Path, seed: int, truth: dict[str, Any], events: list[Event], scores: EventScores, annotated: Path, video: Path
) -> Path:
    """A self-contained HTML page: scores, found incidents with snapshot thumbnails, the script, and links."""
    esc = html.escape
    o = scores.overall
    rows = []
    for e in sorted(events, key=lambda e: e.start_s):
        thumb = _thumbnail_data_uri(incident_picture(e, truth))
        why = f"{e.rule_kind} in {e.zone} at {e.start_s:.1f} s: the zone or line in red, the tracks that raised it boxed"
        img = f'<img src="{thumb}" alt="{esc(why)}" title="{esc(why)}">' if thumb else ""
        end = "-" if e.end_s is None else f"{e.end_s:.1f}"
        rows.append(
            f"<tr><td>{esc(e.rule_kind)}</td><td>{esc(e.zone)}</td><td>{e.start_s:.1f}</td><td>{end}</td>"
            f"<td>{esc(', '.join(map(str, e.tracker_ids)))}</td><td>{esc(', '.join(e.class_names))}</td><td>{img}</td></tr>"
        )
    kinds = "".join(
        f"<tr><td>{esc(k)}</td><td>{s.tp}</td><td>{s.fp}</td><td>{s.fn}</td><td>{s.precision:.2f}</td><td>{s.recall:.2f}</td><td>{s.f1:.2f}</td></tr>"
        for k, s in sorted(scores.per_kind.items())
    )
    script = "".join(
        f"<tr><td>{esc(str(i['kind']))}</td><td>{esc(str(i['zone']))}</td><td>{float(i['start_s']):.1f}</td><td>{float(i['end_s']):.1f}</td></tr>"
        for i in truth["incidents"]
    )
    base = path.parent.resolve()

    def rel(p: Path) -> str:
        full = Path(p).resolve()
        return esc(str(full.relative_to(base)) if full.is_relative_to(base) else str(p))

    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CampusGuard demo, seed {seed}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: middle; }}
th {{ background: #f3f3f3; }}
.score {{ font-size: 1.3em; }}
</style></head><body>
<h1>CampusGuard demo, seed {seed}</h1>
<p>Video <a href="{rel(video)}">{rel(video)}</a> ({truth["resolution_wh"][0]}x{truth["resolution_wh"][1]}, {truth["fps"]} fps, {truth.get("num_frames", len(truth.get("frames", [])))} frames);
annotated video <a href="{rel(annotated)}">{rel(annotated)}</a>.</p>
<p class="score">Incidents against the script: precision <b>{o.precision:.3f}</b>, recall <b>{o.recall:.3f}</b>, F1 <b>{o.f1:.3f}</b>
(TP {o.tp}, FP {o.fp}, FN {o.fn}; matched by camera, rule kind, zone and overlapping time, tolerance {scores.tolerance_s:g} s).</p>
<table><tr><th>kind</th><th>TP</th><th>FP</th><th>FN</th><th>precision</th><th>recall</th><th>F1</th></tr>{kinds}</table>
<h2>Incidents found ({len(events)})</h2>
<table><tr><th>kind</th><th>zone / line</th><th>start s</th><th>end s</th><th>track ids</th><th>classes</th><th>snapshot</th></tr>{"".join(rows)}</table>
<h2>Scripted incidents ({len(truth["incidents"])})</h2>
<table><tr><th>kind</th><th>zone / line</th><th>start s</th><th>end s</th></tr>{script}</table>
</body></html>
"""
    path.write_text(page, encoding="utf-8")
    return path
