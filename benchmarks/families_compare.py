"""Two or more trained detectors side by side (issue 16: a YOLO26n against the bundled YOLOv8n).

    python benchmarks/families_compare.py \\
        --models yolov8n=src/campusguard/models/assets/campusguard-default.onnx,yolo26n=/tmp/yolo26n/run/weights/best.onnx \\
        --out docs/results/families-yolo26n-vs-yolov8n

Each PATH is an ONNX export with Ultralytics' metadata (what `campusguard train` writes); a sibling
``.pt`` (``best.pt`` beside ``best.onnx``) is what Ultralytics' val loads when present, else it
runs the ONNX file. The first model is the baseline of every ratio. In one run, per model:

1. accuracy on the held-out synthetic split (`campusguard synth --images 1000 --videos 0 --seed 1000
   --val-fraction 0.5`, its val split, rendered into the work folder unless ``--data`` is given):
   mAP50-95 and mAP50 through `campusguard val` (FP32 and INT8) and through Ultralytics' val, with
   Ultralytics' predictions also scored by CampusGuard's COCO evaluator (as scripts/val_parity.py);
2. CPU throughput of the `Detector` (a 640x360 demo frame in, `Detections` out, batch 1), FP32 and
   INT8, at each ``--sizes`` input (default: what the demo's ``imgsz`` gives a 640x360 frame, and
   384x640). INT8 is made by CampusGuard's own quantisation exactly as the bundled INT8 file was
   (MODEL_CARD.md: 64 of 100 seed-2000 synthetic images, calibrated at the model's training size),
   for the bundled model too, so every model's INT8 comes from the same images.
   Contenders are interleaved, their order rotated every round; medians of per-round values;
3. incident precision, recall and F1 of `campusguard demo` (FP32) on the demo and held-out seeds,
   and with ``--falls`` on the same seeds' fall scenarios;
4. where NMS ran for each model (``ModelInfo.nms``) and the per-frame post-processing time.

``--classic-head`` adds, for every end-to-end model with a sibling ``.pt``, the same weights
exported with the classic head (NMS in CampusGuard) as ``NAME-classic``: what dropping NMS
bought, with everything else equal.

Short runs: ``--seeds 0 --held-out 10 --seconds 10 --rounds 1 --data small/data.yaml``,
``--skip-f1``, ``--skip-ultralytics-val``, ``--sizes 192x320``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")

from incident_scores import demo_row, fall_row, pooled, seed_groups  # noqa: E402  (benchmarks/ is on the path)


@dataclass(frozen=True)
class SynthSet:
    """What `campusguard synth --images N --videos 0 --seed S --val-fraction F` renders."""

    images: int
    seed: int
    val_fraction: float


HELDOUT = SynthSet(images=1000, seed=1000, val_fraction=0.5)
"""The held-out split of MODEL_CARD.md (its val half, 500 images)."""
CALIBRATION = SynthSet(images=100, seed=2000, val_fraction=0.0)
"""The calibration set of the bundled INT8 file (its train split)."""
DEMO_FRAME_HW = (360, 640)
"""The demo's video frame (`run_demo`'s ``size_wh`` 640x360)."""
FRAMES_VIDEO_SEED = 0
"""The demo video whose frames are timed (demo seed 0)."""
PRECISIONS = ("fp32", "int8")
F1_PRECISION: Final = "fp32"
"""The detector precision of the incident runs: the same for every model (``auto`` would give the
bundled model its shipped INT8 file on VNNI/AMX CPUs and a model without one FP32)."""


# ---------------------------------------------------------------------------------------------
# pure pieces: arguments, the round order, summaries, the report


def parse_models(text: str) -> dict[str, Path]:
    """``"a=x.onnx,b=y.onnx"`` -> ``{"a": Path("x.onnx"), "b": Path("y.onnx")}``, in order.

    Raises:
        SystemExit: an entry without ``NAME=``, an empty or repeated name, a PATH that is not
            ``.onnx``, or fewer than two models.
    """
    models: dict[str, Path] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, sep, path = entry.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise SystemExit(f"--models: {entry!r} is not NAME=PATH")
        if name in models:
            raise SystemExit(f"--models: the name {name!r} is given twice")
        if Path(path).suffix.lower() != ".onnx":
            raise SystemExit(
                f"--models: {path} is not an ONNX file; give the export (a sibling .pt is found by itself)"
            )
        models[name] = Path(path)
    if len(models) < 2:
        raise SystemExit(f"--models: give at least two models to compare, as NAME=PATH,NAME=PATH (got {text!r})")
    return models


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"192x320,384x640"`` -> ``[(192, 320), (384, 640)]`` (height first); duplicates dropped."""
    from campusguard.errors import InvalidInputError
    from campusguard.models.info import check_imgsz

    try:
        sizes = [check_imgsz(s, name="--sizes") for s in filter(None, (p.strip() for p in text.split(",")))]
    except InvalidInputError as exc:
        raise SystemExit(str(exc)) from None
    if not sizes:
        raise SystemExit("--sizes: give at least one HxW input size")
    return list(dict.fromkeys(sizes))


def demo_detector_settings() -> dict[str, Any]:
    """The bundled example config's detector section (the demo's ``imgsz`` and ``conf``)."""
    import yaml

    from campusguard.app.demo import EXAMPLE_CONFIG

    return dict(yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))["detector"])


def default_sizes(demo_imgsz: int) -> str:
    """The input a 640x360 demo frame gets at the demo's ``imgsz`` (aspect-matched), and at 640."""
    from campusguard.ops.preprocess import fit_shape

    sizes = [fit_shape(DEMO_FRAME_HW, (s, s)) for s in (demo_imgsz, 640)]
    return ",".join(f"{h}x{w}" for h, w in dict.fromkeys(sizes))


def sibling_pt(onnx: Path) -> Path | None:
    """The checkpoint the export was made from (``best.pt`` beside ``best.onnx``), if there is one."""
    pt = onnx.with_suffix(".pt")
    return pt if pt.is_file() else None


@dataclass(frozen=True)
class Contender:
    """One timed configuration."""

    model: str
    precision: str
    input_hw: tuple[int, int]

    @property
    def label(self) -> str:
        return f"{self.model} {self.precision} {self.input_hw[0]}x{self.input_hw[1]}"


def rotated(items: Sequence[Any], round_index: int) -> list[Any]:
    """``items`` started at position ``round_index`` (mod length): no contender always runs after the same one."""
    k = round_index % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def summarise_throughput(
    samples: dict[Contender, list[dict[str, float]]],
    baseline: str,
    boxes: dict[Contender, float],
    classic_of: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per contender: medians over rounds of frames/s, latency and stage times, and the median of the
    per-round frames/s ratios against the baseline model (same precision and input), FP32 (same
    model and input) and, for an end-to-end model, its classic-head variant. Sorted by input,
    precision, then model, each in the order of ``samples``.

    Args:
        samples: per contender, one dict per round with ``fps``, ``latency_ms``, ``preprocess_ms``,
            ``inference_ms`` and ``postprocess_ms``; every contender has the same number of rounds.
        baseline: the model every other is compared with.
        boxes: mean detections per frame of each contender.
        classic_of: end-to-end model name -> the name of the same weights with the classic head.
    """
    classic_of = classic_of or {}

    def ratio(a: Contender, b: Contender) -> float | None:
        if a not in samples or b not in samples:
            return None
        pairs = zip(samples[a], samples[b], strict=True)
        return statistics.median(x["fps"] / y["fps"] for x, y in pairs)

    order = [list(dict.fromkeys(getattr(c, f) for c in samples)) for f in ("input_hw", "precision", "model")]
    out = []
    for c in sorted(
        samples,
        key=lambda c: [o.index(getattr(c, f)) for o, f in zip(order, ("input_hw", "precision", "model"), strict=True)],
    ):
        rounds = samples[c]
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        out.append(
            {
                "model": c.model,
                "precision": c.precision,
                "input_hw": list(c.input_hw),
                "fps": med["fps"],
                "fps_rounds": [r["fps"] for r in rounds],
                "latency_ms": med["latency_ms"],
                "stages_ms": {k: med[f"{k}_ms"] for k in ("preprocess", "inference", "postprocess")},
                "boxes_per_frame": boxes.get(c),
                "vs_baseline": None if c.model == baseline else ratio(c, replace(c, model=baseline)),
                "vs_fp32": None if c.precision == "fp32" else ratio(c, replace(c, precision="fp32")),
                "vs_classic_head": ratio(c, replace(c, model=classic_of[c.model])) if c.model in classic_of else None,
            }
        )
    return out


def summarise_groups(rows: Sequence[dict[str, Any]], prefixes: Sequence[str] = ("",)) -> dict[str, dict[str, Any]]:
    """Pooled scores per model and seed group: ``{model: {group or group/prefix: pooled}}``."""
    out: dict[str, dict[str, Any]] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        out[model] = {}
        for group in dict.fromkeys(r["group"] for r in mine):
            g = [r for r in mine if r["group"] == group]
            for prefix in prefixes:
                key = group if not prefix else f"{group}/{prefix.rstrip('_')}"
                out[model][key] = pooled(g, prefix=prefix)
    return out


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def _seed_text(seeds: Sequence[int]) -> str:
    return ",".join(map(str, seeds))


def render_markdown(result: dict[str, Any]) -> str:
    """The report of a result document (what `main` writes as JSON)."""
    models = result["models"]
    names = [m["name"] for m in models]
    base = names[0]
    env = result["environment"]
    lines = [
        f"# {' vs '.join(names)}: accuracy, CPU throughput, incident F1, NMS",
        "",
        f"`{result['command']}`",
        "",
        f"CPU: {env['cpu']} ({env['logical_cpus']} logical CPUs). ONNX Runtime {env['onnxruntime']}, "
        f"CPUExecutionProvider, {env['threads']} intra-op thread(s), spinning off. Baseline of every ratio: {base}. "
        f"Measured {result['created_utc']}.",
        "",
        "## Models",
        "",
        "| model | ONNX file | NMS | network output | trained at | Ultralytics val loads | INT8 file |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in models:
        lines.append(
            f"| {m['name']} | `{m['onnx']}` | {m['nms']} | {m['output']} | {m['imgsz_hw'][0]}x{m['imgsz_hw'][1]} | "
            f"`{m['ultralytics_model']}` | `{m['int8'] or '-'}` |"
        )
    acc = result.get("accuracy")
    if acc:
        lines += [
            "",
            f"## Accuracy on the held-out split ({acc['images']} images of `{acc['data']}`, imgsz {acc['imgsz']})",
            "",
            "conf 0.001, IoU 0.7, 300 boxes per image, batch 1, CPU. campusguard val: CampusGuard's `Detector` and "
            "COCO AP (faster-coco-eval); Ultralytics val: its predictions and its AP; the last two columns: "
            "Ultralytics' predictions scored by CampusGuard's COCO AP, and campusguard val FP32 minus Ultralytics "
            "val in mAP50-95 points (see scripts/val_parity.py for what each difference means).",
            "",
            "| model | campusguard mAP50-95 | mAP50 | INT8 mAP50-95 | INT8 mAP50 | Ultralytics mAP50-95 | mAP50 "
            "| Ultralytics preds, COCO mAP50-95 | campusguard - Ultralytics (pts) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in names:
            a = acc["models"][name]
            cg, q, ul, ulc = (
                a["campusguard_fp32"],
                a.get("campusguard_int8"),
                a.get("ultralytics"),
                a.get("ultralytics_coco"),
            )
            diff = None if ul is None else 100 * (cg["map50_95"] - ul["map50_95"])
            lines.append(
                f"| {name} | {cg['map50_95']:.4f} | {cg['map50']:.4f} | {_num(q and q['map50_95'], '.4f')} | "
                f"{_num(q and q['map50'], '.4f')} | {_num(ul and ul['map50_95'], '.4f')} | {_num(ul and ul['map50'], '.4f')} | "
                f"{_num(ulc and ulc['map50_95'], '.4f')} | {_num(diff, '+.2f')} |"
            )
    thr = result.get("throughput")
    if thr:
        lines += [
            "",
            "## CPU throughput: one 640x360 demo frame in, `Detections` out (batch 1)",
            "",
            f"`Detector` with pre-processing, inference and post-processing, conf {thr['conf']}, on {thr['frames']} "
            f"frames of demo video seed {thr['video_seed']}. {thr['rounds']} rounds; in each, every contender runs at "
            f"least {thr['iters']} frames and {thr['min_seconds']:g} s, in an order rotated every round. Medians of "
            "per-round values; a ratio is the median of per-round frames/s ratios. While timing, other processes "
            f"used {100 * thr['other_processes_cpu_share']:.0f}% of the CPU (load average {thr['loadavg_start']:.1f} "
            f"-> {thr['loadavg_end']:.1f}).",
            "",
            f"| input | precision | model | frames/s | ms/frame | pre ms | inference ms | post ms | boxes/frame | vs {base} | vs FP32 |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for c in thr["contenders"]:
            s = c["stages_ms"]
            lines.append(
                f"| {c['input_hw'][0]}x{c['input_hw'][1]} | {c['precision']} | {c['model']} | {c['fps']:.1f} | "
                f"{c['latency_ms']:.2f} | {s['preprocess']:.2f} | {s['inference']:.2f} | {s['postprocess']:.3f} | "
                f"{_num(c['boxes_per_frame'], '.1f')} | {_num(c['vs_baseline'], '.2f')}{'' if c['vs_baseline'] is None else 'x'} | "
                f"{_num(c['vs_fp32'], '.2f')}{'' if c['vs_fp32'] is None else 'x'} |"
            )
        lines += ["", *_nms_section(result, base)]
    for key, title in (("f1", "Incident scores"), ("falls", "Fall scenarios")):
        sec = result.get(key)
        if sec:
            lines += ["", *_incident_section(sec, title)]
    return "\n".join(lines) + "\n"


def _nms_section(result: dict[str, Any], base: str) -> list[str]:
    """Where NMS ran, the post-processing time per frame, and each model's differences with the baseline."""
    models = {m["name"]: m for m in result["models"]}
    contenders = result["throughput"]["contenders"]
    lines = [
        "## Where NMS ran, and what post-processing cost",
        "",
        "Post-processing is the `Detector`'s stage after the network returns: with NMS `campusguard`, the decode "
        "of the raw `(B, 4+nc, N)` head, CampusGuard's NMS and the scaling to frame pixels; with NMS `in-model`, "
        "the confidence filter and scaling of the model's final `(B, 300, 6)` boxes (its top-k runs inside "
        "inference time).",
        "",
        "| model | NMS | input | post ms FP32 | post ms INT8 | boxes/frame FP32 |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    by_key = {(c["model"], c["precision"], tuple(c["input_hw"])): c for c in contenders}
    sizes = list(dict.fromkeys(tuple(c["input_hw"]) for c in contenders))
    for name, m in models.items():
        for hw in sizes:
            f, q = by_key.get((name, "fp32", hw)), by_key.get((name, "int8", hw))
            lines.append(
                f"| {name} | {m['nms']} | {hw[0]}x{hw[1]} | {_num(f and f['stages_ms']['postprocess'])} | "
                f"{_num(q and q['stages_ms']['postprocess'])} | {_num(f and f['boxes_per_frame'], '.1f')} |"
            )
    lines.append("")
    lines += [_difference(result, name, base, "vs_baseline") for name in models if name != base]
    for name, m in models.items():
        if m["classic_of"]:
            lines.append(_difference(result, m["classic_of"], name, "vs_classic_head", same_weights=True))
    return lines


def _difference(result: dict[str, Any], name: str, ref: str, ratio_key: str, same_weights: bool = False) -> str:
    """One sentence: ``name`` against ``ref`` in FP32 post-processing time and frames/s at each input,
    mAP50-95 and pooled incident F1, from the measured numbers of ``result``."""
    models = {m["name"]: m for m in result["models"]}
    by_key = {(c["model"], c["precision"], tuple(c["input_hw"])): c for c in result["throughput"]["contenders"]}
    parts = []
    for hw in dict.fromkeys(tuple(c["input_hw"]) for c in result["throughput"]["contenders"]):
        f, b = by_key.get((name, "fp32", hw)), by_key.get((ref, "fp32", hw))
        if f is None or b is None:
            continue
        pf, pb = f["stages_ms"]["postprocess"], b["stages_ms"]["postprocess"]
        parts.append(
            f"at {hw[0]}x{hw[1]} FP32 post-processing {pf:.3f} ms against {pb:.3f} ms ({pf - pb:+.3f} ms per frame), "
            f"whole frame {_num(f[ratio_key], '.2f')}x the frames/s"
        )
    acc = result.get("accuracy")
    if acc:
        d = 100 * (
            acc["models"][name]["campusguard_fp32"]["map50_95"] - acc["models"][ref]["campusguard_fp32"]["map50_95"]
        )
        parts.append(f"mAP50-95 {d:+.2f} points (campusguard val, FP32)")
    f1 = result.get("f1")
    if f1:
        mine, theirs = f1["summary"][name], f1["summary"][ref]
        parts += [
            f"{g} pooled incident F1 {mine[g]['f1']:.3f} against {theirs[g]['f1']:.3f}" for g in mine if g in theirs
        ]
    what = "the same weights with the classic head, " if same_weights else ""
    return (
        f"- {name} (NMS {models[name]['nms']}) against {what}{ref} (NMS {models[ref]['nms']}): "
        + "; ".join(parts)
        + "."
    )


def _incident_section(sec: dict[str, Any], title: str) -> list[str]:
    rows, summary = sec["rows"], sec["summary"]
    seeds = {g: _seed_text(s) for g, s in sec["groups"].items()}
    lines = [
        f"## {title}: `campusguard demo`{' with scripted falls' if sec.get('falls') else ''}, detector {sec['precision'].upper()}",
        "",
        f"{sec['seconds']:g} s scenarios at 640x360, 10 fps; rule tuning from the bundled example config for every "
        "seed and model. Pooled: counts summed over the seeds of a group.",
        "",
        "| model | group | seeds | TP | FP | FN | precision | recall | pooled F1 | mean F1 | min F1 |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, groups in summary.items():
        for key, s in groups.items():
            lines.append(
                f"| {model} | {key} | {seeds[key.split('/')[0]]} | {s['tp']} | {s['fp']} | {s['fn']} | {s['precision']:.3f} | "
                f"{s['recall']:.3f} | {s['f1']:.3f} | {s['mean_f1']:.3f} | {s['min_f1']:.3f} |"
            )
    if not sec.get("falls"):
        lines += [
            "",
            "| model | group | seed | TP | FP | FN | F1 | missed | spurious |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
            *[
                f"| {r['model']} | {r['group']} | {r['seed']} | {r['tp']} | {r['fp']} | {r['fn']} | {r['f1']:.3f} | "
                f"{', '.join(r['missed'])} | {', '.join(r['spurious'])} |"
                for r in rows
            ],
        ]
    return lines


# ---------------------------------------------------------------------------------------------
# measurements


@dataclass(frozen=True)
class Model:
    """One model of the comparison: its FP32 export, what Ultralytics' val loads, its INT8 variant."""

    name: str
    onnx: Path
    ultralytics_model: Path
    nms: str
    imgsz_hw: tuple[int, int]
    int8: Path | None = None
    classic_of: str | None = None
    """For a ``NAME-classic`` variant: NAME, the end-to-end model whose weights it exports with the classic head."""

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "onnx": str(self.onnx),
            "ultralytics_model": str(self.ultralytics_model),
            "nms": self.nms,
            "output": "final boxes (B, 300, 6)" if self.nms == "in-model" else "raw (B, 4+nc, N)",
            "imgsz_hw": list(self.imgsz_hw),
            "int8": None if self.int8 is None else str(self.int8),
            "classic_of": self.classic_of,
        }


def load_model(name: str, onnx: Path) -> Model:
    """Check that ``onnx`` is a trained FP32 detector and read its facts."""
    from campusguard.detector import Detector
    from campusguard.errors import CampusGuardError

    if not onnx.is_file():
        raise SystemExit(f"--models: {name}={onnx}: no such file")
    try:
        info = Detector(onnx, device="cpu").info
    except CampusGuardError as exc:
        raise SystemExit(f"--models: {name}={onnx}: {exc}") from None
    if info.random_weights:
        raise SystemExit(f"--models: {name}={onnx} has random weights; compare trained models")
    if info.precision != "fp32":
        raise SystemExit(f"--models: {name}={onnx} is {info.precision}; give the FP32 export (INT8 is made here)")
    if info.imgsz_hw is None:
        raise SystemExit(f"--models: {name}={onnx} has no Ultralytics imgsz metadata (its training size)")
    return Model(name, onnx, sibling_pt(onnx) or onnx, info.nms, info.imgsz_hw)


def classic_head_variant(model: Model, work: Path) -> Model | None:
    """The same weights with the classic head (NMS in CampusGuard), for an end-to-end model with a ``.pt``."""
    from campusguard.models.export import export_onnx
    from campusguard.models.resolve import parse_model_ref

    if model.nms != "in-model":
        return None
    if model.ultralytics_model.suffix != ".pt":
        print(f"--classic-head: {model.name} has no sibling .pt to export the classic head from", file=sys.stderr)
        return None
    out = work / "classic" / f"{model.name}-{_file_key(model.ultralytics_model, model.imgsz_hw)}-classic.onnx"
    if not out.is_file():
        export_onnx(
            parse_model_ref(model.ultralytics_model), out, imgsz_hw=model.imgsz_hw, dynamic=True, end_to_end=False
        )
    return replace(load_model(f"{model.name}-classic", out), classic_of=model.name)


def rendered_split(out: Path, spec: SynthSet) -> Path:
    """``spec`` rendered into ``out`` (kept when already complete: data.yaml is written last); its data.yaml."""
    from campusguard.data.synth.dataset import generate_dataset

    data_yaml = out / "data.yaml"
    if not data_yaml.is_file():
        print(
            f"rendering {spec.images} synthetic images, seed {spec.seed}, into {out} ...", file=sys.stderr, flush=True
        )
        generate_dataset(out, images=spec.images, seed=spec.seed, val_fraction=spec.val_fraction)
    return data_yaml


def _file_key(path: Path, *extra: object) -> str:
    h = hashlib.sha1(path.read_bytes())
    h.update(repr(extra).encode())
    return h.hexdigest()[:10]


def make_int8(model: Model, work: Path, calibration: list[Path]) -> Path:
    """The model's INT8 variant made like the bundled one (`quantize_int8` at its training size), cached."""
    from campusguard.models.export import quantize_int8

    out = (
        work / "int8" / f"{model.name}-{_file_key(model.onnx, model.imgsz_hw, [str(p) for p in calibration])}.int8.onnx"
    )
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"quantising {model.name} to INT8 ...", file=sys.stderr, flush=True)
        quantize_int8(model.onnx, out, calibration, calib_hw=model.imgsz_hw)
    return out


def measure_accuracy(
    models: Sequence[Model], data_yaml: Path, imgsz: int | None, work: Path, ultralytics: bool
) -> dict[str, Any]:
    """mAP of every model on the val split of ``data_yaml``: campusguard val (FP32, INT8) and Ultralytics' val."""
    from campusguard.eval import load_yolo_dataset
    from campusguard.eval.ultralytics_val import metric_dict, score_ultralytics_predictions, ultralytics_val
    from campusguard.eval.validate import validate_model
    from campusguard.train.trainer import write_resolved_data_yaml

    sizes = {m.name: imgsz or max(m.imgsz_hw) for m in models}
    out: dict[str, Any] = {}
    for m in models:
        size = sizes[m.name]
        print(f"accuracy: {m.name} at imgsz {size} ...", file=sys.stderr, flush=True)
        row: dict[str, Any] = {
            "imgsz": size,
            "campusguard_fp32": metric_dict(validate_model(m.onnx, data_yaml, imgsz=size, device="cpu").metrics),
        }
        if m.int8 is not None:
            row["campusguard_int8"] = metric_dict(validate_model(m.int8, data_yaml, imgsz=size, device="cpu").metrics)
        if ultralytics:
            ul_work = work / "ultralytics" / m.name
            resolved = write_resolved_data_yaml(data_yaml, ul_work / "data.yaml")
            row["ultralytics"], pred_json = ultralytics_val(m.ultralytics_model, resolved, size, 1, ul_work)
            row["ultralytics_coco"] = score_ultralytics_predictions(pred_json, resolved)
        out[m.name] = row
    same = len(set(sizes.values())) == 1
    return {
        "data": str(data_yaml),
        "images": len(load_yolo_dataset(data_yaml, "val")),
        "imgsz": next(iter(sizes.values())) if same else "each model's training size",
        "models": out,
    }


def demo_frames(count: int, seed: int) -> list[Any]:
    """``count`` frames spread over a 40 s demo video of ``seed`` (640x360 BGR)."""
    import numpy as np

    from campusguard.data.synth.video import SynthVideo

    video = SynthVideo(seed, size_wh=(DEMO_FRAME_HW[1], DEMO_FRAME_HW[0]))
    idx = np.linspace(0, video.num_frames - 1, count).round().astype(int)
    return [video.frame(int(i))[0] for i in idx]


def measure_throughput(
    models: Sequence[Model],
    sizes: Sequence[tuple[int, int]],
    frames: Sequence[Any],
    *,
    rounds: int,
    iters: int,
    min_seconds: float,
    threads: int,
    conf: float,
) -> dict[str, Any]:
    """Interleaved timing of every model x precision x input size (see the module docstring)."""
    import onnxruntime as ort

    from campusguard.bench.memory import CpuShare
    from campusguard.bench.timing import run_timed
    from campusguard.detector import Detector

    detectors: dict[Contender, Detector] = {}
    for m in models:
        for precision in PRECISIONS:
            path = m.onnx if precision == "fp32" else m.int8
            if path is None:
                continue
            for hw in sizes:
                det = Detector(path, device="cpu", imgsz=hw, rect=False, conf=conf, threads=threads, spinning=False)
                got = det.input_hw(frames[0].shape[:2])
                if got != hw:
                    raise SystemExit(f"{m.name} {precision}: runs at {got}, not {hw} (a static input shape?)")
                detectors[Contender(m.name, precision, hw)] = det
    boxes = {}
    for c, det in detectors.items():  # warm-up, and the boxes each contender keeps (the NMS workload)
        boxes[c] = sum(len(det(f)) for f in frames) / len(frames)

    def caller(det: Detector) -> Callable[[int], tuple[float, float, float]]:
        def call(i: int) -> tuple[float, float, float]:
            det(frames[i % len(frames)])
            t = det.timings
            return (t.preprocess_ms, t.inference_ms, t.postprocess_ms)

        return call

    samples: dict[Contender, list[dict[str, float]]] = {c: [] for c in detectors}
    keys = list(detectors)
    load_start = os.getloadavg()[0]
    with CpuShare() as cpu:
        for r in range(rounds):
            for c in rotated(keys, r):
                run = run_timed(caller(detectors[c]), iters, min_seconds)
                stages = list(zip(*run.stages_ms, strict=True))
                samples[c].append(
                    {
                        "fps": run.iterations / run.seconds,
                        "latency_ms": statistics.median(run.latency_ms),
                        "preprocess_ms": statistics.median(stages[0]),
                        "inference_ms": statistics.median(stages[1]),
                        "postprocess_ms": statistics.median(stages[2]),
                    }
                )
            print(f"throughput round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return {
        "frames": len(frames),
        "video_seed": FRAMES_VIDEO_SEED,
        "rounds": rounds,
        "iters": iters,
        "min_seconds": min_seconds,
        "threads": threads,
        "conf": conf,
        "onnxruntime": ort.__version__,
        "other_processes_cpu_share": cpu.other_share,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg()[0],
        "contenders": summarise_throughput(
            samples, models[0].name, boxes, {m.classic_of: m.name for m in models if m.classic_of}
        ),
    }


def measure_incidents(
    models: Sequence[Model], groups: list[tuple[str, list[int]]], seconds: float, work: Path, falls: bool
) -> dict[str, Any]:
    """`campusguard demo` (or its fall scenarios) per seed and model, FP32; rows and pooled scores."""
    from campusguard.app.demo import run_demo

    if falls:
        from fall_scores import scores_end_to_end
    rows = []
    for group, seeds in groups:
        for seed in seeds:
            for m in models:
                t0 = time.perf_counter()
                folder = work / ("falls" if falls else "demo") / m.name
                if falls:
                    scores = scores_end_to_end(seed, seconds, str(m.onnx), folder, precision=F1_PRECISION)
                    row = fall_row(group, seed, scores, time.perf_counter() - t0)
                else:
                    r = run_demo(
                        seed=seed,
                        out_dir=folder / f"seed{seed}",
                        seconds=seconds,
                        model=str(m.onnx),
                        out=io.StringIO(),
                        precision=F1_PRECISION,
                    )
                    row = demo_row(group, seed, r.scores, time.perf_counter() - t0)
                rows.append({"model": m.name, **row})
                print(f"{'falls' if falls else 'demo'} {m.name} {group} seed {seed} done", file=sys.stderr, flush=True)
    return {
        "falls": falls,
        "precision": F1_PRECISION,
        "seconds": seconds,
        "groups": dict(groups),
        "rows": rows,
        "summary": summarise_groups(rows, ("fall_", "all_") if falls else ("",)),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    demo = demo_detector_settings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", required=True, type=parse_models, help="NAME=PATH,NAME=PATH (ONNX exports); first = baseline"
    )
    ap.add_argument(
        "--data", type=Path, default=None, help="data.yaml to score (default: the seed-1000 held-out split)"
    )
    ap.add_argument("--imgsz", type=int, default=None, help="val input size (default: each model's training size)")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes(default_sizes(int(demo["imgsz"]))),
                    help="throughput inputs HxW,... (default: the demo's aspect-matched input, and 384x640)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5, help="interleaved throughput rounds")
    ap.add_argument("--iters", type=int, default=20, help="frames per contender per round (at least)")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="seconds per contender per round (at least)")
    ap.add_argument("--frames", type=int, default=16, help="distinct demo frames cycled through while timing")
    ap.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads (0: one per physical core)")
    ap.add_argument("--conf", type=float, default=float(demo["conf"]), help="confidence threshold while timing")
    ap.add_argument("--seeds", default="0-3", help="demo scenarios")
    ap.add_argument("--held-out", default="10-19", help="scenarios not looked at while tuning")
    ap.add_argument("--seconds", type=float, default=40.0, help="length of each demo scenario")
    ap.add_argument("--skip-f1", action="store_true", help="no demo runs")
    ap.add_argument(
        "--falls", action="store_true", help="also the fall scenarios of the same seeds (even with --skip-f1)"
    )
    ap.add_argument("--skip-ultralytics-val", action="store_true", help="campusguard val only")
    ap.add_argument("--skip-int8", action="store_true", help="FP32 only (no quantisation)")
    ap.add_argument("--classic-head", action="store_true", help="add NAME-classic for end-to-end models with a .pt")
    ap.add_argument("--calib-images", type=int, default=64, help="INT8 calibration images (of 100 rendered)")
    ap.add_argument("--work", type=Path, default=None, help="work folder (rendered data, INT8 files); reused")
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    args = ap.parse_args(argv)
    for name in ("rounds", "iters", "frames", "calib_images"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.data is not None and not args.data.is_file():
        ap.error(f"--data {args.data}: no such file")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from campusguard.doctor import cpu_name
    from campusguard.models.export import pick_images

    started = dt.datetime.now(dt.UTC)
    work = args.work or Path(tempfile.mkdtemp(prefix="families-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    models = [load_model(name, path) for name, path in args.models.items()]
    if args.classic_head:
        models += [v for m in list(models) if (v := classic_head_variant(m, work)) is not None]
    if not args.skip_int8:
        calib_yaml = rendered_split(work / f"calibration-seed{CALIBRATION.seed}", CALIBRATION)
        calibration = pick_images(calib_yaml.parent / "images" / "train", args.calib_images)
        models = [replace(m, int8=make_int8(m, work, calibration)) for m in models]
    data_yaml = args.data or rendered_split(work / f"heldout-seed{HELDOUT.seed}", HELDOUT)

    result: dict[str, Any] = {
        "kind": "campusguard-families-compare",
        "command": "python benchmarks/families_compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "created_utc": started.isoformat(timespec="seconds"),
        "environment": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "threads": args.threads},
        "models": [m.record() for m in models],
    }
    result["accuracy"] = measure_accuracy(models, data_yaml, args.imgsz, work, not args.skip_ultralytics_val)
    result["throughput"] = measure_throughput(
        models, args.sizes, demo_frames(args.frames, FRAMES_VIDEO_SEED), rounds=args.rounds, iters=args.iters,
        min_seconds=args.min_seconds, threads=args.threads, conf=args.conf,
    )  # fmt: skip
    result["environment"]["onnxruntime"] = result["throughput"]["onnxruntime"]
    groups = seed_groups(args.seeds, args.held_out)
    if not args.skip_f1 and groups:
        result["f1"] = measure_incidents(models, groups, args.seconds, work, falls=False)
    if args.falls and groups:
        result["falls"] = measure_incidents(models, groups, args.seconds, work, falls=True)
    text = render_markdown(result)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
