"""Capacity plan: how many machines or GPUs a camera deployment needs, from measured bench results.

Pure arithmetic over `bench` result rows (loaded and validated by `compare.load_results`). Each
unit's load is counted in units (1.0 = one unit fully busy):

    detector load = cameras x fps x active_fraction / (measured images/s x pipeline efficiency)
    host load     = cameras x fps x host core-ms per frame / (host cores x 1000)
    load          = detector + host on a CPU machine (host work and the detector share its cores;
                    the detector's measured throughput used all of them), the larger of the two
                    on a GPU (the host CPU and the GPU work side by side)
    units = ceil(load / (1 - headroom)); cameras per unit = cameras x (1 - headroom) / load
    cost per day = units x price per hour x 24

Without host work (no host-cost file and no ``--host-ms-per-frame``) the host load is 0: the plan
is the detector's alone, optimistic for CPU machines, and it says so. A *unit* is what one bench
result measured: one GPU for a ``cuda:N`` / ``rocm:N`` device, else one whole machine (its CPUs).
Every number the plan uses is returned as an `Assumption` naming where it came from (a measured
result file, the user, or a default), so a printed plan can be audited.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from campusguard.bench.compare import Row, load_results, merge_results
from campusguard.bench.host_cost import load_host_cost
from campusguard.errors import InvalidInputError
from campusguard.ops.preprocess import fit_shape

__all__ = [
    "SECONDS_PER_DAY",
    "DEFAULT_EFFICIENCY",
    "EFFICIENCY_SOURCE",
    "DEFAULT_HEADROOM",
    "HOST_EFFICIENCY_SOURCE",
    "HOST_NOT_COUNTED",
    "Assumption",
    "Deployment",
    "HostWork",
    "host_work",
    "PlanSettings",
    "Choice",
    "MachinePlan",
    "CapacityPlan",
    "parse_resolution",
    "shape_kind",
    "choose_row",
    "plan_machine",
    "plan_capacity",
    "plan_from_results",
]

SECONDS_PER_DAY = 86_400

DEFAULT_EFFICIENCY = 0.942
"""Watch pipeline throughput / model-only throughput with the app's defaults (batch up to 4)."""

EFFICIENCY_SOURCE = (
    "measured: docs/results/watch-throughput-cpu.md (pipe1_b4 / model, one 1280x720 stream, 2-core CPU; "
    "applied to every machine)"
)

HOST_EFFICIENCY_SOURCE = (
    "default with host work counted: 1 on CPU machines, where the measured 0.942 "
    "(docs/results/watch-throughput-cpu.md) is the loss to one stream's decoding and analytics on the same cores, "
    "which the host term now counts on its own; 0.942 on GPUs"
)

DEFAULT_HEADROOM = 0.2
"""Fraction of each unit's usable throughput kept spare (bursts, restarts, a lost unit's cameras)."""

HOST_NOT_COUNTED = (
    "no --host-cost or --host-ms-per-frame given: the plan is the detector's work alone, so its figures "
    "for CPU machines are optimistic: decoding, motion analysis, tracking and rules share their cores with the "
    "detector (2-5x too many cameras per 2-vCPU machine with motion gating; docs/capacity-plan.md)"
)

_GPU_PREFIXES = ("cuda", "rocm", "gpu", "hip")


@dataclass(frozen=True)
class Assumption:
    """One input of the plan and where it came from (``measured: FILE``, ``user-given``, ``default``)."""

    name: str
    value: str
    source: str


@dataclass(frozen=True)
class Deployment:
    """The cameras to serve.

    Attributes:
        cameras: number of cameras (>= 1).
        fps: frames per second each camera delivers to the pipeline (> 0).
        resolution_wh: frame size (width, height) in pixels.
        active_fraction: share of frames that reach the detector (motion gating), in (0, 1].
    """

    cameras: int
    fps: float
    resolution_wh: tuple[int, int]
    active_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.cameras < 1:
            raise InvalidInputError(f"--cameras must be at least 1, got {self.cameras}")
        if not self.fps > 0:
            raise InvalidInputError(f"--fps must be above 0, got {self.fps}")
        w, h = self.resolution_wh
        if w < 1 or h < 1:
            raise InvalidInputError(f"--resolution {w}x{h}: width and height must be at least 1 pixel")
        if not 0 < self.active_fraction <= 1:
            raise InvalidInputError(f"--active-fraction must be in (0, 1], got {self.active_fraction}")

    @property
    def frames_per_second(self) -> float:
        """Frames per second all cameras deliver."""
        return self.cameras * self.fps

    @property
    def frames_per_day(self) -> float:
        """Frames per day all cameras deliver."""
        return self.frames_per_second * SECONDS_PER_DAY

    @property
    def detector_images_per_second(self) -> float:
        """Images per second the detector must take after motion gating."""
        return self.frames_per_second * self.active_fraction

    @property
    def detector_images_per_day(self) -> float:
        """Images per day the detector must take after motion gating."""
        return self.detector_images_per_second * SECONDS_PER_DAY


@dataclass(frozen=True)
class HostWork:
    """CPU work per frame outside the detector, and the cores that do it.

    Attributes:
        ms_per_frame: core-ms per frame (decode, motion analysis, tracking and rules, event path),
            or None: not counted.
        source: where ``ms_per_frame`` came from.
        detail: what it is made of (``decode 3.05 + motion 1.73 + ...``), or empty.
        cores: CPU cores per unit for host work, or None: from each bench record (a CPU machine's
            logical cores; a GPU machine's divided among its GPUs).
    """

    ms_per_frame: float | None = None
    source: str = HOST_NOT_COUNTED
    cores: float | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.ms_per_frame is not None and not (self.ms_per_frame >= 0 and math.isfinite(self.ms_per_frame)):
            raise InvalidInputError(f"--host-ms-per-frame must be a number of at least 0, got {self.ms_per_frame}")
        if self.cores is not None and not self.cores > 0:
            raise InvalidInputError(f"--host-cores must be above 0, got {self.cores}")

    @property
    def counted(self) -> bool:
        """Whether the plan counts host work."""
        return self.ms_per_frame is not None


def host_work(
    deployment: Deployment,
    host_cost: str | Path | None = None,
    ms_per_frame: float | None = None,
    cores: float | None = None,
) -> HostWork:
    """The host work per frame of ``deployment``'s cameras: from a measured host-cost file, a given figure, or none.

    From a file (`campusguard.bench.host_cost`), motion analysis counts only when the deployment
    gates (``active_fraction < 1``), and decoding scales with the cameras' pixels per frame.

    Raises:
        InvalidInputError: both a file and a figure given, or a bad file (one line naming it).
    """
    if host_cost is not None and ms_per_frame is not None:
        raise InvalidInputError("give --host-cost FILE or --host-ms-per-frame X, not both")
    if host_cost is not None:
        cost = load_host_cost(host_cost)
        ms, parts = cost.ms_per_frame(deployment.resolution_wh, gated=deployment.active_fraction < 1)
        notes = f"; {cost.notes}" if cost.notes else ""
        return HostWork(ms, f"measured: {cost.source} ({cost.cpu}, one core{notes})", cores, parts)
    if ms_per_frame is not None:
        return HostWork(ms_per_frame, "user-given (--host-ms-per-frame)", cores)
    return HostWork(cores=cores)


@dataclass(frozen=True)
class PlanSettings:
    """How to read the results.

    Attributes:
        model: architecture name (``yolov8n``) or model file name / stem as recorded by `bench`.
        backend: bench backend to use, or None for the fastest measured one on each machine.
        precision: ``fp32``, ``fp16`` or ``int8``.
        batch: the batch the pipeline forms (the result with the closest batch, by ratio, is used).
        imgsz: network input long side wanted, or None for any measured size.
        efficiency: watch pipeline throughput as a fraction of model-only throughput, in (0, 1], or None
            for the default: the measured `DEFAULT_EFFICIENCY`, except 1.0 on CPU machines with host
            work counted (the measured figure is the loss to one stream's host work on the same
            cores, which the host term then counts on its own).
        headroom: fraction of usable throughput kept spare, in [0, 1).
        price_per_hour: USD per unit-hour for machines whose results carry no price, or None.
    """

    model: str = "yolov8n"
    backend: str | None = None
    precision: str = "fp32"
    batch: int = 4
    imgsz: int | None = None
    efficiency: float | None = None
    headroom: float = DEFAULT_HEADROOM
    price_per_hour: float | None = None

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise InvalidInputError(f"--batch must be at least 1, got {self.batch}")
        if self.imgsz is not None and self.imgsz < 1:
            raise InvalidInputError(f"--imgsz must be at least 1, got {self.imgsz}")
        if self.efficiency is not None and not 0 < self.efficiency <= 1:
            raise InvalidInputError(f"--efficiency must be in (0, 1], got {self.efficiency}")
        if not 0 <= self.headroom < 1:
            raise InvalidInputError(f"--headroom must be in [0, 1), got {self.headroom}")
        if self.price_per_hour is not None and self.price_per_hour < 0:
            raise InvalidInputError(f"--price-per-hour must not be negative, got {self.price_per_hour}")

    def efficiency_for(self, unit: str, host: HostWork) -> float:
        """The pipeline efficiency for a ``unit`` (``machine`` or ``GPU``): the given one, else the default."""
        if self.efficiency is not None:
            return self.efficiency
        return 1.0 if host.counted and unit == "machine" else DEFAULT_EFFICIENCY


@dataclass(frozen=True)
class Choice:
    """The measured result a machine's plan rests on.

    Attributes:
        row: the bench row (model, backend, precision, batch, scenario, fps, source file).
        shape: ``aspect-matched`` (the input `fit_shape` gives the cameras' frames), ``square``,
            ``other`` or ``unknown`` (no input shape recorded).
    """

    row: Row
    shape: str


@dataclass(frozen=True)
class MachinePlan:
    """The plan on one measured machine or GPU.

    Attributes:
        machine: the results' machine name.
        unit: ``GPU`` or ``machine``: what one measured throughput stands for.
        choice: the result used.
        measured_ips: model-only images per second of one unit (measured).
        usable_ips: ``measured_ips x efficiency x (1 - headroom)``.
        cameras_per_unit: cameras one unit carries (fractional), host work included when counted.
        units: units needed (rounded up).
        utilisation: share of the units' capacity the deployment uses (of the limiting resource on
            a GPU; of the cores on a CPU machine with host work counted).
        efficiency: the pipeline efficiency applied.
        bottleneck: ``detector`` or ``host``: the larger share of the work (a CPU machine), or the
            resource that runs out first (a GPU); ``detector`` when host work is not counted.
        cameras_by_detector: cameras one unit carries counting the detector alone.
        host_ms_per_frame: host core-ms per frame, or None when not counted.
        host_cores: CPU cores per unit for host work (None when not counted).
        host_cores_source: where ``host_cores`` came from.
        cameras_by_host: cameras one unit's host cores carry counting host work alone, or None.
        detector_core_ms: core-ms per detector image on a CPU machine with host work counted
            (``cores x 1000 / (measured_ips x efficiency)``), else None.
        host_share: on a CPU machine with host work counted, host work's share of its core time, else None.
        price_per_hour: USD per unit-hour, or None when unknown.
        price_source: where the price came from.
        cost_per_day: ``units x price_per_hour x 24`` in USD, or None when the price is unknown.
    """

    machine: str
    unit: str
    choice: Choice
    measured_ips: float
    usable_ips: float
    cameras_per_unit: float
    units: int
    utilisation: float
    price_per_hour: float | None
    price_source: str
    cost_per_day: float | None
    efficiency: float = DEFAULT_EFFICIENCY
    bottleneck: str = "detector"
    cameras_by_detector: float = 0.0
    host_ms_per_frame: float | None = None
    host_cores: float | None = None
    host_cores_source: str = ""
    cameras_by_host: float | None = None
    detector_core_ms: float | None = None
    host_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.choice.row
        return {
            "machine": self.machine,
            "unit": self.unit,
            "model": r.model,
            "backend": r.backend,
            "precision": r.precision,
            "batch": r.batch,
            "scenario": r.scenario,
            "input_hw": list(r.input_hw) if r.input_hw else None,
            "input_shape": self.choice.shape,
            "source": r.source,
            "measured_ips": self.measured_ips,
            "usable_ips": self.usable_ips,
            "cameras_per_unit": self.cameras_per_unit,
            "units": self.units,
            "utilisation": self.utilisation,
            "price_per_hour": self.price_per_hour,
            "price_source": self.price_source,
            "cost_per_day": self.cost_per_day,
            "efficiency": self.efficiency,
            "bottleneck": self.bottleneck,
            "cameras_by_detector": self.cameras_by_detector,
            "host_ms_per_frame": self.host_ms_per_frame,
            "host_cores": self.host_cores,
            "host_cores_source": self.host_cores_source,
            "cameras_by_host": self.cameras_by_host,
            "detector_core_ms": self.detector_core_ms,
            "host_share": self.host_share,
        }


@dataclass(frozen=True)
class CapacityPlan:
    """A deployment planned on every machine found in the results.

    Attributes:
        deployment: the cameras.
        settings: how the results were read.
        host: the host work per frame counted (or not).
        machines: one plan per machine with a matching result.
        unmatched: machine name -> why it has no plan (what it has instead).
        assumptions: every input with its source, in print order.
    """

    deployment: Deployment
    settings: PlanSettings
    host: HostWork
    machines: list[MachinePlan]
    unmatched: dict[str, str] = field(default_factory=dict)
    assumptions: list[Assumption] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.deployment
        return {
            "deployment": {
                "cameras": d.cameras,
                "fps": d.fps,
                "resolution_wh": list(d.resolution_wh),
                "active_fraction": d.active_fraction,
                "frames_per_second": d.frames_per_second,
                "frames_per_day": d.frames_per_day,
                "detector_images_per_second": d.detector_images_per_second,
                "detector_images_per_day": d.detector_images_per_day,
            },
            "host": {
                "counted": self.host.counted,
                "ms_per_frame": self.host.ms_per_frame,
                "source": self.host.source,
                "detail": self.host.detail,
                "cores": self.host.cores,
            },
            "machines": [m.to_dict() for m in self.machines],
            "unmatched": dict(self.unmatched),
            "assumptions": [asdict(a) for a in self.assumptions],
        }


def parse_resolution(text: str) -> tuple[int, int]:
    """``"1280x720"`` -> ``(1280, 720)`` (width, height in pixels)."""
    parts = text.lower().replace("*", "x").split("x")
    try:
        w, h = (int(p) for p in parts)
    except ValueError:
        raise InvalidInputError(f"--resolution {text!r} must be WIDTHxHEIGHT in pixels, e.g. 1280x720") from None
    if w < 1 or h < 1:
        raise InvalidInputError(f"--resolution {text!r}: width and height must be at least 1 pixel")
    return w, h


def shape_kind(input_hw: tuple[int, int] | None, resolution_wh: tuple[int, int]) -> str:
    """How a measured input shape fits the cameras: ``aspect-matched``, ``square``, ``other`` or ``unknown``.

    Aspect-matched means the shape the pipeline gives a ``resolution_wh`` frame at that long side
    (`fit_shape`, e.g. 384x640 for 1280x720 at 640); a square camera's square input counts as
    aspect-matched.
    """
    if input_hw is None:
        return "unknown"
    side = max(input_hw)
    w, h = resolution_wh
    if fit_shape((h, w), (side, side)) == tuple(input_hw):
        return "aspect-matched"
    if input_hw[0] == input_hw[1]:
        return "square"
    return "other"


_SHAPE_RANK = {"aspect-matched": 0, "square": 1, "unknown": 2}


def _model_matches(label: str, wanted: str) -> bool:
    name = Path(wanted).name
    return label in (wanted, name) or Path(label).stem in (wanted, Path(name).stem)


def _candidates(rows: Sequence[Row], settings: PlanSettings) -> list[Row]:
    return [
        r
        for r in rows
        if r.status == "ok"
        and r.fps
        and _model_matches(r.model, settings.model)
        and (settings.backend is None or r.backend == settings.backend)
        and r.precision == settings.precision
    ]


def _size_gap(input_hw: tuple[int, int] | None, imgsz: int | None) -> float:
    """Pixels between a result's input long side and the wanted one; an unrecorded size comes last."""
    if imgsz is None:
        return 0.0
    return float(abs(max(input_hw) - imgsz)) if input_hw else math.inf


def choose_row(rows: Sequence[Row], settings: PlanSettings, resolution_wh: tuple[int, int]) -> Choice | None:
    """The measured result closest to what the cameras need, from one machine's rows.

    Among successful rows of the model, backend (any when None) and precision, in order: input long
    side closest to ``settings.imgsz`` (when given); an aspect-matched input before a square one
    (others are not used); batch closest to ``settings.batch`` by ratio (4 is as close to 8 as to 2);
    the multi-stream scenario (frames from several cameras per call) before batches of one pool;
    then the highest throughput (so with any backend, the fastest one).
    """
    scored = []
    for r in _candidates(rows, settings):
        kind = shape_kind(r.input_hw, resolution_wh)
        if kind == "other":
            continue
        size_gap = _size_gap(r.input_hw, settings.imgsz)
        batch_gap = abs(math.log(r.batch / settings.batch))
        key = (size_gap, _SHAPE_RANK[kind], round(batch_gap, 9), r.scenario != "multi-stream", -(r.fps or 0.0))
        scored.append((key, r, kind))
    if not scored:
        return None
    _, row, kind = min(scored, key=lambda t: t[0])
    return Choice(row, kind)


def _unit(row: Row) -> str:
    device = (row.device or "").lower()
    return "GPU" if device.startswith(_GPU_PREFIXES) else "machine"


def _host_cores(row: Row, unit: str, host: HostWork) -> tuple[float, str]:
    """CPU cores per unit for host work and where the figure came from."""
    if host.cores is not None:
        return host.cores, "user-given (--host-cores)"
    if row.cpu_cores is None:
        raise InvalidInputError(
            f"{row.machine}: its bench result {row.source} records no CPU core count; give --host-cores N"
        )
    if unit == "GPU":
        gpus = max(1, row.gpu_count or 1)
        share = f", divided among its {gpus} GPUs" if gpus > 1 else ", one GPU"
        return row.cpu_cores / gpus, f"bench record: {row.source} (environment.cpu.logical_cores{share})"
    return float(row.cpu_cores), f"bench record: {row.source} (environment.cpu.logical_cores)"


def plan_machine(
    choice: Choice, deployment: Deployment, settings: PlanSettings, host: HostWork | None = None
) -> MachinePlan:
    """Units, utilisation and cost of serving ``deployment`` with the chosen result's throughput and ``host`` work."""
    host = host or HostWork()
    row = choice.row
    measured = float(row.fps or 0.0)
    if measured <= 0:
        raise InvalidInputError(f"{row.machine}: result {row.label} has no throughput")
    unit = _unit(row)
    efficiency = settings.efficiency_for(unit, host)
    usable = measured * efficiency * (1.0 - settings.headroom)
    spare = 1.0 - settings.headroom
    detector_load = deployment.detector_images_per_second / (measured * efficiency)  # in units
    cores: float | None = None
    cores_source = ""
    host_load = 0.0  # in units
    if host.ms_per_frame is not None:
        cores, cores_source = _host_cores(row, unit, host)
        host_load = deployment.frames_per_second * host.ms_per_frame / (cores * 1000.0)
    shared = host.counted and unit == "machine"  # host work and the detector on the same cores
    load = detector_load + host_load if unit == "machine" else max(detector_load, host_load)
    units = max(1, math.ceil(load / spare - 1e-9))
    by_host = deployment.cameras * spare / host_load if host_load > 0 else None
    if row.price_per_hour is not None:
        price: float | None = float(row.price_per_hour)
        price_source = f"results file: {row.source} (config.price_per_hour, as given to bench)"
    elif settings.price_per_hour is not None:
        price, price_source = settings.price_per_hour, "user-given (--price-per-hour)"
    else:
        price, price_source = None, "unknown: no price in the results and no --price-per-hour"
    return MachinePlan(
        machine=row.machine,
        unit=unit,
        choice=choice,
        measured_ips=measured,
        usable_ips=usable,
        cameras_per_unit=deployment.cameras * spare / load,
        units=units,
        utilisation=load / units,
        price_per_hour=price,
        price_source=price_source,
        cost_per_day=units * price * 24.0 if price is not None else None,
        efficiency=efficiency,
        bottleneck="host" if host_load > detector_load else "detector",
        cameras_by_detector=usable / (deployment.fps * deployment.active_fraction),
        host_ms_per_frame=host.ms_per_frame,
        host_cores=cores,
        host_cores_source=cores_source,
        cameras_by_host=by_host,
        detector_core_ms=cores * 1000.0 / (measured * efficiency) if shared and cores else None,
        host_share=host_load / (host_load + detector_load) if shared else None,
    )


def _available(rows: Sequence[Row]) -> str:
    """``model backend precision`` combinations with a successful result, for error messages."""
    combos = sorted({f"{r.model} {r.backend} {r.precision}" for r in rows if r.status == "ok" and r.fps})
    return ", ".join(combos) or "no successful result"


def plan_capacity(
    rows: Sequence[Row],
    deployment: Deployment,
    settings: PlanSettings,
    given: Sequence[str] = (),
    host: HostWork | None = None,
) -> CapacityPlan:
    """Plan ``deployment`` on every machine in ``rows``.

    Args:
        rows: merged bench rows of one or more machines (`merge_results` with ``by_input_shape``).
        deployment: the cameras.
        settings: how to read the results.
        host: host work per frame and its cores (`host_work`); default: not counted.
        given: names of settings the user gave (``efficiency``, ``headroom``, ``model`` ...), so the
            assumptions say ``user-given`` rather than ``default``.

    Raises:
        InvalidInputError: no machine has a matching result (the message lists what there is), or
            host work is counted and a machine's core count is neither recorded nor given.
    """
    host = host or HostWork()
    by_machine: dict[str, list[Row]] = {}
    for r in rows:
        by_machine.setdefault(r.machine, []).append(r)
    plans: list[MachinePlan] = []
    unmatched: dict[str, str] = {}
    for machine, mrows in by_machine.items():
        choice = choose_row(mrows, settings, deployment.resolution_wh)
        if choice is None:
            unmatched[machine] = f"no successful result matches; it has: {_available(mrows)}"
        else:
            plans.append(plan_machine(choice, deployment, settings, host))
    if not plans:
        backend = settings.backend or "any backend"
        listing = "; ".join(f"{m}: {_available(rs)}" for m, rs in by_machine.items())
        raise InvalidInputError(
            f"no result for model {settings.model!r} ({backend}, {settings.precision}) at a square or "
            f"{deployment.resolution_wh[0]}x{deployment.resolution_wh[1]}-matched input; available: {listing}"
        )
    assumptions = _assumptions(deployment, settings, host, plans, given)
    return CapacityPlan(deployment, settings, host, plans, unmatched, assumptions)


def _src(name: str, given: Sequence[str]) -> str:
    return "user-given" if name in given else "default"


def _default_efficiency(host: HostWork) -> str:
    if host.counted:
        return f"1 on CPU machines, {DEFAULT_EFFICIENCY:g} on GPUs"
    return f"{DEFAULT_EFFICIENCY:g}"


def _host_value(host: HostWork) -> str:
    if host.ms_per_frame is None:
        return "not counted"
    return f"{host.ms_per_frame:.2f} core-ms" + (f" ({host.detail})" if host.detail else "")


def _efficiency_source(settings: PlanSettings, host: HostWork) -> str:
    if settings.efficiency is not None:
        return "user-given"
    return HOST_EFFICIENCY_SOURCE if host.counted else EFFICIENCY_SOURCE


def _assumptions(
    deployment: Deployment, settings: PlanSettings, host: HostWork, plans: Sequence[MachinePlan], given: Sequence[str]
) -> list[Assumption]:
    d, s = deployment, settings
    out = [
        Assumption("cameras", str(d.cameras), "user-given"),
        Assumption("frames per second per camera", f"{d.fps:g}", "user-given"),
        Assumption("resolution", f"{d.resolution_wh[0]}x{d.resolution_wh[1]}", "user-given"),
        Assumption(
            "share of frames reaching the detector (motion gating)",
            f"{d.active_fraction:g}",
            _src("active_fraction", given) + ("" if "active_fraction" in given else " (no gating)"),
        ),
        Assumption("model", s.model, _src("model", given)),
        Assumption("backend", s.backend or "fastest measured", _src("backend", given)),
        Assumption("precision", s.precision, _src("precision", given)),
        Assumption(
            "batch wanted",
            str(s.batch),
            _src("batch", given) + ("" if "batch" in given else " (watch detector.batch_size)"),
        ),
        Assumption("input long side wanted", str(s.imgsz) if s.imgsz else "any measured", _src("imgsz", given)),
        Assumption(
            "pipeline efficiency (watch / model-only throughput)",
            f"{s.efficiency:g}" if s.efficiency is not None else _default_efficiency(host),
            _efficiency_source(s, host),
        ),
        Assumption("headroom (spare share of usable throughput)", f"{s.headroom:g}", _src("headroom", given)),
        Assumption(
            "host work per frame (decode, motion analysis, tracking and rules, event path)",
            _host_value(host),
            host.source,
        ),
    ]
    for p in plans:
        r = p.choice.row
        hw = f"{r.input_hw[0]}x{r.input_hw[1]}" if r.input_hw else "unknown"
        out.append(
            Assumption(
                f"{p.machine}: throughput per {p.unit}",
                f"{p.measured_ips:.1f} images/s ({r.label}, input {hw} h x w, {p.choice.shape})",
                f"measured: {r.source}",
            )
        )
        if p.host_cores is not None:
            out.append(
                Assumption(
                    f"{p.machine}: CPU cores per {p.unit} for host work", f"{p.host_cores:g}", p.host_cores_source
                )
            )
        if p.detector_core_ms is not None:
            out.append(
                Assumption(
                    f"{p.machine}: detector core-ms per image (cores shared with host work)",
                    f"{p.detector_core_ms:.2f}",
                    f"derived: {p.host_cores:g} cores x 1000 / ({p.measured_ips:.1f} images/s x efficiency {p.efficiency:g})",
                )
            )
        price = f"{p.price_per_hour:g} USD/h" if p.price_per_hour is not None else "unknown"
        out.append(Assumption(f"{p.machine}: price per {p.unit}-hour", price, p.price_source))
    return out


def plan_from_results(
    paths: Sequence[str | Path],
    deployment: Deployment,
    settings: PlanSettings,
    given: Sequence[str] = (),
    host: HostWork | None = None,
) -> CapacityPlan:
    """Load bench result files or folders (validated) and plan ``deployment`` on their machines."""
    rows, _commands, _notes = merge_results(load_results(paths), by_input_shape=True)
    return plan_capacity(rows, deployment, settings, given, host)
