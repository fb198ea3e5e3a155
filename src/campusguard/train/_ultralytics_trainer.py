"""Ultralytics' detection trainer, kept offline.

Imported only from inside `campusguard.train` functions (Ultralytics is optional). The class
lives at module level so Ultralytics' DDP launcher, which re-imports the trainer class by
module path in every worker process, finds the same patched class there.
"""

from __future__ import annotations

from campusguard.models.ultralytics_env import offline_ultralytics

offline_ultralytics()

import ultralytics.engine.trainer as _engine_trainer  # noqa: E402
from ultralytics.models.yolo.detect import DetectionTrainer  # noqa: E402

__all__ = ["OfflineDetectionTrainer"]


def _amp_without_download(model: object) -> bool:
    """Replace Ultralytics' AMP self-test, which downloads a YOLO checkpoint: trust ``--amp``."""
    return True


class OfflineDetectionTrainer(DetectionTrainer):
    """`DetectionTrainer` whose AMP check never downloads weights (``--no-amp`` turns AMP off)."""

    def _setup_train(self) -> None:
        original = _engine_trainer.check_amp
        _engine_trainer.check_amp = _amp_without_download
        try:
            super()._setup_train()
        finally:
            _engine_trainer.check_amp = original
