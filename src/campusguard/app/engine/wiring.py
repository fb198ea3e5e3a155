"""The mapping from config sections to objects, in one place.

- per camera: zones, lines, tracker and rules (`build_camera`), pure construction;
- the factories `WatchService` (and scan, the cluster groups and the console) start from:
  detectors (`default_detector_factory`), motion gates, camera sources and readers
  (`open_camera`, `probe_source`, `reader_for`), the event store and the alert sinks
  (`open_store_and_sinks`, `open_alert_sinks`), the alert relay of a PostgreSQL store
  (`open_alert_relay`), called by `campusguard.app.event_side.EventSide`, which decides who owns
  them. These open files, streams and connections, but start no thread.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

import numpy as np

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.alerts.registry import SINKS
from campusguard.app.alerts.spec import SinkContext
from campusguard.app.config import (
    AnyAlertSinkConfig,
    CameraConfig,
    LineConfig,
    LoadedConfig,
    RuleConfig,
    TrackerConfig,
    WatchConfig,
)
from campusguard.app.config.privacy import BlurMode, PrivacyConfig
from campusguard.app.engine.analytics import CameraGeometry
from campusguard.app.engine.sources import CameraReader, FrameQueue, FrameSource, PrependedSource, open_source
from campusguard.app.engine.stages import DetectorLike
from campusguard.app.events.protocols import EventDatabase
from campusguard.app.events.recorder import AlertRelayLoop, EventRecorder, RelayingRecorder
from campusguard.app.events.types import Event
from campusguard.app.infra.secrets import redact_url, resolve_secret, with_password
from campusguard.app.infra.sqlitedb import DamagedFileError
from campusguard.app.rules import RULES, Rule, RuleContext, RuleEngine
from campusguard.app.rules.engine import rule_fingerprint
from campusguard.errors import CampusGuardError, InvalidInputError, SourceError
from campusguard.motion import MotionDetector, MotionGate
from campusguard.ops.privacy import FrameMask
from campusguard.tracking import ByteTrackTracker
from campusguard.zones import LineZone, PolygonZone

__all__ = [
    "CameraParts",
    "DetectorFactory",
    "SourceProbe",
    "build_alert_sink",
    "build_camera",
    "build_health_only",
    "build_rules",
    "build_tracker",
    "default_detector_factory",
    "detector_key",
    "frame_mask_for",
    "model_for_precision",
    "choose_engine",
    "EngineChoice",
    "motion_gate_for",
    "open_alert_relay",
    "open_config_store",
    "open_alert_sinks",
    "open_camera",
    "open_escalator",
    "open_store_and_sinks",
    "probe_of",
    "probe_source",
    "reader_for",
    "sink_context",
]

log = logging.getLogger("campusguard.app.engine.wiring")


@dataclass
class CameraParts:
    """What one camera's analytics worker needs, and its reader's privacy mask.

    Attributes:
        mask: filled on every frame by the camera's reader, before anything else sees it.
        blur: what viewers see blurred (`campusguard.app.config.privacy.BlurMode`).
    """

    tracker: ByteTrackTracker
    rules: RuleEngine
    geometry: CameraGeometry
    mask: FrameMask | None = None
    blur: BlurMode = "none"


def frame_mask_for(privacy: PrivacyConfig, reference_wh: tuple[int, int] | None = None) -> FrameMask | None:
    """The `FrameMask` of a camera's privacy section, or None when it has no mask; ``reference_wh``:
    the frame size its pixel coordinates are for (the camera's first frame, as for its zones)."""
    if not privacy.masks:
        return None
    return FrameMask([(m.polygon, m.units) for m in privacy.masks], privacy.fill_bgr, reference_wh)


def build_tracker(cfg: TrackerConfig, fps: float) -> ByteTrackTracker:
    """A ByteTrack tracker for one camera of nominal ``fps`` frames per second."""
    return ByteTrackTracker(
        frame_rate=fps,
        lost_track_s=cfg.lost_track_s,
        track_activation_threshold=cfg.track_activation_threshold,
        high_conf_threshold=cfg.high_conf_threshold,
        min_iou=cfg.min_iou,
        min_consecutive_frames=cfg.min_consecutive_frames,
    )


def _end_points(line: LineZone) -> np.ndarray:
    """``(2, 2) float32`` end points of a line, pixels."""
    return np.stack([line.start_xy, line.end_xy]).astype(np.float32)


def _build_rule(
    rule: RuleConfig,
    camera_id: str,
    names: dict[int, str],
    zones: dict[str, PolygonZone],
    anchors: Mapping[str, str],
    lines: dict[str, LineConfig],
    resolution_wh: tuple[int, int],
    stream_key: str = "",
    live: bool = False,
    state_dir: Path | None = None,
) -> Rule:
    """The rule a rule section configures (`RULES` maps its kind to its builder); zone and line
    names were checked when the file was parsed.

    Raises:
        UnknownRuleKindError: a kind the rule registry does not have.
        InvalidInputError: the rule rejects a value.
    """
    ctx = RuleContext(
        camera_id=camera_id,
        names=names,
        resolution_wh=resolution_wh,
        zones=zones,
        anchors=anchors,
        lines=lines,
        stream_key=stream_key,
        live=live,
        state_dir=state_dir,
    )
    return RULES.build(rule, ctx)


def build_rules(
    loaded: LoadedConfig,
    camera_index: int,
    names: dict[int, str],
    resolution_wh: tuple[int, int],
    stream_key: str = "",
    *,
    pictures: bool = True,
) -> tuple[RuleEngine, dict[str, PolygonZone]]:
    """The rules of camera ``camera_index`` for frames of ``resolution_wh`` (its ``rules`` and, unless
    off, its camera health), and its zones: what `build_camera` gives the analytics stage.
    ``pictures=False`` leaves out the kinds that read the frames' pixels (`RuleEntry.needs_pixels`):
    what `campusguard replay` runs over the stored tracks.

    Raises:
        ConfigError: as `build_camera`.
    """
    cam: CameraConfig = loaded.config.cameras[camera_index]
    loaded.check_frame_size(camera_index, resolution_wh)
    loaded.check_class_names(camera_index, names)
    zones: dict[str, PolygonZone] = {z.name: z.build(resolution_wh) for z in cam.zones}  # they fit: checked above
    anchors = {z.name: z.anchor for z in cam.zones}  # the box point each zone's rules test
    lines = {ln.name: ln for ln in cam.lines}
    rules: list[Rule] = []
    sections = cam.incident_rules()
    live = cam.is_live() and not stream_key
    state_dir = health_state_dir(loaded.config) if live else None
    built = []
    for ri, rule in enumerate(sections):
        if not pictures and RULES.entry(rule.kind).needs_pixels:
            continue
        loc: tuple[str | int, ...] = ("rules", ri) if ri < len(cam.rules) else ("health",)
        try:
            rules.append(
                _build_rule(rule, cam.id, names, zones, anchors, lines, resolution_wh, stream_key, live, state_dir)
            )
        except InvalidInputError as exc:
            raise loaded.error(("cameras", camera_index, *loc), str(exc)) from None
        built.append(rule)
    keys = [  # a live edit keeps the running rules these match (`RuleEngine.carry_over`)
        rule_fingerprint(r, cam.zones, cam.lines, names=names, resolution_wh=resolution_wh, stream_key=stream_key)
        for r in built
    ]
    return RuleEngine(cam.id, rules, keys), zones


def build_health_only(loaded: LoadedConfig, camera_index: int) -> RuleEngine | None:
    """The picture rules (camera health) of a live camera that has given no frame yet, so that its
    ``offline`` incident is raised while nothing else of it can be built (no frame size yet); None
    when its health is off. `RuleEngine.adopt` hands the rule to the camera's full rules later."""
    cam: CameraConfig = loaded.config.cameras[camera_index]
    health = cam.effective_health
    if not health.enabled:
        return None
    ctx = RuleContext(
        camera_id=cam.id,
        names={},
        resolution_wh=cam.resolution_wh or (1, 1),
        live=cam.is_live(),
        state_dir=health_state_dir(loaded.config) if cam.is_live() else None,
    )
    return RuleEngine(cam.id, [RULES.build(health, ctx)])


def health_state_dir(config: WatchConfig) -> Path:
    """Where live cameras' health keeps its reference views: ``health/`` beside the SQLite file
    (the folder of the site's local state)."""
    return Path(config.storage.sqlite).resolve().parent / "health"


def build_camera(
    loaded: LoadedConfig,
    camera_index: int,
    names: dict[int, str],
    resolution_wh: tuple[int, int],
    fps: float,
    stream_key: str = "",
) -> CameraParts:
    """Zones, lines, tracker and rules of camera ``camera_index`` for frames of ``resolution_wh``.

    ``stream_key`` goes into the rules' event ids (`campusguard.app.events.types.event_id_for`):
    which recording the frames come from (`campusguard scan`); empty for a live camera.

    Raises:
        ConfigError: a zone or line leaves the frame, or a rule names a class the model does not
            know; the message names the line of the config file.
    """
    cam: CameraConfig = loaded.config.cameras[camera_index]
    rules, zones = build_rules(loaded, camera_index, names, resolution_wh, stream_key)
    geometry = CameraGeometry(
        resolution_wh=resolution_wh,
        zones=[(name, z.polygon_xy.astype(np.float32)) for name, z in zones.items()],
        lines=[(ln.name, _end_points(ln.build(resolution_wh))) for ln in cam.lines],
    )
    return CameraParts(
        build_tracker(loaded.config.tracker, fps),
        rules,
        geometry,
        mask=frame_mask_for(cam.privacy, resolution_wh),
        blur=cam.privacy.blur,
    )


# factories: detectors, sources, store and sinks ------------------------------------------------
DetectorFactory = Callable[[str | None, str, "int | tuple[int, int] | None"], DetectorLike]
"""``(model, device, imgsz) -> detector``: how `WatchService` gets its shared detectors."""


def default_detector_factory(loaded: LoadedConfig) -> DetectorFactory:
    """Build `campusguard.Detector` objects with the config's thresholds, on the engine and precision its
    ``backend`` and ``precision`` ask for (`choose_engine`: ``auto`` measures)."""
    det = loaded.config.detector

    def make(model: str | None, device: str, imgsz: int | tuple[int, int] | None) -> DetectorLike:
        from campusguard.detector import Detector

        def build(path: str | Path | None, backend: str | None = det.backend, precision: str | None = None) -> Detector:
            return Detector(
                model=path,
                device=device,
                imgsz=imgsz,
                conf=det.conf,
                iou=det.iou,
                max_det=det.max_det,
                threads=det.threads,
                spinning=det.spinning,
                backend=backend,
                pipeline=det.pipeline,
                half=det.half,
                head=det.head,
                precision=precision,
                throughput=True,  # a service: CPU per frame first (a camera's frame rate leaves time to spare)
            )

        choice = choose_engine(model, device, det.precision, backend=det.backend, imgsz=imgsz, build=build)
        return build(choice.model, choice.backend, choice.precision)

    return make


@dataclass(frozen=True)
class EngineChoice:
    """What the detector section's ``backend`` and ``precision`` resolve to: the model file to load (``None``:
    the bundled one), the backend (``None``: the default) and the engine's compiled precision (``None``: its own)."""

    model: str | None
    backend: str | None = None
    precision: str | None = None


def choose_engine(
    model: str | None,
    device: str,
    precision: Literal["auto", "fp32", "bf16", "int8"],
    backend: str | None = None,
    imgsz: int | tuple[int, int] | None = None,
    build: Callable[..., DetectorLike] | None = None,
) -> EngineChoice:
    """The engine, precision and model file the detector section asks for (see `campusguard.precision`).

    ``fp32``/``bf16``: the model itself on ``backend`` at that precision. ``int8``: the INT8 variant of
    the backend (ONNX Runtime: ``NAME-int8.onnx``/``NAME.int8.onnx``; OpenVINO: NNCF's IR ``NAME.int8ov.xml``);
    an error when there is none. ``auto`` on the CPU (``cpu``, or ``auto`` where ONNX Runtime has no GPU
    provider) for an ONNX file: the engine trial (`campusguard.precision.trial_candidates`: every installed
    backend and precision here, or the forced ``backend``'s only), timed and checked against ONNX Runtime
    FP32 by `campusguard.precision_cache.calibrate` (cached per CPU, model files, shape, provider and engine
    versions; ~3 s where nothing is cached), the detectors made by ``build(path)`` for ONNX Runtime and
    ``build(path, backend=..., precision=...)`` for another engine (default: `campusguard.Detector` on
    ``device`` at ``imgsz``). Elsewhere ``auto`` loads the model as given.
    """
    import onnxruntime as ort

    from campusguard.backends.registry import DEFAULT_BACKEND, backend_spec
    from campusguard.errors import ModelLoadError
    from campusguard.models.info import check_imgsz
    from campusguard.models.resolve import DEFAULT_MODEL
    from campusguard.precision import choose_precision, split_label, trial_candidates, variant_file
    from campusguard.precision_cache import calibrate

    spec = backend_spec(backend or DEFAULT_BACKEND)
    compiled = None if precision in ("auto", "int8") else precision
    if compiled is not None and compiled not in spec.precisions:
        raise ModelLoadError(
            f"precision {compiled} is not one the {spec.name} backend runs ({', '.join(spec.precisions)})"
        )
    if precision in ("fp32", "bf16"):
        return EngineChoice(model, backend, compiled if spec.name != DEFAULT_BACKEND else None)
    path = DEFAULT_MODEL if model is None else Path(model)
    if path.suffix != ".onnx" or not path.is_file():
        if precision == "int8":
            raise ModelLoadError(f"precision int8 needs an ONNX model with an INT8 variant; got {model}")
        return EngineChoice(model, backend)
    if precision == "int8":
        if spec.name == DEFAULT_BACKEND:
            choice = choose_precision(path, precision, ())
            log.info("detector precision int8: %s (requested)", choice.model.name)
            return EngineChoice(str(choice.model), backend)
        variant = variant_file(path, spec.int8_tag)
        if variant is None:
            raise ModelLoadError(
                f"{path.name} has no {spec.name} INT8 variant ({path.stem}.{spec.int8_tag}{spec.int8_suffix} next to it); make one "
                f"with `campusguard export MODEL --int8 --backend {spec.name} --data IMAGES`"
            )
        return EngineChoice(str(variant), backend)
    gpu = any(p in ort.get_available_providers() for p in ("CUDAExecutionProvider", "ROCMExecutionProvider"))
    variants = trial_candidates(path, backend=backend)
    among = None if backend is None else [label for label in variants if split_label(label)[0] == spec.name]
    if device not in ("cpu", "auto") or (device == "auto" and gpu) or len(variants) < 2:
        return EngineChoice(model, backend)
    if build is None:
        from campusguard.detector import Detector

        def build(p: Path, backend: str | None = None, precision: str | None = None) -> DetectorLike:
            return Detector(p, device=device, imgsz=imgsz, backend=backend, precision=precision)

    calibration, cached = calibrate(variants, build, imgsz=None if imgsz is None else check_imgsz(imgsz), among=among)
    result = calibration.result
    log.info(
        "detector precision auto: %s (%s)",
        result.line(),
        f"measured {calibration.measured_at}, cached" if cached else f"measured now in {result.seconds:.1f} s",
    )
    chosen = Path(result.model)
    engine = backend_spec(result.backend)
    compiled_precision = (
        result.precision if result.precision in engine.precisions and engine.name != DEFAULT_BACKEND else None
    )
    chosen_model = str(chosen) if chosen != path or model is not None else None
    return EngineChoice(
        chosen_model,
        None if result.backend == DEFAULT_BACKEND and backend is None else result.backend,
        compiled_precision,
    )


def model_for_precision(
    model: str | None,
    device: str,
    precision: Literal["auto", "fp32", "bf16", "int8"],
    imgsz: int | tuple[int, int] | None = None,
    build: Callable[..., DetectorLike] | None = None,
) -> str | None:
    """The model file `choose_engine` loads with the default backend (its ``model``)."""
    return choose_engine(model, device, precision, imgsz=imgsz, build=build).model


def detector_key(config: WatchConfig, cam: CameraConfig) -> tuple[str | None, str, int | tuple[int, int] | None]:
    """The ``(model, device, imgsz)`` a camera's detector is built with: its own settings, else the detector section's."""
    det = config.detector
    return cam.model or det.model, cam.device or det.device, cam.imgsz or det.imgsz


def motion_gate_for(cam: CameraConfig, detector: DetectorLike, frame_wh: tuple[int, int]) -> MotionGate:
    """A camera's motion gate from its ``motion`` section; crops are at least the network's input side."""
    m = cam.motion
    min_side = m.min_region or max(detector.input_hw((frame_wh[1], frame_wh[0])))
    motion = MotionDetector(threshold=m.threshold, min_area=m.min_area, width=m.width, alpha=m.alpha)
    return MotionGate(
        motion,
        keyframe_s=m.keyframe_s,
        min_side=min_side,
        margin=m.margin,
        full_frame_fraction=m.full_frame_fraction,
        input_hw=detector.input_hw,
        max_region_cost=m.max_region_cost,
        busy_after=2 if m.busy_hold_s > 0 else 0,
        busy_hold_s=m.busy_hold_s,
    )


def camera_source(cam: CameraConfig) -> int | str:
    """The camera's source, with the password from ``password_env``/``password_file`` put into its URL."""
    password = resolve_secret(None, cam.password_env, cam.password_file, f"camera {cam.id!r}")
    return cam.source if password is None else with_password(str(cam.source), password)


def open_camera(cam: CameraConfig) -> FrameSource:
    """Open a camera's source with its settings; `SourceError` naming it (its URL redacted) when it cannot be opened."""
    return open_source(
        camera_source(cam), folder_fps=cam.folder_fps, timeout_s=cam.stall_timeout_s, decode_threads=cam.decode_threads
    )


def reader_for(
    cam: CameraConfig,
    queue: FrameQueue,
    stop: threading.Event,
    *,
    opener: Callable[[CameraConfig], FrameSource] = open_camera,
    opened: FrameSource | None = None,
    reference_wh: tuple[int, int] | None = None,
    on_first_frame: Callable[[np.ndarray, float | None], None] | None = None,
) -> CameraReader:
    """The `CameraReader` of a camera section; ``reference_wh``: the frame size its privacy masks'
    pixel coordinates are for (the probed first frame); ``on_first_frame``: see `CameraReader`."""
    return CameraReader(
        cam.id,
        queue,
        stop,
        open_source=lambda: opener(cam),
        live=cam.is_live(),
        realtime=cam.is_realtime(),
        loop=cam.loop,
        fps_cap=cam.fps_cap,
        fallback_fps=cam.folder_fps,
        stall_timeout_s=cam.stall_timeout_s,
        reconnect_initial_s=cam.reconnect.initial_s,
        reconnect_max_s=cam.reconnect.max_s,
        reconnect_factor=cam.reconnect.factor,
        reconnect_reset_s=cam.reconnect.reset_after_s,
        opened=opened,
        mask=frame_mask_for(cam.privacy, reference_wh),
        on_first_frame=on_first_frame,
    )


@dataclass(frozen=True)
class SourceProbe:
    """What opening a source once told: frame size (width, height) and nominal frame rate."""

    resolution_wh: tuple[int, int]
    fps: float


def probe_source(
    cam: CameraConfig, opener: Callable[[CameraConfig], FrameSource] = open_camera
) -> tuple[SourceProbe, PrependedSource]:
    """Open a camera's source and read its first frame; `SourceError` when that fails.

    Returns the frame size and rate, and the open source (its first frame still to come) for
    the reader, so the camera is connected once.
    """
    source = opener(cam)
    try:
        image = source.read()
        if image is None:
            raise SourceError(f"source {redact_url(str(cam.source))!r} opened but gave no frame")
    except BaseException:
        source.close()
        raise
    return probe_of(cam, image, source.fps), PrependedSource(source, image)


def probe_of(cam: CameraConfig, image: np.ndarray, fps: float | None) -> SourceProbe:
    """What a camera's first frame ``image`` and its source's frame rate ``fps`` (None: unknown) tell."""
    rate = float(fps or (cam.folder_fps if not cam.is_live() else 25.0))
    return SourceProbe((int(image.shape[1]), int(image.shape[0])), rate)


def open_store_and_sinks(
    loaded: LoadedConfig, out: TextIO | None = None, store: EventRecorder | None = None, *, escalate: bool = True
) -> tuple[EventRecorder, list[AlertSink]]:
    """The config's event store (or ``store``) and alert sinks, opened.

    `EventSide.open` (`campusguard.app.event_side`) calls it, for every process that owns its
    event side (``watch``, ``serve``, a node, the cluster driver, `campusguard scan`'s one writer),
    so their events go where `watch` puts them. `ConfigError` naming the storage or alerts field
    when one cannot be opened. ``escalate``: put the rules' `Escalator` first in the sinks (not
    for `scan`: nobody is on duty for incidents found in old recordings).
    """
    if store is None:
        store = open_config_store(loaded)
    sinks = open_alert_sinks(loaded, out)
    if not escalate:
        return store, sinks
    try:
        escalator = open_escalator(loaded, sinks, store)
    except BaseException:
        for sink in sinks:
            sink.close(0.5)
        raise
    return store, ([escalator] if escalator is not None else []) + sinks  # closed first: it sends to the others


def open_config_store(loaded: LoadedConfig) -> EventDatabase:
    """The config's event store (SQLite or PostgreSQL), opened: the one way every process opens it
    (`open_store_and_sinks`, the console, which lends it to its pipeline as `EventSide.borrowed`).

    Raises:
        ConfigError: it cannot be opened (naming the ``storage`` field).
        DamagedFileError: the SQLite file is damaged (it names itself and the way out).
    """
    from campusguard.app.events import open_event_store
    from campusguard.app.events.factory import storage_backend

    storage = loaded.config.storage
    try:
        return open_event_store(storage)
    except DamagedFileError:
        raise  # names its own file and the way out; not a config problem
    except CampusGuardError as exc:
        raise loaded.error(("storage", storage_backend(storage)), str(exc)) from None


def open_alert_relay(store: EventRecorder, sinks: Sequence[AlertSink]) -> AlertRelayLoop | None:
    """The relay (not started) that hands a PostgreSQL store's queued updates to ``sinks``
    (`RelayingRecorder.open_relay`), or None when the store does not relay (SQLite: the event writer
    calls the sinks). An event writer with sinks runs its own; a process that holds its sinks apart
    from its writers (a node of the site: its camera services have none) starts this one, lets its
    writers alert nobody, and closes it before the sinks."""
    from campusguard.app.alerts.sinks import send_each

    if not isinstance(store, RelayingRecorder):
        return None

    def send(event: Event) -> None:
        send_each(sinks, event, relaying=True)

    return store.open_relay(send)


def open_escalator(loaded: LoadedConfig, sinks: list[AlertSink], store: EventRecorder) -> AlertSink | None:
    """The `Escalator` of the rules with ``escalate``, sending to ``sinks`` (the config's ``alerts``,
    in order) and reading review states from ``store``; None when no rule escalates."""
    from campusguard.app.alerts.escalation import EscalationRule, Escalator

    config = loaded.config
    rules = {
        (cam.id, rule.display_name()): EscalationRule(rule.escalate.after_s, tuple(rule.escalate.to))
        for cam in config.cameras
        for rule in cam.incident_rules()
        if rule.escalate is not None
    }
    if not rules:
        return None
    targets = {cfg.sink_name: sink for cfg, sink in zip(config.alerts, sinks, strict=True)}
    get_record = getattr(store, "get_record", None)  # the stores that keep review states

    def review_state(event_id: str) -> str | None:
        record = get_record(event_id) if get_record is not None else None
        return None if record is None else str(record.state)

    try:  # a file beside the store, or the table a PostgreSQL store's nodes share (`SinkContext.open_deadlines`)
        deadlines = sink_context(loaded, sys.stdout).open_deadlines()
        return Escalator(deadlines, rules, targets, review_state)
    except CampusGuardError as exc:
        raise loaded.error(("cameras",), str(exc)) from None


def open_alert_sinks(loaded: LoadedConfig, out: TextIO | None = None) -> list[AlertSink]:
    """The config's ``alerts`` sections as opened sinks, in order; ``out``: where stdout sinks write."""
    return [build_alert_sink(loaded, out or sys.stdout, k, s) for k, s in enumerate(loaded.config.alerts)]


def sink_context(loaded: LoadedConfig, out: TextIO) -> SinkContext:
    """What the sinks' builders need from the rest of the config (`SinkContext`)."""
    config = loaded.config
    console = getattr(config, "console", None)  # the console section, where this config has one
    return SinkContext(
        sqlite=Path(config.storage.sqlite),
        out=out,
        blur={cam.id: cam.privacy.blur for cam in config.cameras},
        public_url=getattr(console, "public_url", None),
        postgresql=config.storage.postgresql,  # outboxes, ledger, deadlines shared by the nodes
        retry=config.storage.retry,
    )


def build_alert_sink(loaded: LoadedConfig, out: TextIO, index: int, cfg: AnyAlertSinkConfig) -> AlertSink:
    """Alert sink ``index`` of the config, built by its registry entry (`SINKS`); `ConfigError`
    naming it when it cannot be opened. Outboxes, dead letters and the delivery ledger default to
    files beside the SQLite file (`SinkEntry.files`), so a restart re-sends nothing delivered."""
    try:
        return SINKS.build(cfg, sink_context(loaded, out))
    except DamagedFileError:
        raise  # names its own file and the way out; not a config problem
    except (CampusGuardError, OSError) as exc:
        raise loaded.error(("alerts", index), str(exc)) from None


def storage_files(loaded: LoadedConfig) -> list[tuple[str, Path]]:
    """The SQLite files the config's storage keeps beside its events: ``(what, path)`` of the event
    database (none with PostgreSQL), the sinks' delivery ledger and the MQTT outbox."""
    from campusguard.app.alerts.ledger import ledger_path_for

    storage = loaded.config.storage
    files = [] if storage.postgresql else [("event database", Path(storage.sqlite))]
    files.append(("delivery ledger", ledger_path_for(storage.sqlite)))
    from campusguard.app.alerts.escalation import escalations_path_for

    for cfg in loaded.config.alerts:  # each sink's outbox, as its registry entry names it
        outbox = SINKS.files(cfg, storage.sqlite).outbox
        if outbox is not None and outbox not in {path for _, path in files}:
            files.append((f"{cfg.kind} outbox", outbox))
    files.append(("escalation deadlines", escalations_path_for(storage.sqlite)))
    return files


def check_storage_files(loaded: LoadedConfig, *, repair: bool = False) -> list[Path]:
    """Check the storage's SQLite files before anything starts (`check_sqlite_file`: an empty or
    damaged one is refused with one line naming it); with ``repair`` a damaged one is renamed aside
    (`set_aside`, logged) so a new one is begun. Returns the files set aside.

    Raises:
        DamagedFileError: a file is empty or damaged and ``repair`` is off.
    """
    from campusguard.app.infra.sqlitedb import check_sqlite_file, set_aside

    moved: list[Path] = []
    for what, path in storage_files(loaded):
        try:
            check_sqlite_file(path, what=what)
        except DamagedFileError as exc:
            if not repair:
                raise
            aside = set_aside(path)
            if aside is not None:
                moved.append(aside)
                log.warning(
                    "--repair: %s; set aside as %s, a new one is begun", str(exc).split("; start with")[0], aside
                )
    return moved
