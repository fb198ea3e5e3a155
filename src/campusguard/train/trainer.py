"""Training through Ultralytics' trainer: one device or DDP over a device list, never downloading.

`train` checks everything a user can get wrong (data set, model spec, devices, numbers)
before a single step runs, then hands over to Ultralytics' ``DetectionTrainer``:

- official names (``yolov8n``, ``yolo11s.pt``, ``yolo26n``: `campusguard.models.families`) fine-tune the
  official COCO-trained weights (pulled into the weights cache on first use, as Ultralytics does);
  ``NAME.yaml`` starts the architecture from random weights (``pretrained=False``); ``.pt`` files
  fine-tune from their weights;
- gradient accumulation is a true effective batch: Ultralytics steps the optimiser every
  ``max(round(nbs / batch), 1)`` batches and scales weight decay by ``batch * accumulate / nbs``,
  so ``nbs = batch * accumulate`` gives exactly ``accumulate`` batches per step and the
  nominal weight decay;
- a device list (``0,1``) makes Ultralytics launch DDP itself (``nccl``: NCCL on CUDA, RCCL on
  ROCm); ``batch`` is the total over all devices, as in Ultralytics;
- Ultralytics' AMP self-test, which downloads a checkpoint, is replaced (``--no-amp`` turns AMP off);
- after training the best weights are exported to ONNX (dynamic shape, opset 17, simplified).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from campusguard.errors import DeviceError, InvalidInputError, ModelLoadError, require
from campusguard.eval.dataset import YoloDataset, load_yolo_dataset, read_data_yaml
from campusguard.models.families import ARCHITECTURES, architecture_config, official_weights_name
from campusguard.models.info import check_imgsz
from campusguard.train.devices import parse_train_device

__all__ = ["TrainResult", "oom_message", "resolve_model_spec", "train", "write_resolved_data_yaml"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced.

    Attributes:
        save_dir: the run folder (``--out``).
        best_pt: best weights (by Ultralytics' fitness, 0.9 mAP50-95 + 0.1 mAP50).
        last_pt: weights after the last epoch.
        onnx: ONNX export of ``best_pt``, or ``None`` when export was off.
        metrics: final validation of ``best_pt`` by Ultralytics: ``map50_95``, ``map50``,
            ``precision``, ``recall`` in 0..1.
        epochs: epochs trained.
        seconds: wall time of training (without export), in seconds.
        train_images: images in the train split; val_images likewise.
    """

    save_dir: Path
    best_pt: Path
    last_pt: Path
    onnx: Path | None
    metrics: dict[str, float] = field(default_factory=dict)
    epochs: int = 0
    seconds: float = 0.0
    train_images: int = 0
    val_images: int = 0


def resolve_model_spec(model: str) -> tuple[str, bool]:
    """Map ``--model`` to what Ultralytics loads, with Ultralytics' meaning of names.

    Returns:
        ``(spec, from_weights)``: ``"yolov8n"`` or ``"yolov8n.pt"`` -> the official COCO-trained
        checkpoint (a local file of that name wins; else the weights cache, pulled on first use
        unless offline: `campusguard.models.hub.ensure_weights`), fine-tuned; ``"yolov8n.yaml"``
        -> the architecture from random weights; another ``.yaml`` -> itself; an existing ``.pt``
        or ``.onnx`` -> ``(path, True)`` (an ONNX export is rebuilt into trainable weights by
        `train`, see `campusguard.train.from_onnx`); ``"default"`` -> the bundled model's ONNX file.

    Raises:
        InvalidInputError: unknown name, or a ``.pt``/``.yaml`` path that does not exist.
        ModelLoadError: official weights not cached and not downloadable (one line naming the
            URL and the ``campusguard models pull`` command).
    """
    text = str(model).strip()
    arch = architecture_config(text)
    if arch is not None and not Path(text).is_file():  # Ultralytics ships these model yamls
        return arch.yaml, False
    if text == "default":
        from campusguard.models.resolve import DEFAULT_MODEL

        return str(DEFAULT_MODEL), True
    path = Path(text)
    if (official := official_weights_name(text)) is not None:
        local = path if path.suffix.lower() == ".pt" else path.with_name(f"{path.name}.pt")
        if local.is_file():  # a local file of that name wins, as in Ultralytics
            return str(local.resolve()), True
        from campusguard.models.hub import ensure_weights

        return str(ensure_weights(official)), True
    if path.suffix in (".pt", ".onnx"):
        if not path.is_file():
            raise InvalidInputError(f"model weights {path} do not exist")
        return str(path.resolve()), True
    if path.suffix in (".yaml", ".yml"):
        if path.is_file():
            return str(path.resolve()), False
        raise InvalidInputError(f"model yaml {path} does not exist")
    raise InvalidInputError(
        f"model {model!r} is not one of {', '.join(ARCHITECTURES)} (trained weights) or NAME.yaml (random init), "
        "default, a model .yaml, a .pt or an .onnx file"
    )


def write_resolved_data_yaml(data_yaml: str | os.PathLike[str], out_path: Path) -> Path:
    """Write a copy of ``data_yaml`` with absolute paths, so Ultralytics (which resolves a
    relative ``path`` against the working directory) reads the same files we validated."""
    data = read_data_yaml(data_yaml)
    root = Path(data["path"])
    for split in ("train", "val", "test"):
        entry = data.get(split)
        if entry:
            items = entry if isinstance(entry, list) else [entry]
            resolved = [str(p if Path(p).is_absolute() else root / p) for p in map(str, items)]
            data[split] = resolved if isinstance(entry, list) else resolved[0]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return out_path


def oom_message(device: str, batch: int, accumulate: int, imgsz: int, amp: bool) -> str:
    """One-line advice for an out-of-memory failure: the options that keep the effective batch."""
    options = []
    if batch > 1:
        half = max(batch // 2, 1)
        options.append(
            f"--batch {half} --accumulate {accumulate * batch // half} (same effective batch {batch * accumulate})"
        )
    if imgsz > 320:
        options.append(f"--imgsz {max(imgsz // 2 // 32 * 32, 32)}")
    if not amp:
        options.append("--amp (half-precision activations)")
    return f"out of memory on {device} with batch {batch} at imgsz {imgsz}; try " + "; or ".join(options)


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "out of memory" in text or "hip error: out of memory" in text or "cublas_status_alloc_failed" in text


def _check_numbers(epochs: int, imgsz: int, batch: int, accumulate: int, workers: int) -> None:
    check_imgsz(imgsz, name="--imgsz")
    for name, value, low in (
        ("epochs", epochs, 1),
        ("batch", batch, 1),
        ("accumulate", accumulate, 1),
        ("workers", workers, 0),
    ):
        if int(value) < low:
            raise InvalidInputError(f"--{name} {value} must be at least {low}")


def validate_training_inputs(data: str | os.PathLike[str]) -> tuple[YoloDataset, YoloDataset]:
    """Load and validate the train and val splits; raises `InvalidInputError` on any problem."""
    return load_yolo_dataset(data, "train"), load_yolo_dataset(data, "val")


_CSV_KEYS = {
    "map50_95": "metrics/mAP50-95(B)",
    "map50": "metrics/mAP50(B)",
    "precision": "metrics/precision(B)",
    "recall": "metrics/recall(B)",
}


def _final_metrics(trainer: Any) -> dict[str, float]:
    m = getattr(trainer, "metrics", None) or {}
    return {k: float(m[v]) for k, v in _CSV_KEYS.items() if v in m}


def metrics_from_results_csv(results_csv: Path) -> tuple[dict[str, float], int]:
    """Validation metrics of the best epoch in Ultralytics' ``results.csv`` (best by Ultralytics'
    fitness, 0.9 mAP50-95 + 0.1 mAP50, the epoch ``best.pt`` comes from) and the epochs run.

    Used after DDP, whose training ran in worker processes. Returns ``({}, 0)`` without a file.
    """
    import csv

    if not results_csv.is_file():
        return {}, 0
    with results_csv.open(newline="", encoding="utf-8") as f:
        rows = [{k.strip(): v.strip() for k, v in row.items() if k} for row in csv.DictReader(f)]
    rows = [r for r in rows if all(r.get(v) not in (None, "") for v in _CSV_KEYS.values())]
    if not rows:
        return {}, 0
    best = max(rows, key=lambda r: 0.9 * float(r[_CSV_KEYS["map50_95"]]) + 0.1 * float(r[_CSV_KEYS["map50"]]))
    return {k: float(best[v]) for k, v in _CSV_KEYS.items()}, len(rows)


def train(
    model: str,
    data: str | os.PathLike[str],
    *,
    epochs: int = 100,
    imgsz: int = 640,
    batch: int = 16,
    device: str = "auto",
    accumulate: int = 1,
    amp: bool = True,
    workers: int = 8,
    resume: bool = False,
    out: str | os.PathLike[str] = "runs/train",
    seed: int = 0,
    patience: int = 100,
    cache: str | None = None,
    export_onnx: bool = True,
    onnx_opset: int = 17,
    overrides: dict[str, Any] | None = None,
    callbacks: dict[str, Callable[[Any], None]] | None = None,
    threads: int | None = None,
) -> TrainResult:
    """Train a YOLOv8 detector with Ultralytics' trainer.

    Args:
        model: ``yolov8n``..``yolov8x`` or their ``.yaml`` (random init), or a ``.pt`` to fine-tune.
        data: ``data.yaml`` of a YOLO-format data set (train and val splits).
        epochs: passes over the train split.
        imgsz: square training image size in pixels, a multiple of 32.
        batch: images per forward pass, in total over all devices.
        device: ``cpu``, ``auto``, ``0`` or a DDP list ``0,1,2,3``.
        accumulate: forward passes per optimiser step (effective batch ``batch * accumulate``).
        amp: mixed precision on GPUs.
        workers: data loader worker processes per device.
        resume: continue ``out/weights/last.pt``.
        out: run folder (weights, logs, ONNX).
        seed: random seed (Ultralytics' deterministic mode is on).
        patience: epochs without improvement before early stopping.
        cache: keep decoded, resized training images in ``"ram"`` or on ``"disk"``
            (saves JPEG decoding every epoch); ``None``: read them each time.
        export_onnx: export the best weights to ONNX after training.
        onnx_opset: ONNX opset of the export.
        overrides: extra Ultralytics training arguments (e.g. ``{"mosaic": 0.5}``).
        callbacks: Ultralytics callbacks by event (``"on_train_batch_end"``: ``fn(trainer)``);
            they run in this process only (not in DDP workers).
        threads: PyTorch intra-op threads on the CPU (``None``: Ultralytics' choice, one core fewer
            than the machine has, which on a 2-core machine is one thread).

    Raises:
        InvalidInputError: bad data set, model spec or numbers; DeviceError: missing GPUs or
        out of memory (with the options that fit); nothing runs before these checks pass.
    """
    _check_numbers(epochs, imgsz, batch, accumulate, workers)
    if cache not in (None, "ram", "disk"):
        raise InvalidInputError(f"--cache {cache!r} must be ram or disk")
    save_dir = Path(out).resolve()
    last = save_dir / "weights" / "last.pt"
    if resume and not last.is_file():
        raise InvalidInputError(f"--resume: there is no {last} to continue")
    if threads is not None and threads < 1:
        raise InvalidInputError(f"--threads must be >= 1, got {threads}")
    train_ds, val_ds = validate_training_inputs(data)
    device_arg = _device_argument(device, batch)
    # after the cheap checks: an official name may download its weights
    spec, from_weights = resolve_model_spec(model) if not resume else (str(last), True)

    from campusguard.models.ultralytics_env import offline_ultralytics

    offline_ultralytics()
    require("ultralytics", "torch")
    resolved_yaml = write_resolved_data_yaml(data, save_dir / "data.resolved.yaml")
    args = _training_args(
        resolved_yaml, save_dir, device=device_arg, epochs=epochs, imgsz=imgsz, batch=batch, accumulate=accumulate,
        amp=amp, workers=workers, seed=seed, patience=patience, cache=cache, from_weights=from_weights,
    )  # fmt: skip
    args.update(overrides or {})
    if spec.endswith(".onnx"):
        from campusguard.train.from_onnx import checkpoint_from_onnx

        step = max(1, len(train_ds.image_paths) // 64)  # 64 training images spread over the split
        spec = str(
            checkpoint_from_onnx(
                spec, save_dir / "init-from-onnx.pt", calibration=list(train_ds.image_paths[::step][:64]), imgsz=imgsz
            )
        )
    callbacks = dict(callbacks or {})
    if threads is not None:
        callbacks["on_pretrain_routine_start"] = _chain(
            callbacks.get("on_pretrain_routine_start"), _set_threads(threads)
        )
    t0 = time.perf_counter()
    try:
        trainer = _run_ultralytics(spec, args, resume=resume, callbacks=callbacks)
    except RuntimeError as exc:
        if _is_oom(exc):
            raise DeviceError(oom_message(device_arg, batch, accumulate, imgsz, amp)) from exc
        raise
    except FileNotFoundError as exc:
        raise ModelLoadError(f"model {model}: {exc}") from exc
    seconds = time.perf_counter() - t0
    run_dir = Path(trainer.save_dir) if trainer is not None else save_dir
    best = run_dir / "weights" / "best.pt"
    if not best.is_file():
        best = run_dir / "weights" / "last.pt"
    onnx_path = export_best_onnx(best, imgsz=imgsz, opset=onnx_opset) if export_onnx else None
    metrics: dict[str, float] = _final_metrics(trainer) if trainer is not None else {}
    csv_metrics, csv_epochs = metrics_from_results_csv(run_dir / "results.csv")
    return TrainResult(
        save_dir=run_dir,
        best_pt=best,
        last_pt=run_dir / "weights" / "last.pt",
        onnx=onnx_path,
        metrics=metrics or csv_metrics,  # after DDP the parent's trainer holds no metrics
        epochs=csv_epochs or epochs,
        seconds=seconds,
        train_images=len(train_ds),
        val_images=len(val_ds),
    )


def _set_threads(n: int) -> Callable[[Any], None]:
    """A callback that sets PyTorch's intra-op threads once Ultralytics has set its own."""

    def set_threads(_trainer: Any) -> None:
        import torch

        torch.set_num_threads(n)

    return set_threads


def _chain(first: Callable[[Any], None] | None, second: Callable[[Any], None]) -> Callable[[Any], None]:
    """Run ``first`` (if any) then ``second`` on the same trainer."""

    def both(trainer: Any) -> None:
        if first is not None:
            first(trainer)
        second(trainer)

    return both


def _training_args(
    data_yaml: Path,
    save_dir: Path,
    *,
    device: str,
    epochs: int,
    imgsz: int,
    batch: int,
    accumulate: int,
    amp: bool,
    workers: int,
    seed: int,
    patience: int,
    cache: str | None,
    from_weights: bool = False,
) -> dict[str, Any]:
    """Ultralytics' training arguments: ``nbs = batch * accumulate`` (a true effective batch), no
    pretrained download, deterministic, no plots, the run folder ``save_dir``. ``from_weights``
    (a ``.pt`` model): start from its weights; Ultralytics' ``pretrained=False`` would train the
    checkpoint's architecture from random weights."""
    return {
        "data": str(data_yaml),
        "epochs": int(epochs),
        "imgsz": int(imgsz),
        "batch": int(batch),
        "nbs": int(batch) * int(accumulate),
        "device": device,
        "amp": bool(amp),
        "workers": int(workers),
        "project": str(save_dir.parent),
        "name": save_dir.name,
        "exist_ok": True,
        "pretrained": bool(from_weights),
        "seed": int(seed),
        "deterministic": True,
        "patience": int(patience),
        "cache": cache or False,
        "plots": False,
        "verbose": True,
    }


def _device_argument(device: str, batch: int) -> str:
    """Ultralytics' ``device`` for ``--device`` (``cpu`` or a GPU list); the total batch must split evenly."""
    gpus = parse_train_device(device)
    if gpus is not None and len(gpus) > 1 and batch % len(gpus):
        raise InvalidInputError(f"--batch {batch} must be a multiple of the {len(gpus)} devices in {device!r}")
    return "cpu" if gpus is None else ",".join(map(str, gpus))


def _run_ultralytics(
    spec: str, args: dict[str, Any], *, resume: bool, callbacks: dict[str, Callable[[Any], None]] | None
) -> Any:
    """Train with Ultralytics' trainer (CampusGuard's offline subclass); return the trainer (``None`` after DDP)."""
    from ultralytics import YOLO

    from campusguard.train._ultralytics_trainer import OfflineDetectionTrainer

    yolo = YOLO(spec, task="detect")
    for event, fn in (callbacks or {}).items():
        yolo.add_callback(event, fn)
    if resume:
        yolo.train(resume=True, trainer=OfflineDetectionTrainer)
    else:
        yolo.train(trainer=OfflineDetectionTrainer, **args)
    return yolo.trainer


def export_best_onnx(
    weights: Path, *, imgsz: int, opset: int = 17, dynamic: bool = True, simplify: bool = True
) -> Path:
    """Export Ultralytics weights to ONNX beside them (Ultralytics' exporter: names, imgsz and
    stride kept in the metadata). ``dynamic`` makes batch, height and width free. The model keeps
    its own head: a YOLO26 exports its NMS-free one (`campusguard.models.export.ultralytics_onnx`)."""
    from campusguard.models.export import ultralytics_onnx
    from campusguard.models.ultralytics_env import offline_ultralytics

    offline_ultralytics()
    from ultralytics import YOLO

    return ultralytics_onnx(
        YOLO(str(weights), task="detect"), imgsz=imgsz, dynamic=dynamic, simplify=simplify, opset=opset
    )
