"""doctor, predict and export through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", *args], capture_output=True, text=True, timeout=600
    )


def test_doctor_json_reports_providers_and_verdicts():
    proc = run_cli("doctor", "--json", "--no-torch")
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert "CPUExecutionProvider" in env["onnxruntime"]["providers"]
    assert any(v["backend"].startswith("ONNX Runtime") for v in env["verdicts"])
    assert env["cpu"]["logical_cores"] >= 1


def test_doctor_invalid_device_is_one_line():
    from campusguard.backends.devices import list_gpus

    if list_gpus():
        pytest.skip("machine has GPUs")
    proc = run_cli("doctor", "--no-torch", "--device", "cuda:9")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: invalid device ordinal: cuda:9 requested")


@pytest.mark.torch
def test_predict_on_real_photo_writes_outputs(tmp_path, fall_onnx_dynamic, assets_dir):
    proc = run_cli("predict", str(fall_onnx_dynamic), str(assets_dir / "bus.jpg"), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    recs = json.loads((tmp_path / "predictions.json").read_text())
    assert len(recs) == 1 and len(recs[0]["detections"]) >= 3
    assert (tmp_path / "bus.jpg").is_file()
    assert len((tmp_path / "labels" / "bus.txt").read_text().splitlines()) == len(recs[0]["detections"])


@pytest.mark.torch
def test_predict_video_streams_every_frame(tmp_path, fall_onnx_dynamic, assets_dir):
    import cv2

    img = cv2.imread(str(assets_dir / "zidane.jpg"))
    img = cv2.resize(img, (320, 192))
    video = tmp_path / "clip.mp4"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (320, 192))
    for _ in range(5):
        w.write(img)
    w.release()
    proc = run_cli(
        "predict", str(fall_onnx_dynamic), str(video), "--imgsz", "320", "--batch", "2", "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 0, proc.stderr
    recs = json.loads((tmp_path / "o" / "predictions.json").read_text())
    assert [r["frame"] for r in recs] == [0, 1, 2, 3, 4]
    cap = cv2.VideoCapture(str(tmp_path / "o" / "clip.mp4"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 5


@pytest.mark.torch
@pytest.mark.slow
def test_export_fp16_and_int8_with_parity(tmp_path, fall_onnx_static, assets_dir):
    proc = run_cli(
        "export", str(fall_onnx_static), "--half", "--int8", "--data", str(assets_dir), "--out", str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    fp16 = next(line for line in lines if ".fp16.onnx" in line)
    int8 = next(line for line in lines if ".int8.onnx" in line)
    assert "100.0%" in fp16  # every FP32 box kept in FP16
    iou16 = float(fp16.split("mean matched IoU ")[1].split(",")[0])
    assert iou16 > 0.99
    iou8 = float(int8.split("mean matched IoU ")[1].split(",")[0])
    assert iou8 > 0.85
    sizes = {p.name: p.stat().st_size for p in tmp_path.glob("*.onnx")}
    small8 = next(v for k, v in sizes.items() if "int8" in k)
    assert small8 < fall_onnx_static.stat().st_size / 3


def test_export_int8_without_data_is_one_line(tmp_path):
    proc = run_cli("export", "yolov8n.yaml", "--int8", "--out", str(tmp_path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: --int8 needs --data with calibration images"
