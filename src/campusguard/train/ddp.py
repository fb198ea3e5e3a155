"""Distributed data-parallel steps and gradient accumulation for YOLOv8 detection, in plain PyTorch.

Production multi-GPU training goes through Ultralytics' trainer (`campusguard.train.train`
with a device list). This module is the same mechanism spelled out, small enough to check:
a real YOLOv8 `DetectionModel`, Ultralytics' detection loss, `DistributedDataParallel` over a
process group (``gloo`` on CPU, ``nccl`` on CUDA and ROCm/RCCL), and accumulation of
micro-batches into one optimiser step.

Loss normalisation. Ultralytics divides each loss term by ``T``, the sum of the assigned
target scores in the batch, so two half-batches with their own ``T`` do not add up to the
whole batch. `SummedDetectionLoss` returns the un-normalised sum ``S = loss * T`` (``T``
detached), which *is* a sum over images; dividing it by the number of images in the
optimiser step (a constant known in advance) makes ``batch 8 x accumulate 2``,
``2 ranks x batch 8`` and ``batch 16`` the same gradient, up to float rounding, as long as
BatchNorm does not see the batch (`freeze_batchnorm`: BN layers in eval mode).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from campusguard.errors import InvalidInputError, require

if TYPE_CHECKING:
    import torch
    from ultralytics.nn.tasks import DetectionModel

    _M = TypeVar("_M", bound=torch.nn.Module)

__all__ = [
    "DDPRunConfig",
    "SummedDetectionLoss",
    "accumulation_step",
    "build_detection_model",
    "ddp_worker",
    "find_free_port",
    "freeze_batchnorm",
    "make_random_batch",
    "run_ddp",
    "split_batch",
    "train_steps",
]


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def build_detection_model(
    cfg: str = "yolov8n.yaml",
    *,
    nc: int = 80,
    depth: float | None = None,
    width: float | None = None,
    max_channels: int | None = None,
    seed: int = 0,
) -> DetectionModel:
    """Build an Ultralytics YOLOv8 `DetectionModel` with random weights (nothing downloaded).

    Args:
        cfg: model yaml (``yolov8n.yaml`` ... or a path).
        nc: number of classes.
        depth, width, max_channels: override the scale's multipliers (e.g. ``width=0.0625``
            for a tiny test model); ``None`` keeps the yaml's.
        seed: ``torch.manual_seed`` before initialisation, so every rank builds the same model.

    Returns:
        the model, in train mode, with ``model.args`` holding Ultralytics' default
        hyper-parameters (the loss gains ``box``, ``cls``, ``dfl``).
    """
    from campusguard.models.ultralytics_env import offline_ultralytics, set_model_args

    offline_ultralytics()
    require("torch", "torch")
    import torch

    require("ultralytics", "torch")
    from ultralytics.cfg import get_cfg
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load

    d = yaml_model_load(cfg)
    scale = d.get("scale") or "n"
    if d.get("scales"):
        dd, ww, mc = d["scales"][scale]
        d["scales"] = {scale: [depth or dd, width or ww, max_channels or mc]}
        d["scale"] = scale
    torch.manual_seed(seed)
    model = DetectionModel(d, ch=3, nc=nc, verbose=False)
    set_model_args(model, get_cfg())
    model.train()
    return model


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a wrapper with ``.module`` (`DistributedDataParallel`), else ``model``."""
    import torch

    inner = model.module if hasattr(model, "module") else model
    if not isinstance(inner, torch.nn.Module):
        raise InvalidInputError(f"{type(model).__name__}.module is a {type(inner).__name__}, not a torch module")
    return inner


def freeze_batchnorm(model: _M) -> _M:
    """Put every BatchNorm layer in eval mode (running statistics, no batch statistics), so a
    sample's output does not depend on the other samples of its batch. Returns ``model``."""
    require("torch", "torch")
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.eval()
    return model


class SummedDetectionLoss:
    """Ultralytics' YOLOv8 detection loss (CIoU box, BCE class, DFL), summed over images.

    ``loss(preds, batch) -> (S, items)``: ``S`` is the gain-weighted sum of the three terms
    before Ultralytics' division by the target-score sum ``T`` (``T`` detached), so ``S`` of a
    batch equals the sum of ``S`` over any split of it. ``items`` are Ultralytics' per-term
    values (box, cls, dfl) as it logs them.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        from ultralytics.utils.loss import v8DetectionLoss

        self.inner = v8DetectionLoss(_unwrap(model))

    def __call__(self, preds: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        captured: dict[str, Any] = {}
        assigner = self.inner.assigner

        def recording_assigner(*args: Any, **kwargs: Any) -> Any:
            out = assigner(*args, **kwargs)
            captured["T"] = out[2].sum().clamp(min=1).detach()  # out[2]: target_scores (b, anchors, nc)
            return out

        self.inner.assigner = recording_assigner  # type: ignore[assignment]  # a recording stand-in for the TaskAlignedAssigner, this call only
        try:
            _, loss, items = self.inner.get_assigned_targets_and_loss(self.inner.parse_output(preds), batch)
        finally:
            self.inner.assigner = assigner
        return loss.sum() * captured["T"], items


def split_batch(batch: dict[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
    """Cut an Ultralytics-style batch (``img (B,3,H,W)``, ``batch_idx (M,)``, ``cls (M,1)``,
    ``bboxes (M,4)`` normalised xywh) into consecutive micro-batches of ``size`` images."""
    n = int(batch["img"].shape[0])
    if size < 1 or n % size:
        raise InvalidInputError(f"cannot split a batch of {n} images into micro-batches of {size}")
    out = []
    for start in range(0, n, size):
        sel = (batch["batch_idx"] >= start) & (batch["batch_idx"] < start + size)
        out.append(
            {
                "img": batch["img"][start : start + size],
                "batch_idx": batch["batch_idx"][sel] - start,
                "cls": batch["cls"][sel],
                "bboxes": batch["bboxes"][sel],
            }
        )
    return out


def accumulation_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: SummedDetectionLoss,
    micro_batches: Sequence[dict[str, torch.Tensor]],
    images_per_step: int,
) -> float:
    """One optimiser step over several micro-batches (gradient accumulation).

    Each micro-batch's summed loss is divided by ``images_per_step`` (the images this
    process contributes to the step) before ``backward``, so the accumulated gradient is the
    per-image mean over the whole step. Under `DistributedDataParallel` the gradient
    all-reduce (a mean over ranks) runs only on the last micro-batch (``no_sync``), giving
    the mean over all ranks' images.

    Returns:
        the step's loss, summed over micro-batches (per image, this process).
    """
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for k, mb in enumerate(micro_batches):
        last = k == len(micro_batches) - 1
        no_sync = getattr(model, "no_sync", None)  # DistributedDataParallel's; plain modules have none
        sync = contextlib.nullcontext() if last or no_sync is None else no_sync()
        with sync:
            s, _ = loss_fn(model(mb["img"]), mb)
            loss = s / images_per_step
            loss.backward()
        total += float(loss.detach())
    optimizer.step()
    return total


def make_random_batch(
    n_images: int, *, imgsz: int = 64, nc: int = 2, boxes_per_image: int = 2, seed: int = 0
) -> dict[str, torch.Tensor]:
    """A reproducible Ultralytics-style batch: random images in 0..1 and random boxes.

    Returns:
        ``img (n, 3, imgsz, imgsz) float32``, ``batch_idx (M,)``, ``cls (M, 1)``,
        ``bboxes (M, 4)`` normalised cx, cy, w, h.
    """
    require("torch", "torch")
    import torch

    g = torch.Generator().manual_seed(seed)
    m = n_images * boxes_per_image
    wh = 0.15 + 0.35 * torch.rand(m, 2, generator=g)
    cxy = wh / 2 + (1 - wh) * torch.rand(m, 2, generator=g)
    return {
        "img": torch.rand(n_images, 3, imgsz, imgsz, generator=g),
        "batch_idx": torch.arange(n_images).repeat_interleave(boxes_per_image).float(),
        "cls": torch.randint(0, nc, (m, 1), generator=g).float(),
        "bboxes": torch.cat([cxy, wh], 1),
    }


@dataclass(frozen=True)
class DDPRunConfig:
    """A small DDP run: every step uses ``images_per_rank`` images per rank, cut into
    ``accumulate`` micro-batches; rank ``r`` takes images ``r, r + W, r + 2W, ...`` of the
    step's global batch of ``images_per_rank * W``."""

    steps: int = 2
    images_per_rank: int = 4
    accumulate: int = 1
    imgsz: int = 64
    nc: int = 2
    width: float = 0.0625
    depth: float = 0.33
    lr: float = 0.01
    seed: int = 0
    backend: str = "gloo"


def _rank_shard(batch: dict[str, torch.Tensor], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """Images ``rank::world_size`` of a batch, with their targets renumbered."""
    require("torch", "torch")
    import torch

    n = int(batch["img"].shape[0])
    keep = list(range(rank, n, world_size))
    new_index = {old: new for new, old in enumerate(keep)}
    sel = torch.tensor([int(i) in new_index for i in batch["batch_idx"].tolist()], dtype=torch.bool)
    idx = torch.tensor([new_index[int(i)] for i in batch["batch_idx"][sel].tolist()], dtype=torch.float32)
    return {"img": batch["img"][keep], "batch_idx": idx, "cls": batch["cls"][sel], "bboxes": batch["bboxes"][sel]}


def train_steps(model: torch.nn.Module, cfg: DDPRunConfig, rank: int = 0, world_size: int = 1) -> list[float]:
    """Run ``cfg.steps`` SGD steps of ``model`` (plain or DDP-wrapped) on this rank's shard of
    reproducible random batches; returns the loss of each step."""
    require("torch", "torch")
    import torch

    inner = _unwrap(model)
    freeze_batchnorm(inner)
    loss_fn = SummedDetectionLoss(inner)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    device = next(inner.parameters()).device
    losses = []
    for step in range(cfg.steps):
        full = make_random_batch(cfg.images_per_rank * world_size, imgsz=cfg.imgsz, nc=cfg.nc, seed=cfg.seed + 1 + step)
        shard = _rank_shard(full, rank, world_size) if world_size > 1 else full
        shard = {k: v.to(device) for k, v in shard.items()}
        micro = split_batch(shard, cfg.images_per_rank // cfg.accumulate)
        losses.append(accumulation_step(model, optimizer, loss_fn, micro, cfg.images_per_rank))
    return losses


def ddp_worker(rank: int, world_size: int, port: int, cfg: DDPRunConfig, out_dir: str) -> None:
    """Entry point of one rank (``torch.multiprocessing.spawn``): join the process group,
    build the same model as every rank, wrap it in DDP, train, save ``rank{r}.pt``.

    ``cfg.backend`` ``"gloo"`` runs on the CPU; ``"nccl"`` puts rank ``r`` on GPU ``r`` (NCCL on
    CUDA, RCCL on ROCm builds of PyTorch)."""
    require("torch", "torch")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(cfg.backend, rank=rank, world_size=world_size)
    try:
        model = build_detection_model(nc=cfg.nc, depth=cfg.depth, width=cfg.width, seed=cfg.seed)
        if cfg.backend == "nccl":
            torch.cuda.set_device(rank)
            model = model.to(f"cuda:{rank}")
            ddp = DistributedDataParallel(model, device_ids=[rank], broadcast_buffers=False)
        else:
            ddp = DistributedDataParallel(model, broadcast_buffers=False)
        losses = train_steps(ddp, cfg, rank, world_size)
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        torch.save({"state_dict": state, "losses": losses}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ddp(cfg: DDPRunConfig, world_size: int, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Spawn ``world_size`` local processes running `ddp_worker` on a free port; return the
    per-rank checkpoint files (``{"state_dict", "losses"}``)."""
    require("torch", "torch")
    import torch.multiprocessing as mp

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(ddp_worker, args=(world_size, find_free_port(), cfg, str(out)), nprocs=world_size, join=True)
    return [out / f"rank{r}.pt" for r in range(world_size)]
