"""Cost per camera: CPU core-seconds per camera-hour and processed fps, the app against Ultralytics' loop.

One run, interleaved: every round runs each contender once on each scene, each in a fresh
process, in a rotated order, so a machine shared with other jobs slows them alike and only the
ratios within a round are read. Scenes are held-out `campusguard demo` videos (640x360, 10 fps):

- ``busy``: people moving most of the time (``--busy-seed``, ``--busy-s`` seconds);
- ``idle``: a campus day idle ``--idle-fraction`` of the time (`campusguard demo --idle-fraction`):
  nobody in view and nothing moving outside the busy span.

Contenders (the bundled model, the example config's imgsz 480, conf 0.25, IoU 0.7):

- ``ultralytics``: Ultralytics' ONNX predict loop on the same ONNX file, ``stream=True`` over the
  same video file (its own decode, letterbox, NMS; warmed up on one frame first);
- ``ultralytics-openvino``: Ultralytics' OpenVINO predict loop (what ``format=openvino`` exports run
  with) on the same network: the ONNX file converted to an OpenVINO IR (``ov.convert_model``, FP32
  weights) in a ``*_openvino_model`` folder with Ultralytics' ``metadata.yaml``, as ``yolo export
  format=openvino imgsz=288,480`` writes it: a static input of exactly the app's letterbox for these
  scenes (`openvino_model_dir`), the CPU plugin's defaults (BF16 where the CPU has it), the same loop as
  above. Both loops are checked to letterbox to the app's input before they are timed;
- ``app-fp32-whole`` / ``app-int8-whole``: `watch` on every whole frame (motion gating off);
- ``app-defaults``: `watch` with its defaults for a live camera: motion gating on, ``precision: auto``
  (the precision it picked is recorded);
- ``app-int8-gated``: `watch` with motion gating on and ``precision: int8``;
- ``app-int8-gated-before``: the same with ``busy_hold_s: 0``, the motion gate as it was before it
  learnt to stop looking on busy stretches (its before/after in one run);
- ``app-openvino-whole``: `watch` on every whole frame with ``backend: openvino`` forced (``precision:
  auto`` then chooses among OpenVINO's precisions);
- ``app-openvino-int8-whole``: the same with ``precision: int8``, the shipped NNCF IR;
- ``app-openvino-bf16-gated``: the defaults (motion gating on) with OpenVINO BF16 forced: what ``precision: auto``
  chooses on a quiet AMX CPU, pinned, since the trial's choice under a shared machine's load varies.

With ``--before REV`` every app contender also runs as ``NAME@before``: the same variant, the same child
code, with the package's sources of git revision REV (`git archive`) first on ``PYTHONPATH``, in the same
rounds, so a change is measured against the code before it side by side (``vs_before`` ratios). With
``--own-cache`` the children share a cache folder of this run (``$CAMPUSGUARD_CACHE``): ``precision: auto``'s
trial is then measured in this run, under its load, instead of read from an earlier one.

The app runs the demo's config (tracking, every rule, the event store, snapshots, a JSONL sink)
without the annotated video (Ultralytics' loop draws nothing either). One-time set-up is left out
of both sides' loop figures (Ultralytics' is warmed up on one frame; the app's `WatchService.start`,
model load and tracker import, is recorded on its own as ``startup_cpu_s``). CPU time is the process's own (`resource.getrusage`, self and children,
every thread: decode, ONNX Runtime's pool, tracking, rules, events) over the loop; core-seconds per
camera-hour = CPU seconds / video seconds x 3600. Each app run is scored against the scene's
ground truth (`campusguard.app.eval_events`). Once per run, ``host_cost.measure`` times the app's
host stages (decode, motion gate, tracking and rules, events) one by one on the idle scene with
the defaults' config, so `campusguard plan --host-cost` can read this file.

    python benchmarks/cost.py --rounds 2 --out docs/results/cost-cpu
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

COST_KIND = "campusguard-cost"
IMGSZ = 480
APP_VARIANTS: dict[str, dict[str, Any]] = {
    "app-fp32-whole": {"precision": "fp32", "motion": False},
    "app-int8-whole": {"precision": "int8", "motion": False},
    "app-defaults": {"precision": "auto", "motion": True},
    "app-int8-gated": {"precision": "int8", "motion": True},
    # the gate before it learnt to stop looking on busy stretches: its before/after in the same run
    "app-int8-gated-before": {"precision": "int8", "motion": {"enabled": True, "busy_hold_s": 0}},
    # the OpenVINO engine forced, every whole frame: the engine against Ultralytics' OpenVINO loop
    "app-openvino-whole": {"precision": "auto", "motion": False, "backend": "openvino"},
    # OpenVINO's INT8 (the shipped NNCF IR) forced, every whole frame: its speed and F1 on any CPU
    "app-openvino-int8-whole": {"precision": "int8", "motion": False, "backend": "openvino"},
    # the defaults with OpenVINO BF16 forced (what precision: auto picks on a quiet AMX CPU): the engine pinned,
    # so the ratios do not hang on a trial taken under another load
    "app-openvino-bf16-gated": {"precision": "bf16", "motion": True, "backend": "openvino"},
}
ANCHORS = ("ultralytics", "ultralytics-openvino")  # Ultralytics' own predict loops: the ratios' denominators
CONTENDERS = (*ANCHORS, *APP_VARIANTS)
BEFORE = "@before"  # an app contender run with the sources of `--before REV`


def variant_of(contender: str) -> str:
    """The `APP_VARIANTS` key (or anchor) a contender runs: ``app-defaults@before`` runs ``app-defaults``."""
    return contender.removesuffix(BEFORE)


def resolve_rev(rev: str) -> str:
    """``rev`` as a short commit id (what the results record)."""
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"--before {rev}: not a commit of this repository ({out.stderr.strip()})")
    return out.stdout.strip()


ASSETS = Path("src/campusguard/models/assets")  # the bundled model files


def export_sources(rev: str, folder: Path) -> Path:
    """The package's sources at git revision ``rev`` in ``folder`` (``git archive``); the ``src`` folder to put
    first on ``PYTHONPATH``.

    Where ``rev``'s bundled model files are this checkout's, its ``assets`` folder is a link to this checkout's:
    the precision trial's cache key holds each model file's path (`campusguard.cache.file_key`), so both sides
    then read one trial and run the same engine, and the A/B measures the code, not two trials under load."""
    repo = Path(__file__).resolve().parents[1]
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    same = subprocess.run(["git", "-C", str(repo), "diff", "--quiet", rev, "--", str(ASSETS)], capture_output=True)
    if same.returncode == 0:
        exported = folder / ASSETS
        shutil.rmtree(exported)
        exported.symlink_to(repo / ASSETS, target_is_directory=True)
    return folder / "src"


def _cpu_s() -> float:
    """CPU seconds of this process (every thread) and its children so far."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


# -- children: one contender on one scene, a JSON line on stdout ---------------------------------
def openvino_model_dir(onnx: Path, folder: Path, input_hw: tuple[int, int]) -> Path:
    """An Ultralytics ``*_openvino_model`` folder of ``onnx`` as ``yolo export format=openvino imgsz=H,W`` writes it:
    an IR with a static ``1x3xHxW`` input and a ``metadata.yaml`` whose ``imgsz`` is ``[H, W]`` (``args.dynamic``
    false). Ultralytics' predictor then letterboxes every frame to exactly ``input_hw``: the app's own input for
    these scenes, so both loops run the network on the same pixels.

    (Before 2026-12-06 the folder carried the ONNX file's training ``imgsz`` (320) and no ``args``: Ultralytics
    treats such a folder as a fixed-size export and ran its loop at 320x320, a quarter fewer pixels than the
    app's 288x480, whatever ``imgsz`` it was asked for; docs/openvino.md says which runs that concerns.)"""
    import ast

    import onnx as onnx_lib
    import openvino as ov
    import yaml

    out = folder / f"{onnx.stem}_openvino_model"
    out.mkdir(parents=True, exist_ok=True)
    model = ov.convert_model(str(onnx))
    model.reshape([1, 3, *input_hw])
    ov.save_model(model, str(out / f"{onnx.stem}.xml"), compress_to_fp16=False)
    meta = {p.key: p.value for p in onnx_lib.load(str(onnx), load_external_data=False).metadata_props}
    parsed: dict[str, Any] = {}
    for key in ("stride", "names", "task", "description", "author", "version"):
        if key in meta:
            try:
                parsed[key] = ast.literal_eval(meta[key])
            except (ValueError, SyntaxError):
                parsed[key] = meta[key]
    parsed |= {
        "batch": 1,
        "imgsz": list(input_hw),
        "args": {"batch": 1, "dynamic": False, "half": False, "int8": False},
    }
    (out / "metadata.yaml").write_text(yaml.safe_dump(parsed, sort_keys=False))
    return out


def frame_hw(video: Path) -> tuple[int, int]:
    """``video``'s frame size (height, width)."""
    import cv2

    cap = cv2.VideoCapture(str(video))
    hw = (int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)))
    cap.release()
    return hw


def app_input_hw(frame: tuple[int, int]) -> tuple[int, int]:
    """The network input the app uses for ``frame``-sized (height, width) frames at ``IMGSZ`` (`Detector.input_hw`:
    the stride-aligned letterbox holding the frame)."""
    from campusguard.ops.preprocess import fit_shape

    return fit_shape(frame, (IMGSZ, IMGSZ))


def run_ultralytics(video: Path, folder: Path | None = None, openvino: bool = False) -> dict[str, Any]:
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    import numpy as np
    from ultralytics import YOLO

    from campusguard.models.resolve import DEFAULT_MODEL

    frame = frame_hw(video)
    hw = app_input_hw(frame)
    weights = DEFAULT_MODEL
    if openvino:
        weights = openvino_model_dir(DEFAULT_MODEL, folder or Path(tempfile.mkdtemp()), hw)
    model = YOLO(str(weights), task="detect")
    blank = np.zeros((*frame, 3), np.uint8)
    model.predict(blank, imgsz=IMGSZ, verbose=False)  # builds the session
    shape = tuple(model.predictor.preprocess([blank]).shape[2:])
    if shape != hw:  # both of Ultralytics' loops must run the app's input, or the ratios compare other work
        raise RuntimeError(f"Ultralytics' loop letterboxes to {shape}, the app to {hw}")
    c0, t0, frames = _cpu_s(), time.perf_counter(), 0
    for _ in model.predict(source=str(video), imgsz=IMGSZ, stream=True, verbose=False, conf=0.25, iou=0.7):
        frames += 1
    return {"cpu_s": _cpu_s() - c0, "wall_s": time.perf_counter() - t0, "frames": frames}


class _Picked(logging.Handler):
    """Keeps the detector-precision log line of the wiring (what ``precision: auto`` chose)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "precision" in record.getMessage():
            self.lines.append(record.getMessage())


def app_config(
    truth: dict[str, Any],
    video: Path,
    folder: Path,
    precision: str,
    motion: bool | dict[str, Any],
    backend: str | None = None,
) -> dict[str, Any]:
    """The demo's watch config for one contender: no annotated video, a JSONL sink, snapshots."""
    from campusguard.app.demo import demo_config

    cfg = demo_config(truth, video, folder, precision=precision, motion=motion)  # type: ignore[arg-type]
    if backend is not None:
        cfg["detector"]["backend"] = backend
    cfg["alerts"] = [{"kind": "jsonl", "path": str(folder / "events.jsonl"), "phases": ["start", "update", "end"]}]
    cfg["outputs"] = {"snapshots_dir": str(folder / "snapshots"), "metrics_interval_s": 0}
    return cfg


def run_app(
    video: Path,
    truth_path: Path,
    folder: Path,
    precision: str,
    motion: bool | dict[str, Any],
    backend: str | None = None,
) -> dict[str, Any]:
    import yaml

    from campusguard.app.config import parse_config
    from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth
    from campusguard.app.events import read_events
    from campusguard.app.service import WatchService

    picked = _Picked()
    logging.getLogger("campusguard").addHandler(picked)
    logging.getLogger("campusguard").setLevel(logging.INFO)
    truth = json.loads(truth_path.read_text())
    loaded = parse_config(yaml.safe_dump(app_config(truth, video, folder, precision, motion, backend)), "cost.yaml")
    service = WatchService(loaded, out=io.StringIO())
    c0, t0 = _cpu_s(), time.perf_counter()
    service.start()  # one-time: model load, tracker import, camera set-up
    c1, t1 = _cpu_s(), time.perf_counter()
    service.wait()
    clean = service.finish()
    cpu, wall = _cpu_s() - c1, time.perf_counter() - t1
    scores = evaluate_events(load_truth(truth_path), incidents_from_events(read_events(folder / "events.db")))
    m = service.metrics[str(truth["camera_id"])]
    o = scores.overall
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "startup_cpu_s": c1 - c0,
        "startup_wall_s": t1 - t0,
        "frames": m.frames_processed,
        "clean": clean,
        "f1": o.f1,
        "tp": o.tp,
        "fp": o.fp,
        "fn": o.fn,
        "detector_images": m.detector_images,
        "frames_skipped": m.frames_skipped,
        "frames_gate_busy": m.frames_gate_busy,
        "gate_ms_per_frame": m.gate_ms_total / m.gate_seconds.count if m.gate_seconds.count else None,
        "inference_ms_per_frame": m.inference_ms_total / max(1, m.frames_detected),
        "precision_log": picked.lines[-1] if picked.lines else None,
    }


def run_host_stages(video: Path, truth_path: Path, folder: Path) -> dict[str, Any]:
    """The app's host stages one at a time (`host_cost.measure`) with the defaults' config (imgsz 480)."""
    import host_cost

    from campusguard.bench.host_cost import STAGES

    def config(video: Path, truth: dict[str, Any], folder: Path) -> dict[str, Any]:
        cfg = app_config(truth, video, folder, "auto", True)
        cfg["alerts"] = []
        return cfg

    host_cost.camera_config = config  # the defaults' camera, not the capacity benchmark's INT8 at 320
    truth = json.loads(truth_path.read_text())
    result = host_cost.measure(video, truth, folder, scripted_frames=0)
    frames = result["frames"]
    stages = {k: round(sum(p[k] for p in result["phases"].values()) / frames, 4) for k in STAGES}
    return {"frames": frames, "stages_ms": stages, "gating": result["gating"]}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    video, truth, folder = Path(spec["video"]), Path(spec["truth"]), Path(spec["folder"])
    name = variant_of(spec["contender"])
    if name in ANCHORS:
        return run_ultralytics(video, folder, openvino=name == "ultralytics-openvino")
    if name == "host-stages":
        return run_host_stages(video, truth, folder)
    v = APP_VARIANTS[name]
    return run_app(video, truth, folder, v["precision"], v["motion"], v.get("backend"))


def spawn(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one contender in a fresh interpreter (its own resource usage, no warm caches); ``spec["pythonpath"]``
    goes first on its ``PYTHONPATH`` (the sources of ``--before``), ``spec["cache"]`` is its ``$CAMPUSGUARD_CACHE``."""
    env = os.environ.copy()
    if spec.get("pythonpath"):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (spec["pythonpath"], env.get("PYTHONPATH")) if p)
    if spec.get("cache"):
        env["CAMPUSGUARD_CACHE"] = spec["cache"]
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, env=env
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{spec['contender']} on {spec['scene']} failed (rc {proc.returncode}): {proc.stderr[-2000:]}"
        )
    out: dict[str, Any] = json.loads(lines[-1])
    return out


# -- the parent --------------------------------------------------------------------------------------------
def make_scenes(args: argparse.Namespace, folder: Path) -> dict[str, dict[str, Any]]:
    from campusguard.data.synth.video import generate_video

    scenes = {}
    for name, seed, seconds, idle in (
        ("busy", args.busy_seed, args.busy_s, 0.0),
        ("idle", args.idle_seed, args.idle_s, args.idle_fraction),
    ):
        truth = generate_video(seed, folder / name, seconds=seconds, name=f"{name}-seed{seed}", idle_fraction=idle)
        incidents = ", ".join(f"{i['kind']}@{i['start_s']:.0f}s" for i in truth.to_dict()["incidents"])
        scenes[name] = {
            "seed": seed,
            "seconds": seconds,
            "idle_fraction": idle,
            "frames": truth.num_frames,
            "active_windows_s": truth.active_windows,
            "incidents": len(truth.incidents),
            "video": str(folder / name / truth.video),
            "truth": str(folder / name / f"{name}-seed{seed}.json"),
        }
        print(f"[cost] scene {name}: seed {seed}, {seconds:g} s, idle {idle:.0%}; incidents {incidents}", flush=True)
    return scenes


def summarise(rows: list[dict[str, Any]], scenes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Medians per (scene, contender) and the ratios of each round, then their medians; an app contender that
    also ran as ``NAME@before`` gets its ratios to that run too (``fps_vs_before``, ``cpu_saving_vs_before``)."""
    out: dict[str, Any] = {}
    present = list(dict.fromkeys(r["contender"] for r in rows))
    contenders = [c for c in (*CONTENDERS, *present) if c in present]
    contenders = list(dict.fromkeys(contenders))
    apps = [c for c in contenders if c not in ANCHORS]
    for scene, info in scenes.items():
        per: dict[str, Any] = {}
        for c in contenders:
            rs = [r for r in rows if r["scene"] == scene and r["contender"] == c]
            if not rs:
                continue
            cps = [r["cpu_s"] / info["seconds"] * 3600 for r in rs]
            fps = [r["frames"] / r["wall_s"] for r in rs]
            entry: dict[str, Any] = {
                "runs": len(rs),
                "core_s_per_camera_hour": round(statistics.median(cps), 1),
                "core_ms_per_frame": round(statistics.median(r["cpu_s"] * 1000 / r["frames"] for r in rs), 2),
                "processed_fps": round(statistics.median(fps), 2),
            }
            if c not in ANCHORS:
                entry |= {
                    "startup_cpu_s": round(statistics.median(r["startup_cpu_s"] for r in rs), 2),
                    "f1": [round(r["f1"], 3) for r in rs],
                    "tp_fp_fn": [[r["tp"], r["fp"], r["fn"]] for r in rs],
                    "detector_images_per_frame": round(rs[0]["detector_images"] / rs[0]["frames"], 3),
                    "frames_skipped": rs[0]["frames_skipped"],
                    "frames_gate_busy": rs[0]["frames_gate_busy"],
                    "gate_ms_per_frame": None
                    if rs[0]["gate_ms_per_frame"] is None
                    else round(statistics.median(r["gate_ms_per_frame"] for r in rs), 3),
                    "precision_log": rs[0]["precision_log"],
                }
            per[c] = entry
        ratios: dict[str, Any] = {}
        pairs = [(anchor, "ultralytics" + ("" if anchor == "ultralytics" else "_openvino")) for anchor in ANCHORS]
        pairs += [(f"{c}{BEFORE}", "before") for c in apps if not c.endswith(BEFORE)]
        for base, label in pairs:
            for c in [*apps, *ANCHORS] if label != "before" else [base.removesuffix(BEFORE)]:
                if c == base:
                    continue
                fps_r, cpu_r = [], []
                for rnd in sorted({r["round"] for r in rows}):
                    u = next((r for r in rows if (r["scene"], r["contender"], r["round"]) == (scene, base, rnd)), None)
                    a = next((r for r in rows if (r["scene"], r["contender"], r["round"]) == (scene, c, rnd)), None)
                    if u and a:
                        fps_r.append((a["frames"] / a["wall_s"]) / (u["frames"] / u["wall_s"]))
                        cpu_r.append((u["cpu_s"] / u["frames"]) / (a["cpu_s"] / a["frames"]))
                if fps_r:
                    ratios.setdefault(c, {}).update(
                        {
                            f"fps_vs_{label}": [round(x, 2) for x in fps_r],
                            f"cpu_saving_vs_{label}": [round(x, 2) for x in cpu_r],
                            f"fps_vs_{label}_median": round(statistics.median(fps_r), 2),
                            f"cpu_saving_vs_{label}_median": round(statistics.median(cpu_r), 2),
                        }
                    )
        out[scene] = {"contenders": per, "ratios": ratios}
    return out


def _commit() -> str | None:
    """The checkout's commit (with ``-dirty`` when it has changes), or None outside git."""
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "src", "benchmarks"], capture_output=True, text=True
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _engine_versions() -> dict[str, str]:
    import importlib.metadata
    import importlib.util

    packages = ("onnxruntime", "openvino", "ultralytics")
    return {p: importlib.metadata.version(p) for p in packages if importlib.util.find_spec(p) is not None}


def cpu_flags_note() -> str:
    from campusguard.doctor import cpu_name
    from campusguard.precision import INT8_CPU_FLAGS

    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    have = sorted(flags & set(INT8_CPU_FLAGS))
    bf16 = sorted(flags & {"avx512_bf16", "amx_bf16"})
    return (
        f"{cpu_name()}; INT8 instructions: {', '.join(have) if have else 'none (no AVX-512 VNNI / AVX-VNNI / AMX)'}; "
        f"BF16: {', '.join(bf16) if bf16 else 'none'}"
    )


def write_markdown(doc: dict[str, Any], path: Path) -> None:
    lines = [
        "# Cost per camera: the app against Ultralytics' ONNX and OpenVINO predict loops",
        "",
        f"`{doc['command']}` ({doc['created_utc']}).",
        "",
        f"CPU: {doc['cpu']}; {doc['logical_cores']} logical cores; load average (1 min) at the start "
        f"{doc.get('load_average_start', '?')}, at the end {doc['load_average']}; engines {doc.get('engines', {})}.",
        f"{doc['notes'] or ''}",
        "",
        "Model: the bundled `campusguard-default.onnx` (and its INT8 variant), imgsz 480 (the example config), "
        "conf 0.25, IoU 0.7. Core-seconds per camera-hour = the process's CPU seconds (all threads, getrusage) over the "
        "loop / video seconds x 3600; processed fps = frames / wall seconds of the loop. Each contender ran in its own "
        "process, interleaved, per round; ratios are taken within a round. One-time set-up is left out on both sides "
        "(Ultralytics warmed up on one frame; the app's start-up, model load and tracker import, in its own column).",
        "",
    ]
    for scene, info in doc["scenes"].items():
        res = doc["results"][scene]
        lines += [
            f"## {scene}: seed {info['seed']}, {info['seconds']:g} s, {info['frames']} frames, idle "
            f"{info['idle_fraction']:.0%}, {info['incidents']} scripted incidents",
            "",
            "| contender | core-s / camera-hour | core-ms / frame | processed fps | incident F1 (TP/FP/FN) "
            "| detector images / frame | gate ms / gated frame | busy frames | start-up core-s |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        for c, e in res["contenders"].items():
            f1 = (
                "-"
                if c in ANCHORS
                else ", ".join(f"{f:.3f} ({t[0]}/{t[1]}/{t[2]})" for f, t in zip(e["f1"], e["tp_fp_fn"], strict=True))
            )
            dip = "1 (every frame)" if c in ANCHORS else f"{e['detector_images_per_frame']:.3f}"
            gate = "-" if c in ANCHORS or e["gate_ms_per_frame"] is None else f"{e['gate_ms_per_frame']:.3f}"
            busy = "-" if c in ANCHORS else str(e["frames_gate_busy"])
            start = "-" if c in ANCHORS else f"{e['startup_cpu_s']:.2f}"
            lines.append(
                f"| {c} | {e['core_s_per_camera_hour']:.0f} | {e['core_ms_per_frame']:.1f} | {e['processed_fps']:.1f} "
                f"| {f1} | {dip} | {gate} | {busy} | {start} |"
            )
        for anchor, label in (
            *((a, "ultralytics" + ("" if a == "ultralytics" else "_openvino")) for a in ANCHORS),
            (f"the same at `{doc.get('before', '?')}`", "before"),
        ):
            rows_here = {c: r for c, r in res["ratios"].items() if f"fps_vs_{label}" in r}
            if not rows_here:
                continue
            against = anchor if label == "before" else f"`{anchor}`"
            lines += [
                "",
                f"| against {against} | fps / {label.replace('_', '-')} (per round) | CPU saving x (per round) |",
                "| --- | --- | --- |",
            ]
            for c, r in rows_here.items():
                fps, cpu = r[f"fps_vs_{label}"], r[f"cpu_saving_vs_{label}"]
                lines.append(
                    f"| {c} | **{r[f'fps_vs_{label}_median']:.2f}** ({', '.join(map(str, fps))}) "
                    f"| **{r[f'cpu_saving_vs_{label}_median']:.2f}** ({', '.join(map(str, cpu))}) |"
                )
        lines.append("")
        for c, e in res["contenders"].items():
            if e.get("precision_log"):
                lines.append(f"- {c}: {e['precision_log']}")
        lines.append("")
    hc = doc.get("host_cost")
    if hc:
        st = hc["stages_ms"]
        lines += [
            "## Host stages (app defaults on the idle scene, one stage at a time)",
            "",
            "core-ms per frame: "
            + ", ".join(f"{k} {v:.3f}" for k, v in st.items())
            + f"; gating: {json.dumps(hc['gating'])}. `campusguard plan --host-cost` reads this section.",
            "",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    ap.add_argument("--busy-seed", type=int, default=12, help="held-out seed of the busy scene (demo seeds are 0-3)")
    ap.add_argument("--busy-s", type=float, default=30.0, help="seconds of the busy scene")
    ap.add_argument("--idle-seed", type=int, default=14, help="held-out seed of the campus day")
    ap.add_argument("--idle-s", type=float, default=80.0, help="seconds of the campus day")
    ap.add_argument("--idle-fraction", type=float, default=0.75, help="quiet share of the campus day")
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated subset")
    ap.add_argument("--notes", default="", help="conditions of the run")
    ap.add_argument("--no-host-stages", action="store_true", help="skip the host-stage timing (plan --host-cost)")
    ap.add_argument("--before", default=None, metavar="REV", help="also run each app contender with the sources of REV")
    ap.add_argument(
        "--own-cache", action="store_true", help="a cache folder of this run (precision trial measured now)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    created = datetime.now(UTC).replace(microsecond=0).isoformat()
    load_start = round(os.getloadavg()[0], 2)
    contenders = [c for c in args.contenders.split(",") if c]
    bad = sorted(set(contenders) - set(CONTENDERS))
    if bad:
        ap.error(f"unknown contenders {bad}; choose from {', '.join(CONTENDERS)}")
    if args.before:
        args.before = resolve_rev(args.before)
        contenders = [x for c in contenders for x in ((c, f"{c}{BEFORE}") if c in APP_VARIANTS else (c,))]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cost-") as tmp:
        folder = Path(tmp)
        extra: dict[str, str] = {"cache": str(folder / "cache")} if args.own_cache else {}
        before_src = str(export_sources(args.before, folder / "before")) if args.before else None
        scenes = make_scenes(args, folder)
        for rnd in range(args.rounds):
            for scene, info in scenes.items():
                k = (rnd + len(rows)) % len(contenders)
                for c in contenders[k:] + contenders[:k]:  # rotated: no contender always first or last
                    run_dir = folder / f"r{rnd}-{scene}-{c}"
                    run_dir.mkdir()
                    spec = {**info, "scene": scene, "contender": c, "folder": str(run_dir), **extra}
                    if c.endswith(BEFORE):
                        spec["pythonpath"] = before_src
                    r = spawn(spec) | {"scene": scene, "contender": c, "round": rnd}
                    rows.append(r)
                    f1 = f", F1 {r['f1']:.3f}" if "f1" in r else ""
                    print(
                        f"[cost] round {rnd + 1} {scene:4s} {c:22s} {r['frames'] / r['wall_s']:6.1f} fps, "
                        f"{r['cpu_s'] * 1000 / r['frames']:6.1f} core-ms/frame{f1}",
                        flush=True,
                    )
        host = None
        if any(c in APP_VARIANTS for c in contenders) and not args.no_host_stages:
            run_dir = folder / "host-stages"
            run_dir.mkdir()
            host = spawn(
                {**scenes["idle"], "scene": "idle", "contender": "host-stages", "folder": str(run_dir), **extra}
            )
            print(f"[cost] host stages (idle scene, defaults): {host['stages_ms']}", flush=True)
    doc = {
        "schema_version": 1,
        "kind": COST_KIND,
        "created_utc": created,
        "command": "python benchmarks/cost.py " + shlex.join(sys.argv[1:]),
        "notes": args.notes or None,
        "before": args.before,
        "commit": _commit(),
        "cpu": cpu_flags_note(),
        "logical_cores": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "load_average_start": load_start,
        "engines": _engine_versions(),
        "imgsz": IMGSZ,
        "scenes": {k: {kk: vv for kk, vv in v.items() if kk not in ("video", "truth")} for k, v in scenes.items()},
        "results": summarise(rows, scenes),
        "runs": rows,
    }
    if host is not None:
        from campusguard.bench.host_cost import HOST_COST_KIND, HOST_COST_SCHEMA_VERSION, validate_host_cost
        from campusguard.doctor import cpu_name

        idle = scenes["idle"]
        doc["host_cost"] = {
            "schema_version": HOST_COST_SCHEMA_VERSION,
            "kind": HOST_COST_KIND,
            "created_utc": created,
            "command": doc["command"],
            "notes": f"measured by benchmarks/cost.py on its idle scene with the app's defaults; {args.notes}".strip(
                "; "
            ),
            "cpu": cpu_name(),
            "logical_cores": os.cpu_count(),
            "video": {
                "resolution_wh": [640, 360],
                "fps": 10,
                "codec": "mp4v",
                "frames": host["frames"],
                "description": f"campusguard demo seed {idle['seed']}, {idle['seconds']:g} s, idle "
                f"{idle['idle_fraction']:.0%} of the time",
            },
            "stages_ms": host["stages_ms"],
            "gating": {k: round(v, 4) for k, v in host["gating"].items()},
        }
        validate_host_cost(doc["host_cost"], "cost host_cost")
    print(json.dumps(doc["results"], indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        write_markdown(doc, args.out.with_suffix(".md"))
        print(f"[cost] wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
