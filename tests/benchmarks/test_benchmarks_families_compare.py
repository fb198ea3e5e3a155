"""benchmarks/families_compare.py and benchmarks/incident_scores.py: arguments, pooling, summaries and
the report from known numbers, and one short end-to-end run of the script on the bundled model."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import families_compare as fc  # noqa: E402
import incident_scores as inc  # noqa: E402

from campusguard.models.resolve import default_model_path  # noqa: E402

# --- incident_scores ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("0-3", [0, 1, 2, 3]), ("0-3,7", [0, 1, 2, 3, 7]), ("10", [10]), (" 1 , 4-5 ", [1, 4, 5]), ("", [])],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert inc.parse_seeds(text) == seeds


@pytest.mark.parametrize(("text", "message"), [("a-3", "bad seed list"), ("5-2", "the end is before the start")])
def test_parse_seeds_errors(text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        inc.parse_seeds(text)


def test_seed_groups_leave_out_an_empty_group() -> None:
    assert inc.seed_groups("0-1", "") == [("demo", [0, 1])]
    assert inc.seed_groups("", "10") == [("held-out", [10])]


def test_pooled_sums_counts_and_scores_the_sums() -> None:
    rows = [{"tp": 3, "fp": 1, "fn": 0}, {"tp": 1, "fp": 0, "fn": 3}, {"tp": 0, "fp": 0, "fn": 0}]
    p = inc.pooled(rows)
    assert (p["tp"], p["fp"], p["fn"]) == (4, 1, 3)
    assert p["precision"] == pytest.approx(4 / 5) and p["recall"] == pytest.approx(4 / 7)
    assert p["f1"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 3))
    per_row = [2 * 3 / (2 * 3 + 1), 2 * 1 / (2 * 1 + 3), 1.0]  # a scenario with nothing to find and nothing raised: 1.0
    assert p["mean_f1"] == pytest.approx(sum(per_row) / 3) and p["min_f1"] == pytest.approx(min(per_row))


def test_pooled_with_a_prefix_and_no_rows() -> None:
    assert inc.pooled([{"fall_tp": 2, "fall_fp": 0, "fall_fn": 2}], prefix="fall_")["recall"] == 0.5
    with pytest.raises(ValueError, match="no rows"):
        inc.pooled([])


# --- arguments ---------------------------------------------------------------------------------


def test_parse_models_keeps_order() -> None:
    models = fc.parse_models("v8=a/best.onnx, y26=b/best.ONNX")
    assert list(models) == ["v8", "y26"] and models["y26"] == Path("b/best.ONNX")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a.onnx,b=b.onnx", "is not NAME=PATH"),
        ("=a.onnx,b=b.onnx", "is not NAME=PATH"),
        ("a=x.onnx,a=y.onnx", "given twice"),
        ("a=x.pt,b=y.onnx", "not an ONNX file"),
        ("a=x.onnx", "at least two models"),
    ],
)
def test_parse_models_errors(text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        fc.parse_models(text)


def test_parse_sizes() -> None:
    assert fc.parse_sizes("192x320,384x640,192x320") == [(192, 320), (384, 640)]
    assert fc.parse_sizes("320") == [(320, 320)]
    with pytest.raises(SystemExit, match="multiple of 32"):
        fc.parse_sizes("190x320")
    with pytest.raises(SystemExit, match="at least one"):
        fc.parse_sizes(",")


def test_default_sizes_are_what_the_demo_runs() -> None:
    """The demo's 640x360 frame at the example config's imgsz 480 runs at 288x480 (aspect-matched)."""
    from campusguard.app.demo import run_demo

    w, h = inspect.signature(run_demo).parameters["size_wh"].default
    assert (h, w) == fc.DEMO_FRAME_HW
    assert fc.demo_detector_settings()["imgsz"] == 480
    assert fc.default_sizes(480) == "288x480,384x640"
    assert fc.default_sizes(320) == "192x320,384x640"


def test_parse_args_defaults_and_bounds() -> None:
    args = fc.parse_args(["--models", "a=a.onnx,b=b.onnx"])
    assert args.sizes == [(288, 480), (384, 640)] and args.conf == 0.25 and args.threads == 1
    assert (args.seeds, args.held_out, args.seconds) == ("0-3", "10-19", 40.0)
    with pytest.raises(SystemExit):
        fc.parse_args(["--models", "a=a.onnx,b=b.onnx", "--rounds", "0"])


def test_rotated() -> None:
    assert [fc.rotated("abc", r) for r in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]


# --- summaries and the report ------------------------------------------------------------------


def _round(fps: float, post: float = 0.5) -> dict[str, float]:
    return {
        "fps": fps,
        "latency_ms": 1000 / fps,
        "preprocess_ms": 0.3,
        "inference_ms": 1000 / fps - 0.8,
        "postprocess_ms": post,
    }


def _samples() -> dict[fc.Contender, list[dict[str, float]]]:
    C = fc.Contender
    return {
        C("v8", "fp32", (192, 320)): [_round(50, 0.6), _round(40, 0.6), _round(60, 0.6)],
        C("v8", "int8", (192, 320)): [_round(100, 0.6), _round(60, 0.6), _round(90, 0.6)],
        C("y26", "fp32", (192, 320)): [_round(55, 0.1), _round(48, 0.1), _round(54, 0.1)],
        C("y26-classic", "fp32", (192, 320)): [_round(50, 0.4), _round(40, 0.4), _round(60, 0.4)],
        C("v8", "fp32", (384, 640)): [_round(20), _round(20), _round(20)],
    }


def test_summarise_throughput_medians_and_per_round_ratios() -> None:
    boxes = {c: 3.0 for c in _samples()}
    out = fc.summarise_throughput(_samples(), "v8", boxes, {"y26": "y26-classic"})
    assert [(c["model"], c["precision"], tuple(c["input_hw"])) for c in out] == [
        ("v8", "fp32", (192, 320)),
        ("y26", "fp32", (192, 320)),
        ("y26-classic", "fp32", (192, 320)),
        ("v8", "int8", (192, 320)),
        ("v8", "fp32", (384, 640)),
    ]
    by = {(c["model"], c["precision"], c["input_hw"][0]): c for c in out}
    v8, v8q, y26 = by["v8", "fp32", 192], by["v8", "int8", 192], by["y26", "fp32", 192]
    assert v8["fps"] == 50 and v8["vs_baseline"] is None and v8["vs_fp32"] is None
    assert v8q["fps"] == 90 and v8q["vs_fp32"] == pytest.approx(1.5)  # per round 2.0, 1.5, 1.5 (not 90 / 50)
    assert y26["vs_baseline"] == pytest.approx(1.1)  # 55/50, 48/40, 54/60 = 1.1, 1.2, 0.9
    assert y26["vs_classic_head"] == pytest.approx(1.1)
    assert y26["stages_ms"]["postprocess"] == pytest.approx(0.1) and y26["boxes_per_frame"] == 3.0
    assert by["y26-classic", "fp32", 192]["vs_classic_head"] is None


def _result() -> dict:
    """A result document as `main` builds it, with known numbers."""
    samples = _samples()
    models = [
        fc.Model("v8", Path("v8.onnx"), Path("v8.onnx"), "campusguard", (320, 320)).record(),
        fc.Model("y26", Path("y26.onnx"), Path("y26.pt"), "in-model", (320, 320)).record(),
        fc.Model("y26-classic", Path("c.onnx"), Path("c.onnx"), "campusguard", (320, 320), classic_of="y26").record(),
    ]
    metrics = {"v8": 0.70, "y26": 0.72, "y26-classic": 0.73}
    rows = [
        {"model": m, "group": g, "seed": s, "tp": tp, "fp": 0, "fn": 4 - tp, "f1": 0.0, "missed": [], "spurious": []}
        for m, tp in (("v8", 4), ("y26", 3), ("y26-classic", 2))
        for g, s in (("demo", 0), ("held-out", 10))
    ]
    return {
        "command": "python benchmarks/families_compare.py --models ...",
        "created_utc": "2026-12-02T00:00:00+00:00",
        "environment": {"cpu": "Test CPU", "logical_cpus": 2, "threads": 1, "onnxruntime": "1.0"},
        "models": models,
        "accuracy": {
            "data": "heldout/data.yaml",
            "images": 500,
            "imgsz": 320,
            "models": {
                m: {
                    "campusguard_fp32": {"map50_95": v, "map50": 0.9},
                    "ultralytics": {"map50_95": v - 0.001, "map50": 0.91},
                }
                for m, v in metrics.items()
            },
        },
        "throughput": {
            "frames": 16,
            "video_seed": 0,
            "rounds": 3,
            "iters": 20,
            "min_seconds": 1.0,
            "conf": 0.25,
            "other_processes_cpu_share": 0.1,
            "loadavg_start": 1.0,
            "loadavg_end": 1.2,
            "contenders": fc.summarise_throughput(samples, "v8", {c: 2.0 for c in samples}, {"y26": "y26-classic"}),
        },
        "f1": {
            "falls": False,
            "precision": "fp32",
            "seconds": 40.0,
            "groups": {"demo": [0], "held-out": [10]},
            "rows": rows,
            "summary": fc.summarise_groups(rows),
        },  # fmt: skip
    }


def test_summarise_groups_pools_per_model_and_group() -> None:
    summary = _result()["f1"]["summary"]
    assert list(summary) == ["v8", "y26", "y26-classic"] and list(summary["y26"]) == ["demo", "held-out"]
    assert summary["y26"]["demo"]["recall"] == 0.75 and summary["v8"]["held-out"]["f1"] == 1.0


def test_report_states_nms_post_processing_and_differences() -> None:
    text = fc.render_markdown(_result())
    assert text.startswith("# v8 vs y26 vs y26-classic:")
    assert "CPU: Test CPU (2 logical CPUs). ONNX Runtime 1.0, CPUExecutionProvider, 1 intra-op thread(s)" in text
    assert "| y26 | `y26.onnx` | in-model | final boxes (B, 300, 6) | 320x320 | `y26.pt` | `-` |" in text
    assert "| v8 | 0.7000 | 0.9000 | - | - | 0.6990 | 0.9100 | - | +0.10 |" in text
    assert "| 192x320 | int8 | v8 | 90.0 |" in text and "| 1.50x |" in text
    assert "| y26 | in-model | 192x320 | 0.100 | - | 2.0 |" in text
    assert (
        "- y26 (NMS in-model) against v8 (NMS campusguard): at 192x320 FP32 post-processing 0.100 ms against "
        "0.600 ms (-0.500 ms per frame), whole frame 1.10x the frames/s; mAP50-95 +2.00 points (campusguard val, FP32); "
        "demo pooled incident F1 0.857 against 1.000; held-out pooled incident F1 0.857 against 1.000." in text
    )
    assert (
        "- y26 (NMS in-model) against the same weights with the classic head, y26-classic (NMS campusguard): " in text
    )
    assert "| y26-classic | demo | 0 | 2 | 0 | 2 | 1.000 | 0.500 | 0.667 |" in text


@pytest.mark.slow
def test_end_to_end_on_the_bundled_model(tmp_path: Path) -> None:
    """Every stage of the script on the bundled model under two names, as small as it gets (no
    Ultralytics val, no INT8, one 3 s demo scenario): both models score the same."""
    from campusguard.data.synth.dataset import generate_dataset

    data = generate_dataset(tmp_path / "data", images=8, seed=1000, val_fraction=0.5).data_yaml
    model = default_model_path()
    out = tmp_path / "out" / "cmp"
    argv = [
        "--models", f"a={model},b={model}", "--data", str(data), "--sizes", "192x320", "--rounds", "1",
        "--iters", "1", "--min-seconds", "0", "--frames", "2", "--seeds", "0", "--held-out", "", "--seconds", "3",
        "--skip-ultralytics-val", "--skip-int8", "--work", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    assert fc.main(argv) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    acc = result["accuracy"]
    assert acc["images"] == 4 and acc["models"]["a"] == acc["models"]["b"]
    assert [c["model"] for c in result["throughput"]["contenders"]] == ["a", "b"]
    assert all(c["input_hw"] == [192, 320] and c["fps"] > 0 for c in result["throughput"]["contenders"])
    assert [(r["model"], r["group"], r["seed"]) for r in result["f1"]["rows"]] == [("a", "demo", 0), ("b", "demo", 0)]
    assert result["f1"]["summary"]["a"] == result["f1"]["summary"]["b"]
    assert "## Where NMS ran" in out.with_suffix(".md").read_text()
