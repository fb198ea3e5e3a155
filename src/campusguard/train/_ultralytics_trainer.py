"""Ultralytics' detection trainer, kept offline.

Imported only from inside `campusguard.train` functions (Ultralytics is optional). The class
lives at module level so Ultralytics' DDP launcher, which re-imports the trainer class by
module path in every worker process, finds the same patched class there.
"""

from __future__ import annotations

from campusguard.models.ultralytics_env import offline_ultralytics

offline_ultralytics()

import re  # noqa: E402

import torch  # noqa: E402
import ultralytics.engine.trainer as _engine_trainer  # noqa: E402
from ultralytics.models.yolo.detect import DetectionTrainer  # noqa: E402

__all__ = ["OfflineDetectionTrainer"]

# GPUs on which Ultralytics' check_amp turns AMP off (NaN losses or zero mAP reported)
_AMP_BAD_GPUS = re.compile(
    r"(nvidia|geforce|quadro|tesla).*?(1660|1650|1630|t400|t550|t600|t1000|t1200|t2000|k40m)", re.I
)


def _amp_without_download(model: torch.nn.Module) -> bool:
    """Ultralytics' AMP decision without its self-test, which downloads a YOLO checkpoint.

    Keeps the rest of `ultralytics.utils.checks.check_amp`: no AMP on the CPU or MPS (CPU
    autocast would run in bfloat16) and none on the GPUs Ultralytics lists as giving NaN
    losses with AMP; otherwise ``--amp`` is trusted.
    """
    device = next(model.parameters()).device
    if device.type in {"cpu", "mps"}:
        return False
    return not (device.type == "cuda" and _AMP_BAD_GPUS.search(torch.cuda.get_device_name(device)))


class OfflineDetectionTrainer(DetectionTrainer):
    """`DetectionTrainer` whose AMP check never downloads weights (``--no-amp`` turns AMP off)."""

    def _setup_train(self) -> None:
        original = _engine_trainer.check_amp
        _engine_trainer.check_amp = _amp_without_download
        try:
            super()._setup_train()
        finally:
            _engine_trainer.check_amp = original
