"""The synthetic-only model warning: silent on CampusGuard's own synthetic video and data, loud elsewhere."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.models.resolve import DEFAULT_MODEL
from campusguard.models.synthetic_warning import (
    SYNTHETIC_MODEL_WARNING,
    is_synthetic_source,
    warn_if_synthetic_model_on_real,
)


@pytest.fixture(scope="module")
def synth_video(tmp_path_factory) -> Path:
    from campusguard.data.synth.video import generate_video

    out = tmp_path_factory.mktemp("synth")
    truth = generate_video(3, out, size_wh=(160, 96), seconds=1.0, fps=5, name="clip")
    return out / truth.video


@pytest.fixture(scope="module")
def synth_dataset_image(tmp_path_factory) -> Path:
    from campusguard.data.synth.dataset import write_data_yaml

    root = tmp_path_factory.mktemp("ds")
    write_data_yaml(root)
    image = root / "images" / "val" / "x.jpg"
    image.parent.mkdir(parents=True)
    cv2.imwrite(str(image), np.zeros((32, 32, 3), np.uint8))
    return image


def _warned(model, sources) -> tuple[bool, str]:
    out = io.StringIO()
    printed = warn_if_synthetic_model_on_real(model, sources, out)
    return printed, out.getvalue()


def test_warns_for_the_bundled_model_on_real_photos(assets_dir):
    printed, text = _warned(None, [assets_dir / "bus.jpg"])
    assert printed and text == SYNTHETIC_MODEL_WARNING + "\n"
    assert "`campusguard models pull yolov8n`, then `campusguard predict yolov8n SOURCE`" in text
    assert "fall-yolov8s" in text
    assert _warned(str(DEFAULT_MODEL), [assets_dir / "bus.jpg"])[0]  # the bundled file by path too


@pytest.mark.parametrize("source", [0, "rtsp://127.0.0.1/cam", "/no/such/file.mp4"])
def test_webcams_streams_and_unknown_files_are_real(source):
    assert not is_synthetic_source(source)
    assert _warned(None, [source])[0]


def test_silent_on_campusguard_synthetic_video_and_data(synth_video, synth_dataset_image):
    assert is_synthetic_source(synth_video) and is_synthetic_source(synth_dataset_image)
    assert is_synthetic_source(synth_dataset_image.parent)  # the folder too
    assert _warned(None, [synth_video, synth_dataset_image]) == (False, "")
    # one real camera among synthetic ones is enough to warn
    assert _warned(None, [synth_video, 0])[0]


def test_a_synthetic_looking_name_is_not_enough(tmp_path):
    fake = tmp_path / "campus-seed0.mp4"
    fake.write_bytes(b"\0")
    (tmp_path / "campus-seed0.json").write_text('{"schema": "something else"}')
    assert not is_synthetic_source(fake)


def test_silent_with_real_weights(assets_dir, tmp_path):
    assert _warned("fall-yolov8s", [assets_dir / "bus.jpg"]) == (False, "")
    assert _warned(tmp_path / "yolov8n.onnx", [assets_dir / "bus.jpg"]) == (False, "")


def test_predict_cli_prints_the_warning_once(assets_dir, tmp_path, synth_video):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "campusguard.cli.main", "predict", *args, "--out", str(tmp_path), "--no-save-media"],
            capture_output=True,
            text=True,
            timeout=600,
        )

    real = run(str(assets_dir / "bus.jpg"))
    assert real.returncode == 0, real.stderr
    assert real.stderr.count(SYNTHETIC_MODEL_WARNING) == 1
    own = run(str(synth_video))
    assert own.returncode == 0, own.stderr
    assert SYNTHETIC_MODEL_WARNING not in own.stderr
