"""The detector section: the model, its device and thresholds, shared by all cameras."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from campusguard.app.config.base import ConfigModel, validate_imgsz
from campusguard.backends.registry import BackendName, backend_help

__all__ = ["DetectorConfig"]


class DetectorConfig(ConfigModel):
    """Detection shared by all cameras; frames are batched across cameras."""

    model: str | None = Field(
        None,
        title="Model",
        description="ONNX file, .pt checkpoint, official weights by name (yolov8n..x, yolo11n..x, yolo26n..x: "
        "fetched once into the weights cache, or `campusguard models pull NAME`), an alias (fall-yolov8s) or an "
        "architecture config with random weights (yolov8n.yaml, speed tests only); none uses the bundled default model.",
    )
    device: str = Field(
        "auto",
        title="Device",
        description="`auto`, `cpu`, `cuda:N` or `rocm:N`; with `backend: openvino`: `auto`, `cpu`, `gpu` or `npu`.",
    )
    backend: BackendName | None = Field(
        None,
        title="Backend",
        description="The inference engine, forced (none: ONNX Runtime, or what `precision: auto` measured "
        "fastest on this CPU). " + backend_help(),
    )
    pipeline: Literal["auto", "host", "device"] = Field(
        "auto",
        title="Pre/post-processing",
        description="`host`: letterbox and NMS on the CPU; `device`: uint8 frames uploaded once, letterbox, "
        "normalisation and NMS on the GPU (PyTorch: from pinned memory; ONNX Runtime: fused into the session); "
        "`auto`: `device` for the torch backend on a GPU.",
    )
    head: Literal["end2end", "classic"] | None = Field(
        None,
        title="Head",
        description="Which head a .pt or architecture model runs (YOLO26 has two): `end2end` the NMS-free "
        "one-to-one head, `classic` the one-to-many head with NMS (the boxes of Ultralytics' default predict); "
        "none: the model's own (YOLO26: end2end). An ONNX file keeps the head it was exported with.",
    )
    half: bool = Field(False, title="FP16", description="FP16 weights and inputs (the torch backend on a GPU).")
    precision: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto",
        title="Precision",
        description="ONNX models on the CPU: `int8` loads the model's INT8 variant (NAME-int8.onnx or NAME.int8.onnx "
        "next to it; the bundled model has one; with `backend: openvino` NNCF's OpenVINO IR NAME.int8ov.xml), "
        "`fp32` the model itself, `bf16` OpenVINO's BF16 (CPUs with AVX-512 BF16 or AMX), `auto` the engine and "
        "precision a short timed trial at start-up found fastest: every installed backend (ONNX Runtime, OpenVINO) "
        "and precision here (about 3 s, once: the result is cached per CPU, model files, input shape and engine "
        "versions; `campusguard doctor` shows it, `campusguard doctor --calibrate` measures again), another than "
        "ONNX Runtime FP32 only when its boxes pass the export accuracy check and it is at least 5% faster; a "
        "forced `backend` limits the trial to it. On a GPU `auto` loads the model as given.",
    )
    imgsz: int | tuple[int, int] | None = Field(
        None,
        title="Input size",
        description="Network input size: an int (long side; each camera gets an input shape matched to its aspect ratio when the model allows it) or [height, width]; none uses the model's own size.",
    )
    conf: float = Field(0.25, ge=0, le=1, title="Confidence", description="Minimum detection score.")
    iou: float = Field(0.7, ge=0, le=1, title="NMS IoU", description="IoU threshold of non-maximum suppression.")
    max_det: int = Field(300, ge=1, le=10000, title="Max detections", description="Most detections kept per frame.")
    batch_size: int = Field(
        4, ge=1, le=64, title="Batch size", description="Most frames (across cameras) in one inference batch."
    )
    threads: int = Field(
        0,
        ge=0,
        le=256,
        title="Inference threads",
        description="ONNX Runtime intra-op threads; 0: one per physical core.",
    )
    spinning: bool = Field(
        False,
        title="Spin-wait",
        description="Let ONNX Runtime's idle threads spin-wait between calls. Off by default in the app: spinning "
        "threads take the cores that the camera readers and analytics threads need.",
    )
    batch_wait_ms: float = Field(
        5.0,
        ge=0,
        le=1000,
        title="Batch wait",
        description="Milliseconds to wait for more frames before running a partial batch.",
    )

    @field_validator("imgsz")
    @classmethod
    def _imgsz(cls, value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
        return validate_imgsz(value)
