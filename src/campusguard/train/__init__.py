"""Training: Ultralytics' trainer on one device or DDP, device-list checks, and the reusable
DDP / gradient-accumulation step logic (`campusguard.train.ddp`) that the tests exercise.

Public API::

    from campusguard.train import train, TrainResult, parse_train_device
    result = train("yolov8n.yaml", "data.yaml", epochs=30, imgsz=320, batch=16, device="cpu", accumulate=2)
    result.best_pt, result.onnx, result.metrics["map50_95"]

Ultralytics and PyTorch are imported only inside functions.
"""

from campusguard.models.families import ARCHITECTURES
from campusguard.train.devices import parse_train_device, visible_torch_gpus
from campusguard.train.trainer import TrainResult, oom_message, resolve_model_spec, train

__all__ = [
    "ARCHITECTURES",
    "TrainResult",
    "oom_message",
    "parse_train_device",
    "resolve_model_spec",
    "train",
    "visible_torch_gpus",
]
