"""Training on a GPU: NCCL/RCCL ranks of `campusguard.train.ddp`, AMP without Ultralytics' download."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.torch, pytest.mark.slow]


def test_nccl_rank_matches_cpu_gloo(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from campusguard.train.ddp import DDPRunConfig, run_ddp

    kw = {"steps": 2, "images_per_rank": 4, "accumulate": 2, "nc": 2, "depth": 0.33, "width": 0.0625}
    gpu = torch.load(run_ddp(DDPRunConfig(backend="nccl", **kw), 1, tmp_path / "nccl")[0], weights_only=False)
    cpu = torch.load(run_ddp(DDPRunConfig(backend="gloo", **kw), 1, tmp_path / "gloo")[0], weights_only=False)
    np.testing.assert_allclose(gpu["losses"], cpu["losses"], rtol=1e-3)
    for k, v in cpu["state_dict"].items():
        if v.dtype.is_floating_point:
            np.testing.assert_allclose(gpu["state_dict"][k].numpy(), v.numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


def test_gpu_training_with_amp_downloads_nothing(tmp_path: Path, draw_dataset) -> None:
    from ultralytics.utils import WEIGHTS_DIR

    from campusguard.train import train

    before = set(WEIGHTS_DIR.glob("*.pt")) if WEIGHTS_DIR.is_dir() else set()
    data = draw_dataset(tmp_path / "toy", n_train=32, n_val=8, size=128)
    r = train("yolov8n.yaml", data, epochs=1, imgsz=128, batch=8, device="0", amp=True, workers=0, out=tmp_path / "run")
    assert r.best_pt.is_file() and r.onnx is not None and r.onnx.is_file()
    after = set(WEIGHTS_DIR.glob("*.pt")) if WEIGHTS_DIR.is_dir() else set()
    assert after == before  # Ultralytics' AMP self-test (which fetches a checkpoint) was skipped
