"""Capacity plan: units rounded up, the input shape and batch chosen, motion gating, host work, cost, and the errors.

Every result file here is written through `write_result`, so it passes the real result schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes_bench import host_cost_doc, record, result_doc

from campusguard.bench.host_cost import write_host_cost
from campusguard.bench.plan import (
    EFFICIENCY_SOURCE,
    HOST_EFFICIENCY_SOURCE,
    Deployment,
    HostWork,
    PlanSettings,
    host_work,
    parse_resolution,
    plan_from_results,
    shape_kind,
)
from campusguard.bench.results import write_result
from campusguard.errors import InvalidInputError

EXACT = {"efficiency": 1.0, "headroom": 0.0}
"""Settings under which a unit's usable throughput is its measured one (the arithmetic is easy to read)."""


def rec(input_hw: tuple[int, int] | None = (640, 640), device: str = "cpu", scenario: str = "batch", **kw: Any) -> dict:
    """`record` with the input shape, device and scenario the plan reads."""
    r = record(**kw)
    r["device"] = device
    if r["status"] == "ok":
        r["input_hw"] = list(input_hw) if input_hw else None
        r["scenario"] = scenario
        r["streams"] = r["batch"] if scenario == "multi-stream" else None
    return r


def write(
    folder: Path,
    machine: str,
    records: list[dict],
    price: float | None = None,
    name: str = "r.json",
    cores: int | None = None,
    gpus: int = 0,
) -> Path:
    """A result file; with ``cores`` its environment records the machine's logical cores and ``gpus`` GPUs."""
    doc = result_doc(machine, records, price=price)
    if cores is not None:
        doc["environment"] = {"cpu": {"name": "Test CPU", "logical_cores": cores}, "gpus": [{"name": "G"}] * gpus}
    return write_result(doc, folder / machine / name)


def plan(
    folder: Path,
    cameras: int = 10,
    fps: float = 10.0,
    wh: tuple[int, int] = (1280, 720),
    active: float = 1.0,
    host: HostWork | None = None,
    **kw: Any,
):  # type: ignore[no-untyped-def]
    return plan_from_results([folder], Deployment(cameras, fps, wh, active), PlanSettings(**kw), host=host)


@pytest.mark.parametrize(
    ("cameras", "units"),
    [(1, 1), (10, 1), (20, 2), (21, 3), (1000, 100)],  # 100 images/s per unit, 10 fps per camera
)
def test_units_are_rounded_up(tmp_path: Path, cameras: int, units: int) -> None:
    write(tmp_path, "box", [rec(fps=100.0)])
    p = plan(tmp_path, cameras=cameras, **EXACT).machines[0]
    assert p.units == units
    assert p.cameras_per_unit == pytest.approx(10.0)
    assert p.utilisation == pytest.approx(cameras * 10 / (units * 100))


def test_efficiency_and_headroom_shrink_each_unit(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=100.0)])
    p = plan(tmp_path, cameras=20).machines[0]  # defaults: 0.942 efficiency, 0.2 headroom
    assert p.usable_ips == pytest.approx(100 * 0.942 * 0.8)
    assert p.units == 3  # 200 / 75.36 = 2.65
    assert plan(tmp_path, cameras=20, efficiency=0.5, headroom=0.5).machines[0].units == 8  # 200 / 25


def test_the_aspect_matched_input_is_preferred_for_wide_cameras(tmp_path: Path) -> None:
    # two runs of the same combination at two input shapes, in two files: both must be kept
    write(tmp_path, "box", [rec(fps=50.0, input_hw=(640, 640))], name="square.json")
    write(tmp_path, "box", [rec(fps=80.0, input_hw=(384, 640))], name="wide.json")
    wide = plan(tmp_path, wh=(1280, 720)).machines[0]
    assert (wide.choice.row.input_hw, wide.choice.shape, wide.measured_ips) == ((384, 640), "aspect-matched", 80.0)
    # a square camera: 384x640 does not fit it, the square input is its aspect-matched one
    square = plan(tmp_path, wh=(1024, 1024)).machines[0]
    assert (square.choice.row.input_hw, square.choice.shape) == ((640, 640), "aspect-matched")
    # a portrait camera: 384x640 is the wrong way round; the square input is used and named so
    portrait = plan(tmp_path, wh=(720, 1280)).machines[0]
    assert (portrait.choice.row.input_hw, portrait.choice.shape) == ((640, 640), "square")


def test_shape_kind() -> None:
    assert shape_kind((384, 640), (1280, 720)) == "aspect-matched"
    assert shape_kind((192, 320), (1280, 720)) == "aspect-matched"
    assert shape_kind((640, 640), (1280, 720)) == "square"
    assert shape_kind((640, 384), (1280, 720)) == "other"
    assert shape_kind(None, (1280, 720)) == "unknown"


def test_input_size_and_batch_closest_to_what_the_cameras_need(tmp_path: Path) -> None:
    write(
        tmp_path,
        "gpu",
        [
            rec(batch=1, fps=80.0, device="cuda:0"),
            rec(batch=8, fps=160.0, device="cuda:0"),
            rec(batch=32, fps=130.0, device="cuda:0"),
            rec(batch=8, fps=400.0, device="cuda:0", input_hw=(320, 320)),
        ],
    )
    p = plan(tmp_path, batch=4, imgsz=640).machines[0]
    assert (p.choice.row.batch, p.measured_ips, p.unit) == (8, 160.0, "GPU")  # 8 is closer to 4 than 1 by ratio
    assert plan(tmp_path, batch=1, imgsz=640).machines[0].choice.row.batch == 1
    assert plan(tmp_path, batch=24, imgsz=640).machines[0].choice.row.batch == 32
    assert plan(tmp_path, batch=8, imgsz=320).machines[0].measured_ips == 400.0


def test_multi_stream_result_is_preferred_at_the_same_batch(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(batch=4, fps=40.0), rec(batch=4, fps=36.0, scenario="multi-stream")])
    p = plan(tmp_path, batch=4).machines[0]
    assert (p.choice.row.scenario, p.measured_ips) == ("multi-stream", 36.0)


def test_fastest_backend_unless_one_is_named(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=40.0), rec(backend="torch", fps=25.0)])
    assert plan(tmp_path).machines[0].choice.row.backend == "onnxruntime"
    assert plan(tmp_path, backend="torch").machines[0].measured_ips == 25.0


def test_motion_gating_divides_the_detector_load_not_the_frames(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=100.0)])
    full = plan(tmp_path, cameras=100, **EXACT)
    gated = plan(tmp_path, cameras=100, active=0.25, **EXACT)
    assert full.deployment.frames_per_day == gated.deployment.frames_per_day == 100 * 10 * 86_400
    assert gated.deployment.detector_images_per_second == 250.0
    assert (full.machines[0].units, gated.machines[0].units) == (10, 3)
    assert gated.machines[0].cameras_per_unit == pytest.approx(40.0)


def test_cost_from_the_results_price_else_the_user_else_unknown(tmp_path: Path) -> None:
    write(tmp_path, "priced", [rec(fps=100.0, price=2.0)], price=2.0)
    write(tmp_path, "unpriced", [rec(fps=100.0)])
    p = plan(tmp_path, cameras=25, price_per_hour=0.5, **EXACT)  # 250 images/s: 3 units each
    by = {m.machine: m for m in p.machines}
    assert (by["priced"].units, by["priced"].cost_per_day) == (3, pytest.approx(3 * 2.0 * 24))
    assert "results file" in by["priced"].price_source
    assert by["unpriced"].cost_per_day == pytest.approx(3 * 0.5 * 24)
    assert by["unpriced"].price_source == "user-given (--price-per-hour)"
    unknown = plan(tmp_path, cameras=25, **EXACT)
    m = next(m for m in unknown.machines if m.machine == "unpriced")
    assert m.cost_per_day is None and m.price_source.startswith("unknown")


def test_every_assumption_names_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "box", [rec(fps=100.0)])
    p = plan_from_results([tmp_path], Deployment(4, 10.0, (1280, 720)), PlanSettings(headroom=0.3), given=["headroom"])
    src = {a.name: a.source for a in p.assumptions}
    assert src["headroom (spare share of usable throughput)"] == "user-given"
    assert src["pipeline efficiency (watch / model-only throughput)"] == EFFICIENCY_SOURCE
    assert "docs/results/watch-throughput-cpu.md" in EFFICIENCY_SOURCE
    assert src["box: throughput per machine"] == f"measured: {path}"
    assert src["model"] == "default"
    d = p.to_dict()
    assert d["machines"][0]["units"] == 1 and d["deployment"]["frames_per_second"] == 40.0


def test_a_machine_without_a_match_is_reported_beside_the_others(tmp_path: Path) -> None:
    write(tmp_path, "cpu", [rec(fps=100.0)])
    write(tmp_path, "gpu", [rec(backend="torch", precision="fp16", fps=300.0, device="cuda:0")])
    p = plan(tmp_path)
    assert [m.machine for m in p.machines] == ["cpu"]
    assert "yolov8n torch fp16" in p.unmatched["gpu"]


def test_nothing_matches_lists_what_is_available(tmp_path: Path) -> None:
    write(
        tmp_path,
        "cpu",
        [rec(fps=100.0), rec(precision="int8", fps=150.0), rec(model="yolov8s", status="skipped", reason="x")],
    )
    with pytest.raises(
        InvalidInputError,
        match=r"no result for model 'yolov9c'.*available: cpu: yolov8n onnxruntime fp32, yolov8n onnxruntime int8$",
    ):
        plan(tmp_path, model="yolov9c")


def test_a_model_file_matches_by_name_or_stem(tmp_path: Path) -> None:
    write(tmp_path, "cpu", [rec(model="src/campusguard/models/assets/campusguard-default.onnx", fps=60.0)])
    assert plan(tmp_path, model="campusguard-default").machines[0].measured_ips == 60.0
    assert plan(tmp_path, model="/elsewhere/campusguard-default.onnx").machines[0].measured_ips == 60.0


def test_no_results_in_the_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(InvalidInputError, match="no bench result files in"):
        plan(tmp_path)


@pytest.mark.parametrize("text", ["1280", "axb", "0x720", "1280x720x3", ""])
def test_bad_resolution(text: str) -> None:
    with pytest.raises(InvalidInputError, match="--resolution"):
        parse_resolution(text)


def test_parse_resolution() -> None:
    assert parse_resolution("1280x720") == (1280, 720)
    assert parse_resolution("1920X1080") == (1920, 1080)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cameras": 0}, "--cameras must be at least 1, got 0"),
        ({"fps": 0.0}, "--fps must be above 0"),
        ({"active_fraction": 0.0}, r"--active-fraction must be in \(0, 1\]"),
        ({"active_fraction": 1.5}, r"--active-fraction must be in \(0, 1\]"),
    ],
)
def test_bad_deployment(kwargs: dict, message: str) -> None:
    args: dict[str, Any] = {"cameras": 10, "fps": 10.0, "resolution_wh": (1280, 720), **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        Deployment(**args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"headroom": 1.0}, r"--headroom must be in \[0, 1\)"),
        ({"efficiency": 0.0}, r"--efficiency must be in \(0, 1\]"),
        ({"batch": 0}, "--batch must be at least 1"),
        ({"price_per_hour": -1.0}, "--price-per-hour must not be negative"),
    ],
)
def test_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        PlanSettings(**kwargs)


def test_a_result_without_an_input_shape_is_used_last_and_named_unknown(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=90.0, input_hw=None, batch=4)], name="old.json")
    only = plan(tmp_path, imgsz=640).machines[0]
    assert (only.choice.shape, only.measured_ips) == ("unknown", 90.0)
    write(tmp_path, "box", [rec(fps=50.0, input_hw=(320, 320), batch=1)], name="new.json")
    assert plan(tmp_path, imgsz=640).machines[0].choice.row.input_hw == (320, 320)  # a known size first


# host work -------------------------------------------------------------------------------------
def test_host_work_shares_a_cpu_machines_cores_with_the_detector(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=100.0)], cores=2)  # 2 cores x 1000 / 100 images/s = 20 core-ms per image
    alone = plan(tmp_path, cameras=20, headroom=0.0).machines[0]
    assert (alone.cameras_per_unit, alone.units) == (pytest.approx(100 * 0.942 / 10), 3)  # detector only, as before
    p = plan(tmp_path, cameras=20, headroom=0.0, host=HostWork(5.0)).machines[0]
    # each camera: 10 fps x (5 host + 20 detector) core-ms = 250 core-ms/s of the machine's 2,000
    assert p.detector_core_ms == pytest.approx(20.0) and p.efficiency == 1.0
    assert p.cameras_per_unit == pytest.approx(8.0)
    assert p.units == 3  # 20 / 8 = 2.5
    assert p.utilisation == pytest.approx(20 * 250 / (3 * 2000))
    assert (p.bottleneck, p.host_share, p.host_cores) == ("detector", pytest.approx(0.2), 2.0)
    assert p.cameras_by_host == pytest.approx(2000 / 50)  # host work alone: 40 cameras


def test_with_gating_host_work_becomes_the_bottleneck_of_a_cpu_machine(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=100.0)], cores=2)
    p = plan(tmp_path, cameras=100, active=0.1, host=HostWork(6.0), headroom=0.2).machines[0]
    # each camera: 10 x (6 + 0.1 x 20) = 80 core-ms/s; 2,000 x 0.8 usable: 20 cameras; detector alone would say 80
    assert p.cameras_per_unit == pytest.approx(20.0)
    assert p.units == 5
    assert (p.bottleneck, p.host_share) == ("host", pytest.approx(0.75))
    assert plan(tmp_path, cameras=100, active=0.1, efficiency=1.0).machines[0].cameras_per_unit == pytest.approx(80.0)


def test_a_gpus_host_cores_limit_it_apart_from_the_gpu(tmp_path: Path) -> None:
    write(tmp_path, "gpu", [rec(fps=1000.0, device="cuda:0")], cores=16, gpus=4)  # 4 host cores per GPU
    det_only = plan(tmp_path, cameras=200, headroom=0.0).machines[0]
    assert det_only.cameras_per_unit == pytest.approx(94.2)  # 1000 x 0.942 / 10
    p = plan(tmp_path, cameras=200, headroom=0.0, host=HostWork(5.0)).machines[0]
    assert (p.host_cores, p.efficiency) == (4.0, 0.942)  # the GPU keeps the measured efficiency
    assert "divided among its 4 GPUs" in p.host_cores_source
    assert p.cameras_by_host == pytest.approx(4 * 1000 / (10 * 5.0))  # 80 cameras of host work
    assert (p.cameras_per_unit, p.units, p.bottleneck) == (pytest.approx(80.0), 3, "host")
    assert p.detector_core_ms is None and p.host_share is None
    more_cores = plan(tmp_path, cameras=200, headroom=0.0, host=HostWork(5.0, cores=8)).machines[0]
    assert (more_cores.cameras_per_unit, more_cores.units, more_cores.bottleneck) == (
        pytest.approx(94.2),
        3,
        "detector",
    )
    assert more_cores.host_cores_source == "user-given (--host-cores)"


def test_no_host_work_changes_nothing(tmp_path: Path) -> None:
    write(tmp_path, "box", [rec(fps=100.0)], cores=2)
    before = plan(tmp_path, cameras=37, active=0.3)
    zero = plan(tmp_path, cameras=37, active=0.3, efficiency=0.942, host=HostWork(0.0))
    assert zero.machines[0].units == before.machines[0].units
    assert zero.machines[0].cameras_per_unit == pytest.approx(before.machines[0].cameras_per_unit)
    assert before.machines[0].bottleneck == "detector" and before.machines[0].host_ms_per_frame is None


def test_host_work_from_a_measured_file_counts_motion_only_with_gating(tmp_path: Path) -> None:
    path = write_host_cost(host_cost_doc(decode=3.0, motion=1.5, tracking_rules=0.4, events=0.1), tmp_path / "h.json")
    gated = host_work(Deployment(10, 10.0, (1280, 720), 0.3), host_cost=path)
    assert gated.ms_per_frame == pytest.approx(5.0)
    assert gated.source == f"measured: {path} (Test CPU, one core)"
    assert gated.detail == "decode 3.00 + motion 1.50 + tracking and rules 0.40 + events 0.10"
    whole = host_work(Deployment(10, 10.0, (1280, 720), 1.0), host_cost=path, cores=3)
    assert (whole.ms_per_frame, whole.cores) == (pytest.approx(3.5), 3)
    given = host_work(Deployment(10, 10.0, (1280, 720)), ms_per_frame=7.5)
    assert (given.ms_per_frame, given.source) == (7.5, "user-given (--host-ms-per-frame)")
    assert not host_work(Deployment(10, 10.0, (1280, 720))).counted


def test_host_work_assumptions_and_json(tmp_path: Path) -> None:
    path = write(tmp_path, "box", [rec(fps=100.0)], cores=2)
    p = plan(tmp_path, cameras=4, host=HostWork(5.0, "user-given (--host-ms-per-frame)"))
    by = {a.name: a for a in p.assumptions}
    host = by["host work per frame (decode, motion analysis, tracking and rules, event path)"]
    assert (host.value, host.source) == ("5.00 core-ms", "user-given (--host-ms-per-frame)")
    cores = by["box: CPU cores per machine for host work"]
    assert (cores.value, cores.source) == ("2", f"bench record: {path} (environment.cpu.logical_cores)")
    assert by["box: detector core-ms per image (cores shared with host work)"].value == "20.00"
    eff = by["pipeline efficiency (watch / model-only throughput)"]
    assert (eff.value, eff.source) == ("1 on CPU machines, 0.942 on GPUs", HOST_EFFICIENCY_SOURCE)
    d = p.to_dict()
    assert d["host"] == {
        "counted": True,
        "ms_per_frame": 5.0,
        "source": "user-given (--host-ms-per-frame)",
        "detail": "",
        "cores": None,
    }
    m = d["machines"][0]
    assert (m["host_ms_per_frame"], m["host_cores"], m["bottleneck"], m["detector_core_ms"]) == (
        5.0,
        2.0,
        "detector",
        20.0,
    )
    off = plan(tmp_path, cameras=4).to_dict()
    assert off["host"]["counted"] is False and off["host"]["source"].startswith("no --host-cost or --host-ms-per-frame")
    assert "optimistic" in off["host"]["source"] and off["machines"][0]["host_ms_per_frame"] is None


def test_counting_host_work_needs_the_machines_cores(tmp_path: Path) -> None:
    path = write(tmp_path, "box", [rec(fps=100.0)])  # a result whose environment records no cores
    with pytest.raises(
        InvalidInputError, match=rf"^box: its bench result {path} records no CPU core count; give --host-cores N$"
    ):
        plan(tmp_path, host=HostWork(5.0))
    assert plan(tmp_path, host=HostWork(5.0, cores=4)).machines[0].host_cores == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ms_per_frame": -1.0}, "--host-ms-per-frame must be a number of at least 0, got -1.0"),
        ({"ms_per_frame": float("nan")}, "--host-ms-per-frame must be a number of at least 0"),
        ({"ms_per_frame": 1.0, "cores": 0}, "--host-cores must be above 0, got 0"),
    ],
)
def test_bad_host_work(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        HostWork(**kwargs)


def test_a_host_cost_file_and_a_figure_are_not_both_taken(tmp_path: Path) -> None:
    path = write_host_cost(host_cost_doc(), tmp_path / "h.json")
    with pytest.raises(InvalidInputError, match="^give --host-cost FILE or --host-ms-per-frame X, not both$"):
        host_work(Deployment(10, 10.0, (1280, 720)), host_cost=path, ms_per_frame=5.0)
