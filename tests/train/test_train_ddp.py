"""DDP and gradient accumulation on a real (tiny) YOLOv8 detection model with Ultralytics' loss."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ultralytics")

from campusguard.errors import InvalidInputError  # noqa: E402
from campusguard.train.ddp import (  # noqa: E402
    DDPRunConfig,
    SummedDetectionLoss,
    build_detection_model,
    freeze_batchnorm,
    make_random_batch,
    run_ddp,
    split_batch,
    train_steps,
)

pytestmark = pytest.mark.torch

TINY = {"nc": 2, "depth": 0.33, "width": 0.0625}


def _params(model) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items() if v.dtype.is_floating_point}


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray], **tol) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], err_msg=k, **tol)


def test_split_batch_renumbers_targets() -> None:
    batch = make_random_batch(4, boxes_per_image=2)
    parts = split_batch(batch, 2)
    assert [p["img"].shape[0] for p in parts] == [2, 2]
    assert parts[1]["batch_idx"].tolist() == [0, 0, 1, 1]
    torch.testing.assert_close(parts[1]["bboxes"], batch["bboxes"][4:])
    with pytest.raises(InvalidInputError, match="batch of 4 images into micro-batches of 3"):
        split_batch(batch, 3)


def test_summed_loss_is_additive_over_images() -> None:
    model = freeze_batchnorm(build_detection_model(**TINY))
    loss_fn = SummedDetectionLoss(model)
    batch = make_random_batch(4, seed=3)
    whole, _ = loss_fn(model(batch["img"]), batch)
    halves = [loss_fn(model(mb["img"]), mb)[0] for mb in split_batch(batch, 2)]
    assert float(whole.detach()) > 0
    np.testing.assert_allclose(float(whole.detach()), float(sum(halves).detach()), rtol=1e-5)


def test_batch8_accumulate2_updates_like_batch16() -> None:
    init = build_detection_model(**TINY, seed=1)
    a, b = copy.deepcopy(init), copy.deepcopy(init)
    losses_a = train_steps(a, DDPRunConfig(steps=2, images_per_rank=16, accumulate=2, **TINY))
    losses_b = train_steps(b, DDPRunConfig(steps=2, images_per_rank=16, accumulate=1, **TINY))
    np.testing.assert_allclose(losses_a, losses_b, rtol=1e-5)
    pa, pb, p0 = _params(a), _params(b), _params(init)
    _assert_same(pa, pb, rtol=2e-4, atol=2e-6)
    moved = max(float(np.abs(pa[k] - p0[k]).max()) for k in pa)
    assert moved > 1e-4  # the steps really changed the weights


@pytest.mark.slow
def test_two_process_ddp_gloo_ranks_agree_and_match_single_process(tmp_path: Path) -> None:
    cfg = DDPRunConfig(steps=2, images_per_rank=4, accumulate=2, **TINY)
    files = run_ddp(cfg, world_size=2, out_dir=tmp_path)
    r0, r1 = (torch.load(f, weights_only=False) for f in files)
    for k, v in r0["state_dict"].items():  # all-reduced gradients: bit-identical weights on both ranks
        assert torch.equal(v, r1["state_dict"][k]), k
    # the same two steps in one process on the whole 8-image batches give the same weights
    single = build_detection_model(**TINY, seed=cfg.seed)
    train_steps(single, DDPRunConfig(steps=2, images_per_rank=8, accumulate=1, **TINY))
    ddp_params = {k: v.numpy() for k, v in r0["state_dict"].items() if v.dtype.is_floating_point}
    _assert_same(ddp_params, _params(single), rtol=2e-4, atol=2e-6)
    init = _params(build_detection_model(**TINY, seed=cfg.seed))
    assert max(float(np.abs(ddp_params[k] - init[k]).max()) for k in init) > 1e-4
