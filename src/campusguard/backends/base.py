"""The backend protocol and the options every backend's ``build`` receives.

A backend takes a ``(B, 3, H, W) float32`` batch (or, where it says so, `takes_bgr_uint8`, the letterboxed
uint8 frames that batch is made from) and returns the raw head output; pre- and post-processing are
shared code outside every backend. What a model tells about itself is
`campusguard.models.info.ModelInfo`. Which backends exist is `campusguard.backends.registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from campusguard.models.info import ModelInfo

__all__ = ["AsyncBackend", "Backend", "LoadOptions", "Started", "start_inference", "takes_bgr_uint8"]

T = TypeVar("T")


@runtime_checkable
class Backend(Protocol):
    """Raw arrays in, raw arrays out."""

    name: str
    info: ModelInfo

    @property
    def provider(self) -> str:
        """The execution provider or device really in use, e.g. ``CUDAExecutionProvider:0``."""
        ...

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Run the network on a ``(B, 3, H, W) float32`` batch; return the ``(B, 4+nc, N)`` head output."""
        ...


def takes_bgr_uint8(backend: Backend) -> bool:
    """Whether ``backend`` takes the letterboxed ``(B, H, W, 3) uint8`` BGR frames themselves (its graph converts
    them: OpenVINO's pre-processing) instead of `campusguard.ops.preprocess.make_batch`'s float tensor; such a
    backend still accepts the float tensor."""
    return bool(getattr(backend, "bgr_uint8_input", False))


@dataclass(frozen=True)
class Started(Generic[T]):
    """Work handed off: ``wait()`` gives its result (a backend's ``(B, 4+nc, N)`` head output, a detector's
    detections); ``running`` says whether it may still be in progress (False: ``wait`` returns at once)."""

    wait: Callable[[], T]
    running: bool

    @classmethod
    def finished(cls, value: T) -> Started[T]:
        """Work already done: ``wait`` gives ``value``."""
        return cls(lambda: value, running=False)


@runtime_checkable
class AsyncBackend(Backend, Protocol):
    """A backend that can start a batch and return before it is done (OpenVINO's infer requests)."""

    def start(self, batch: np.ndarray) -> Started[np.ndarray]:
        """Start the network on ``batch``; the backend keeps its own copy of it."""
        ...


def start_inference(backend: Backend, batch: np.ndarray) -> Started[np.ndarray]:
    """``batch`` started on ``backend``: at once on an `AsyncBackend`, else run now. The caller may reuse
    ``batch`` as soon as this returns."""
    if isinstance(backend, AsyncBackend):
        return backend.start(batch)
    return Started.finished(backend.infer(batch))


@dataclass(frozen=True)
class LoadOptions:
    """What `campusguard.backends.loader.load_backend` passes to a backend's ``build``; each backend reads
    the fields that mean something to it.

    Attributes:
        device: the device as the backend names it (``auto``, ``cpu``, ``cuda:N``, ``rocm:N``, ``gpu``, ``npu``).
        half: FP16 weights and inputs (the torch backend on a GPU).
        precision: the inference precision an engine compiles for (OpenVINO: ``fp32`` or ``bf16``);
            ``None``: the engine's own default.
        allow_cpu_fallback: accept the CPU (with a warning) when the requested GPU is unusable.
        tensorrt: TensorRT before CUDA (ONNX Runtime).
        intra_op_threads: inference threads (0: the engine's default, one per physical core).
        allow_spinning: idle pool threads spin-wait between calls (ONNX Runtime).
        end_to_end: the head of a ``.pt`` or architecture model (``None``: its own).
        throughput: a service's detector: CPU per frame before one frame's latency (OpenVINO runs even
            a single frame on one of its ``THROUGHPUT`` streams, one thread, instead of on every thread).
    """

    device: str = "auto"
    half: bool = False
    precision: str | None = None
    allow_cpu_fallback: bool = False
    tensorrt: bool = False
    intra_op_threads: int = 0
    allow_spinning: bool = True
    end_to_end: bool | None = None
    throughput: bool = False
